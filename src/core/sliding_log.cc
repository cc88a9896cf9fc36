#include "core/sliding_log.h"

#include <algorithm>

#include "core/inline_log.h"

namespace sluice::core {

void SlidingLog::pop_front(size_t n) {
  for (size_t i = 0; i < n; ++i) {
    total_ -= data_[head_].cost;
    head_ = (head_ + 1) & (capacity_ - 1);
  }
  size_ -= n;
  if (size_ == 0) head_ = 0;
}

void SlidingLog::push_back(int64_t at_ns, uint64_t cost) {
  total_ += cost;
  if (size_ > 0) {
    Entry& last = data_[(head_ + size_ - 1) & (capacity_ - 1)];
    // Keep the log sorted even if time ran backwards: a late entry joins the last.
    if (at_ns <= last.at_ns) {
      last.cost += cost;
      return;
    }
  }
  if (size_ == capacity_) {
    const size_t grown = capacity_ == 0 ? 4 : capacity_ * 2;
    auto data = std::make_unique<Entry[]>(grown);
    for (size_t i = 0; i < size_; ++i) data[i] = at(i);
    data_ = std::move(data);
    capacity_ = grown;
    head_ = 0;
  }
  data_[(head_ + size_) & (capacity_ - 1)] = {at_ns, cost};
  ++size_;
}

bool SlidingLog::take_back(int64_t at_ns, uint64_t cost) {
  size_t i = 0;
  while (i < size_ && at(i).at_ns < at_ns) ++i;
  bool taken = false;
  while (cost > 0 && i < size_) {
    Entry& e = data_[(head_ + i) & (capacity_ - 1)];
    const uint64_t n = std::min(e.cost, cost);
    e.cost -= n;
    total_ -= n;
    cost -= n;
    taken = taken || n > 0;
    if (e.cost > 0) {
      ++i;
      continue;
    }
    // Close the gap: later entries move down by one (the log stays sorted).
    for (size_t j = i; j + 1 < size_; ++j)
      data_[(head_ + j) & (capacity_ - 1)] = data_[(head_ + j + 1) & (capacity_ - 1)];
    --size_;
  }
  if (size_ == 0) head_ = 0;
  return taken;
}

template <class Log>
size_t sliding_log(const Limit& limit, const Log& log, Nanos now, uint64_t cost,
                   Decision& decision) {
  const int64_t window = limit.period().count();
  const int64_t horizon = now.count() - window;  // entries at or before it are out
  decision = Decision{};
  uint64_t used = log.total_cost();
  size_t expired = 0;
  while (expired < log.size() && log.at(expired).at_ns <= horizon) {
    used -= log.at(expired).cost;
    ++expired;
  }
  decision.limit = limit.size();
  const uint64_t max = limit.size();
  if (used + cost <= max) {
    decision.allowed = true;
    decision.remaining = max - used - cost;
    const int64_t newest = log.empty() ? now.count() : std::max(log.back().at_ns, now.count());
    decision.reset_after = Nanos{newest + window - now.count()};
    return expired;
  }
  decision.allowed = false;
  decision.remaining = max - used;
  decision.reset_after = Nanos{log.back().at_ns + window - now.count()};
  // Oldest first, each entry leaves the window at at_ns + window; wait for
  // just enough of them to make room for `cost`.
  uint64_t in_window = used;
  for (size_t i = expired; i < log.size(); ++i) {
    in_window -= log.at(i).cost;
    if (in_window + cost <= max) {
      decision.retry_after = Nanos{log.at(i).at_ns + window - now.count()};
      if (limit.algorithm() == Algorithm::kConcurrency)
        decision.retry_after = concurrency_retry_after(decision.retry_after);
      break;
    }
  }
  return expired;
}

template size_t sliding_log(const Limit&, const SlidingLog&, Nanos, uint64_t, Decision&);
template size_t sliding_log(const Limit&, const InlineLog&, Nanos, uint64_t, Decision&);

void sliding_log_commit(SlidingLog& log, size_t expired, Nanos now, uint64_t cost) {
  log.pop_front(expired);
  log.push_back(now.count(), cost);
}

}  // namespace sluice::core
