#include "policy/consumer_table.h"

#include <bit>
#include <cstring>

#include "util/fnv1a.h"
#include "util/mix64.h"

namespace sluice::policy {
namespace {

// FNV-1a, then a finaliser: the low bits pick the slot, so they must depend
// on every byte of the id.
uint64_t hash_of(std::string_view id) {
  return util::mix64(util::fnv1a64(id));
}

uint32_t tag_of(uint64_t hash) {
  return static_cast<uint32_t>(hash >> 32);
}

uint64_t make_entry(size_t offset, size_t length, uint16_t plan) {
  return static_cast<uint64_t>(offset) << 32 | static_cast<uint64_t>(length) << 16 | plan;
}
size_t entry_offset(uint64_t e) {
  return static_cast<size_t>(e >> 32);
}
size_t entry_length(uint64_t e) {
  return static_cast<size_t>((e >> 16) & 0xffff);
}
uint16_t entry_plan(uint64_t e) {
  return static_cast<uint16_t>(e & 0xffff);
}

std::string_view id_of(const std::string& arena, uint64_t entry) {
  return std::string_view(arena).substr(entry_offset(entry), entry_length(entry));
}

// At most half full: short probe runs, 16 bytes of slots per consumer at worst.
size_t slot_count_for(size_t consumers) {
  return std::bit_ceil(std::max<size_t>(16, consumers * 2));
}

// The slot holding `id`, or the empty slot where it would go.
size_t probe(const std::vector<uint64_t>& slots, const std::vector<uint64_t>& entries,
             const std::string& arena, std::string_view id, uint64_t hash) {
  const size_t mask = slots.size() - 1;
  const uint32_t tag = tag_of(hash);
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    const uint64_t slot = slots[i];
    if (slot == 0) return i;
    if (static_cast<uint32_t>(slot >> 32) == tag) {
      const uint64_t entry = entries[(slot & 0xffffffff) - 1];
      if (id_of(arena, entry) == id) return i;
    }
  }
}

}  // namespace

ConsumerTable::Builder::Builder(size_t expected, size_t expected_id_bytes)
    : slots_(slot_count_for(expected), 0) {
  entries_.reserve(expected);
  arena_.reserve(expected_id_bytes);
}

void ConsumerTable::Builder::grow() {
  std::vector<uint64_t> slots(slots_.size() * 2, 0);
  for (size_t e = 0; e < entries_.size(); ++e) {
    const std::string_view id = id_of(arena_, entries_[e]);
    const uint64_t hash = hash_of(id);
    const size_t at = probe(slots, entries_, arena_, id, hash);
    slots[at] = static_cast<uint64_t>(tag_of(hash)) << 32 | (e + 1);
  }
  slots_ = std::move(slots);
}

bool ConsumerTable::Builder::add(std::string_view id, uint16_t plan, size_t* existing) {
  if (id.empty() || id.size() > kMaxIdBytes) return false;
  if (arena_.size() + id.size() > UINT32_MAX) return false;  // offsets are 32 bits
  if ((entries_.size() + 1) * 2 > slots_.size()) grow();
  const uint64_t hash = hash_of(id);
  const size_t at = probe(slots_, entries_, arena_, id, hash);
  if (slots_[at] != 0) {
    if (existing != nullptr) *existing = (slots_[at] & 0xffffffff) - 1;
    return false;
  }
  entries_.push_back(make_entry(arena_.size(), id.size(), plan));
  arena_.append(id);
  slots_[at] = static_cast<uint64_t>(tag_of(hash)) << 32 | entries_.size();
  return true;
}

ConsumerTable ConsumerTable::Builder::build() && {
  ConsumerTable table;
  arena_.shrink_to_fit();
  entries_.shrink_to_fit();
  table.arena_ = std::move(arena_);
  table.entries_ = std::move(entries_);
  table.slots_ = std::move(slots_);
  return table;
}

std::optional<uint16_t> ConsumerTable::find(std::string_view id) const {
  if (entries_.empty()) return std::nullopt;
  const size_t at = probe(slots_, entries_, arena_, id, hash_of(id));
  const uint64_t slot = slots_[at];
  if (slot == 0) return std::nullopt;
  return entry_plan(entries_[(slot & 0xffffffff) - 1]);
}

size_t ConsumerTable::memory_bytes() const {
  return sizeof(*this) + arena_.capacity() + entries_.capacity() * sizeof(uint64_t) +
         slots_.capacity() * sizeof(uint64_t);
}

void ConsumerTable::for_each(
    const std::function<void(std::string_view id, uint16_t plan)>& visit) const {
  for (const uint64_t entry : entries_) visit(id_of(arena_, entry), entry_plan(entry));
}

bool operator==(const ConsumerTable& a, const ConsumerTable& b) {
  if (a.size() != b.size()) return false;
  for (const uint64_t entry : a.entries_) {
    if (b.find(id_of(a.arena_, entry)) != entry_plan(entry)) return false;
  }
  return true;
}

}  // namespace sluice::policy
