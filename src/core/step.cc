#include "core/step.h"

#include <string>

namespace sluice::core {

PackedState fresh_state(const Limit& limit, Nanos now) {
  switch (limit.algorithm()) {
    case Algorithm::kTokenBucket:
      return detail::pack(token_bucket_fresh(limit, now));
    case Algorithm::kGcra:
      return detail::pack(gcra_fresh(now));
    case Algorithm::kFixedWindow:
      return detail::pack(fixed_window_fresh(limit, now));
    case Algorithm::kSlidingWindow:
      return detail::pack(sliding_window_fresh(limit, now));
    case Algorithm::kSlidingLog:
    case Algorithm::kConcurrency:
      break;
  }
  return {0, 0};
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
