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

Status check_max_wait(const Limit& limit, Nanos max_wait) {
  if (max_wait.count() < 0)
    return Error{ErrorCode::kInvalidArgument, "max_wait must not be negative"};
  if (max_wait.count() > 0 && !queues_requests(limit.algorithm())) {
    return Error{ErrorCode::kInvalidArgument,
                 std::string(algorithm_name(limit.algorithm())) +
                     " cannot queue a request (max_wait): only token_bucket and gcra can go "
                     "into debt to reserve a later turn"};
  }
  return {};
}

}  // namespace sluice::core
