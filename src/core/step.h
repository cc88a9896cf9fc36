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

}  // namespace detail

// The state of a key never seen (a full bucket, an empty window).
// Not for sliding_log.
PackedState fresh_state(const Limit& limit, Nanos now);

// Decides on `state` and returns the next state (the input state when
// denied), writing the decision into `decision`. Not for sliding_log. Inline;
// with link-time optimisation (the Release build) the algorithms inline into
// it too. `max_wait` (queueing) is read by the bucket algorithms only:
// callers check queues_requests() first.
//
// The decision is written in place, not returned inside a struct: a caller
// copying a returned Decision reads it with wide loads of the narrow stores
// that just built it, which stalls store-to-load forwarding; in the memory
// store that copy was a fifth of a decision's time (perf,
// bench/results/2026-core.md, "The floor, two threads, and a concurrency slot").
inline PackedState step(const Limit& limit, PackedState state, Nanos now, uint64_t cost,
                        Nanos max_wait, Decision& decision) {
  using detail::pack;
  using detail::unpack;
  switch (limit.algorithm()) {
    case Algorithm::kTokenBucket:
      return pack(
          token_bucket(limit, unpack<TokenBucketState>(state), now, cost, max_wait, decision));
    case Algorithm::kGcra:
      return pack(gcra(limit, unpack<GcraState>(state), now, cost, max_wait, decision));
    case Algorithm::kFixedWindow:
      return pack(fixed_window(limit, unpack<FixedWindowState>(state), now, cost, decision));
    case Algorithm::kSlidingWindow:
      return pack(sliding_window(limit, unpack<SlidingWindowState>(state), now, cost, decision));
    case Algorithm::kSlidingLog:
    case Algorithm::kConcurrency:
      break;
  }
  decision = Decision{};
  return state;
}

// The same, returning both.
inline PackedStep step(const Limit& limit, PackedState state, Nanos now, uint64_t cost,
                       Nanos max_wait = Nanos{0}) {
  PackedStep s;
  s.next = step(limit, state, now, cost, max_wait, s.decision);
  return s;
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
