// One entry point over the fixed-size algorithms, for stores: every algorithm
// but sliding_log keeps 16 bytes of state, held here as two integers.
#pragma once

#include <bit>
#include <cstdint>

#include "core/fixed_window.h"
#include "core/gcra.h"
#include "core/sliding_window.h"
#include "core/token_bucket.h"
#include "sluice/decision.h"
#include "sluice/limit.h"
#include "sluice/result.h"

namespace sluice::core {

struct PackedState {
  int64_t a;
  int64_t b;
};

struct PackedStep {
  Decision decision;
  PackedState next;
};

namespace detail {

template <class S>
PackedState pack(const S& s) {
  static_assert(sizeof(S) == sizeof(PackedState));
  return std::bit_cast<PackedState>(s);
}

template <class S>
S unpack(const PackedState& p) {
  return std::bit_cast<S>(p);
}

// One algorithm's step on packed state (`extra`: the queueing max_wait of
// the bucket algorithms).
template <class S, class Step, class... Extra>
PackedStep run(Step algorithm_step, const Limit& limit, PackedState state, Nanos now, uint64_t cost,
               Extra... extra) {
  const auto s = algorithm_step(limit, unpack<S>(state), now, cost, extra...);
  return {s.decision, pack(s.next)};
}

}  // namespace detail

// The state of a key never seen (a full bucket, an empty window).
// Not for sliding_log.
PackedState fresh_state(const Limit& limit, Nanos now);

// Not for sliding_log. Inline; with link-time optimisation (the Release
// build) the algorithms inline into it too. `max_wait` (queueing) is read
// by the bucket algorithms only: callers check queues_requests() first.
inline PackedStep step(const Limit& limit, PackedState state, Nanos now, uint64_t cost,
                       Nanos max_wait = Nanos{0}) {
  switch (limit.algorithm()) {
    case Algorithm::kTokenBucket:
      return detail::run<TokenBucketState>(token_bucket, limit, state, now, cost, max_wait);
    case Algorithm::kGcra:
      return detail::run<GcraState>(gcra, limit, state, now, cost, max_wait);
    case Algorithm::kFixedWindow:
      return detail::run<FixedWindowState>(fixed_window, limit, state, now, cost);
    case Algorithm::kSlidingWindow:
      return detail::run<SlidingWindowState>(sliding_window, limit, state, now, cost);
    case Algorithm::kSlidingLog:
    case Algorithm::kConcurrency:
      break;
  }
  return {Decision{}, state};
}

// Whether the algorithm can queue a request (AcquireRequest::max_wait): the
// buckets can go into debt; a window has no debt to reserve a later place in.
inline bool queues_requests(Algorithm algorithm) {
  return algorithm == Algorithm::kTokenBucket || algorithm == Algorithm::kGcra;
}

// Checks an AcquireRequest's max_wait against its limit's algorithm.
Status check_max_wait(const Limit& limit, Nanos max_wait);

// Checks a request's cost against a limit: 0 is invalid, and more than the
// limit's size could never be allowed however long the client waits.
Status check_cost(const Limit& limit, uint64_t cost);

}  // namespace sluice::core
