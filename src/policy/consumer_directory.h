// ConsumerDirectory: the consumers in force, which PUT /admin/consumers/<id>
// changes at runtime. The one mutable thing a Policy holds (a reload builds a
// new Policy, and so a new directory, from the file).
//
// Reads are one atomic load of a shared_ptr to an immutable snapshot: the
// table loaded from the file plus a small map of the changes made since.
// A change copies that map (not the table) and swaps the snapshot; past 1024
// changes the map is folded into a new table, so the memory stays that of
// the file's consumers (the changes are written to the file too) and a
// change costs at most a copy of 1024 entries, a fold once per 1024 changes
// a copy of the table. Requests never add anything.
//
// Thread-safety: find() from any thread; set() from one thread at a time
// (the admin port's control thread).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "policy/consumer_table.h"

namespace sluice::policy {

class ConsumerDirectory {
 public:
  // Past `changes_before_fold` changes, they are folded into a new table.
  explicit ConsumerDirectory(std::shared_ptr<const ConsumerTable> table,
                             size_t changes_before_fold = 1024);

  // The plan index of consumer `id`, if it has one.
  std::optional<uint16_t> find(std::string_view id) const;
  // Puts `id` on plan `plan`; no plan: removes it. For the next find().
  void set(std::string_view id, std::optional<uint16_t> plan);
  // Consumers in force (table and changes together).
  size_t size() const;

 private:
  using Changes = std::map<std::string, std::optional<uint16_t>, std::less<>>;
  struct Snapshot {
    std::shared_ptr<const ConsumerTable> table;
    Changes changes;  // id -> plan, or nullopt: removed
  };
  const size_t changes_before_fold_;
  std::atomic<std::shared_ptr<const Snapshot>> current_;
};

}  // namespace sluice::policy
