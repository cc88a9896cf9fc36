// sliding_log: remembers every allowed request; allows iff the cost of the
// requests in (now - window, now] plus this cost is at most `limit`. Exact,
// with memory proportional to the limit (capped by Limit::kMaxSlidingLogLimit).
//
// Requests at the same nanosecond share one entry, so a log never holds more
// than `limit` entries.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "sluice/decision.h"
#include "sluice/limit.h"

namespace sluice::core {

class SlidingLog {
 public:
  struct Entry {
    int64_t at_ns;
    uint64_t cost;
  };

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  uint64_t total_cost() const { return total_; }
  const Entry& at(size_t i) const { return data_[(head_ + i) & (capacity_ - 1)]; }
  const Entry& back() const { return at(size_ - 1); }

  void pop_front(size_t n);
  // Appends, or adds to the last entry when it has the same timestamp.
  void push_back(int64_t at_ns, uint64_t cost);
  // Takes up to `cost` units out of the first entries at or after `at_ns`
  // (a refund); an entry left with none is removed, so the log never keeps
  // more entries than it has units. Returns whether any unit was taken.
  bool take_back(int64_t at_ns, uint64_t cost);

  size_t memory_bytes() const { return sizeof(SlidingLog) + capacity_ * sizeof(Entry); }

 private:
  std::unique_ptr<Entry[]> data_;
  size_t capacity_ = 0;  // a power of two, or 0
  size_t head_ = 0;
  size_t size_ = 0;
  uint64_t total_ = 0;
};

struct SlidingLogStep {
  Decision decision;
  size_t expired = 0;  // leading entries outside the window, to drop on commit
};

// Also concurrency's step (Limit::keeps_log()): the slots held are the log.
// `Log` is a SlidingLog or an InlineLog (core/inline_log.h), the same
// arithmetic on either (both instantiated in sliding_log.cc). Writes the
// decision in place (core/step.h says why) and returns how many leading
// entries are outside the window; the second form returns both.
template <class Log>
size_t sliding_log(const Limit& limit, const Log& log, Nanos now, uint64_t cost,
                   Decision& decision);
template <class Log>
SlidingLogStep sliding_log(const Limit& limit, const Log& log, Nanos now, uint64_t cost) {
  SlidingLogStep step;
  step.expired = sliding_log(limit, log, now, cost, step.decision);
  return step;
}

// A concurrency denial's retry_after from the log's wait (until the oldest
// slot's lease ends): at most 1 s, because a slot is usually given back long
// before its lease ends, and no store can know when. The Redis store applies
// the same to its script's answer.
inline constexpr Nanos kConcurrencyRetry{1'000'000'000};
inline Nanos concurrency_retry_after(Nanos lease_wait) {
  return lease_wait < kConcurrencyRetry ? lease_wait : kConcurrencyRetry;
}

// Applies an allowed step to the log: drops the `expired` entries, records the request.
void sliding_log_commit(SlidingLog& log, size_t expired, Nanos now, uint64_t cost);
inline void sliding_log_commit(SlidingLog& log, const SlidingLogStep& step, Nanos now,
                               uint64_t cost) {
  sliding_log_commit(log, step.expired, now, cost);
}

}  // namespace sluice::core
