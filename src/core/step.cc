#include "core/step.h"

#include <bit>
#include <string>

#include "core/fixed_window.h"
#include "core/gcra.h"
#include "core/sliding_window.h"
#include "core/token_bucket.h"

namespace sluice::core {
namespace {

template <class S>
PackedState pack(const S& s) {
  static_assert(sizeof(S) == sizeof(PackedState));
  return std::bit_cast<PackedState>(s);
}

template <class S>
S unpack(const PackedState& p) {
  return std::bit_cast<S>(p);
}

}  // namespace

PackedState fresh_state(const Limit& limit, Nanos now) {
  switch (limit.algorithm()) {
    case Algorithm::kTokenBucket:
      return pack(token_bucket_fresh(limit, now));
    case Algorithm::kGcra:
      return pack(gcra_fresh(now));
    case Algorithm::kFixedWindow:
      return pack(fixed_window_fresh(limit, now));
    case Algorithm::kSlidingWindow:
      return pack(sliding_window_fresh(limit, now));
    case Algorithm::kSlidingLog:
      break;
  }
  return {0, 0};
}

PackedStep step(const Limit& limit, const PackedState& state, Nanos now, uint64_t cost) {
  switch (limit.algorithm()) {
    case Algorithm::kTokenBucket: {
      auto s = token_bucket(limit, unpack<TokenBucketState>(state), now, cost);
      return {s.decision, pack(s.next)};
    }
    case Algorithm::kGcra: {
      auto s = gcra(limit, unpack<GcraState>(state), now, cost);
      return {s.decision, pack(s.next)};
    }
    case Algorithm::kFixedWindow: {
      auto s = fixed_window(limit, unpack<FixedWindowState>(state), now, cost);
      return {s.decision, pack(s.next)};
    }
    case Algorithm::kSlidingWindow: {
      auto s = sliding_window(limit, unpack<SlidingWindowState>(state), now, cost);
      return {s.decision, pack(s.next)};
    }
    case Algorithm::kSlidingLog:
      break;
  }
  return {Decision{}, state};
}

Status check_cost(const Limit& limit, uint64_t cost) {
  if (cost == 0) return Error{ErrorCode::kInvalidArgument, "cost must be at least 1"};
  if (cost > limit.size()) {
    return Error{ErrorCode::kCostExceedsLimit,
                 "cost " + std::to_string(cost) + " exceeds the limit's size " +
                     std::to_string(limit.size()) + " (" + limit.describe() +
                     "): this request can never be allowed"};
  }
  return {};
}

}  // namespace sluice::core
