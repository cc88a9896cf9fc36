// ConsumerTable: consumer id -> plan index, for a million consumers and more
// (the `consumers.file` of docs/CONFIG.md). Built once (the consumers file
// at load or reload, or a compaction of runtime changes), then read only.
//
// Layout, so that each consumer costs its id's bytes plus 16 bytes or so:
//   arena_    every id, back to back, in one string (no separators)
//   entries_  one {offset, length, plan} of 8 bytes per consumer
//   slots_    open addressing (linear probing, at most half full): {hash tag,
//             entry number + 1} of 8 bytes; 0 marks an empty slot
// A lookup hashes the id, probes from its slot and compares the id bytes only
// where the tag matches. The ids come from the operator's file, never from
// requests: a request chooses where a lookup starts, not how long the runs of
// full slots are.
//
// Thread-safety: immutable once built; share it freely.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::policy {

class ConsumerTable {
 public:
  // An id is at most this long (the entry keeps its length in 16 bits).
  static constexpr size_t kMaxIdBytes = 1024;

  // Collects (id, plan) pairs; build() makes the table. `expected` sizes it
  // once (no rehash while adding).
  class Builder {
   public:
    explicit Builder(size_t expected = 0, size_t expected_id_bytes = 0);
    // false when `id` is already in (the first one stays; `existing`, when
    // given, gets its number in the order of adding). `id` must be
    // 1..kMaxIdBytes bytes: another is refused with false too.
    bool add(std::string_view id, uint16_t plan, size_t* existing = nullptr);
    size_t size() const { return entries_.size(); }
    ConsumerTable build() &&;

   private:
    void grow();
    std::string arena_;
    std::vector<uint64_t> entries_;
    std::vector<uint64_t> slots_;
  };

  ConsumerTable() = default;

  // The plan index of `id`, if the table holds it.
  std::optional<uint16_t> find(std::string_view id) const;
  size_t size() const { return entries_.size(); }
  // What the table holds in memory (its own accounting: arena, entries and
  // slots as allocated, plus the object itself).
  size_t memory_bytes() const;
  // Every consumer, in the order they were added.
  void for_each(const std::function<void(std::string_view id, uint16_t plan)>& visit) const;

  // Equal when they hold the same consumers with the same plans.
  friend bool operator==(const ConsumerTable& a, const ConsumerTable& b);

 private:
  std::string arena_;
  std::vector<uint64_t> entries_;  // offset << 32 | length << 16 | plan
  std::vector<uint64_t> slots_;    // tag << 32 | entry + 1; 0 = empty
};

}  // namespace sluice::policy
