#include "observe/top_keys.h"

#include <algorithm>

namespace sluice::observe {

void TopKeys::record(std::string_view key) {
  if (capacity_ == 0) return;
  if (key.size() > kMaxKeyBytes) key = key.substr(0, kMaxKeyBytes);
  std::lock_guard lock(mutex_);
  Entry* min = nullptr;
  for (Entry& e : entries_) {
    if (e.key == key) {
      ++e.count;
      return;
    }
    if (min == nullptr || e.count < min->count) min = &e;
  }
  if (entries_.size() < capacity_) {
    entries_.push_back(Entry{std::string(key), 1, 0});
    return;
  }
  // Space-saving: the new key replaces the least counted one and inherits its
  // count as the bound of its error.
  min->key.assign(key);
  min->error = min->count;
  ++min->count;
}

std::vector<TopKeys::Entry> TopKeys::top() const {
  std::vector<Entry> out;
  {
    std::lock_guard lock(mutex_);
    out = entries_;
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Entry& a, const Entry& b) { return a.count > b.count; });
  return out;
}

void TopKeys::clear() {
  std::lock_guard lock(mutex_);
  entries_.clear();
}

}  // namespace sluice::observe
