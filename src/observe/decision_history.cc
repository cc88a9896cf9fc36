#include "observe/decision_history.h"

namespace sluice::observe {

namespace {

constexpr uint64_t kCountMask = 0xffff'ffff;

uint32_t tag_of(int64_t unix_second) {
  return static_cast<uint32_t>(static_cast<uint64_t>(unix_second));
}

size_t slot_of(int64_t unix_second, size_t slots) {
  const auto s = static_cast<uint64_t>(unix_second);
  return static_cast<size_t>(s % slots);
}

}  // namespace

void RouteHistory::record(int64_t unix_second, HistoryResult result) {
  std::atomic<uint64_t>& word = slots_[slot_of(unix_second, kSlots)][static_cast<size_t>(result)];
  const uint32_t tag = tag_of(unix_second);
  uint64_t seen = word.load(std::memory_order_relaxed);
  for (;;) {
    const auto seen_tag = static_cast<uint32_t>(seen >> 32);
    uint64_t next;
    if (seen_tag == tag) {
      if ((seen & kCountMask) == kCountMask) return;  // full: the count stays at its most
      next = seen + 1;
    } else {
      // The slot counts a later second (this decision's thread stalled a
      // whole turn of the ring): too old to keep.
      if (static_cast<int32_t>(seen_tag - tag) > 0) return;
      next = (static_cast<uint64_t>(tag) << 32) | 1;
    }
    if (word.compare_exchange_weak(seen, next, std::memory_order_relaxed)) return;
  }
}

std::vector<uint64_t> RouteHistory::read(int64_t end, size_t seconds, HistoryResult result) const {
  std::vector<uint64_t> counts(seconds, 0);
  for (size_t i = 0; i < seconds; ++i) {
    const int64_t second = end - static_cast<int64_t>(seconds - i);
    const uint64_t word = slots_[slot_of(second, kSlots)][static_cast<size_t>(result)].load(
        std::memory_order_relaxed);
    if (static_cast<uint32_t>(word >> 32) == tag_of(second)) counts[i] = word & kCountMask;
  }
  return counts;
}

std::shared_ptr<RouteHistory> DecisionHistory::route(const std::string& name) {
  std::lock_guard lock(mutex_);
  std::weak_ptr<RouteHistory>& held = routes_[name];
  std::shared_ptr<RouteHistory> ring = held.lock();
  if (ring == nullptr) {
    ring = std::make_shared<RouteHistory>();
    held = ring;
  }
  return ring;
}

std::map<std::string, DecisionHistory::Counts> DecisionHistory::read(int64_t end,
                                                                     size_t seconds) const {
  std::map<std::string, Counts> out;
  std::lock_guard lock(mutex_);
  for (auto it = routes_.begin(); it != routes_.end();) {
    const std::shared_ptr<RouteHistory> ring = it->second.lock();
    if (ring == nullptr) {
      it = routes_.erase(it);  // its routes left the config in force
      continue;
    }
    out[it->first] = Counts{ring->read(end, seconds, HistoryResult::kAllowed),
                            ring->read(end, seconds, HistoryResult::kDenied),
                            ring->read(end, seconds, HistoryResult::kError)};
    ++it;
  }
  return out;
}

}  // namespace sluice::observe
