#include "core/token_bucket.h"

#include <algorithm>

#include "core/int_math.h"

namespace sluice::core {

TokenBucketState token_bucket_fresh(const Limit& limit, Nanos now) {
  return {static_cast<int64_t>(limit.size()) * limit.token_units(), now.count()};
}

TokenBucketStep token_bucket(const Limit& limit, const TokenBucketState& state, Nanos now,
                             uint64_t cost) {
  const int64_t unit = limit.token_units();
  const int64_t rate = limit.units_per_ns();
  const int64_t full = static_cast<int64_t>(limit.size()) * unit;

  // Refill. (elapsed * rate) overflows 64 bits after decades of idleness at
  // high rates: an overflow means full. Time that runs backwards refills nothing.
  int64_t level = state.level_units;
  const int64_t elapsed = now.count() - state.last_ns;
  if (elapsed > 0) {
    int64_t added;
    if (__builtin_mul_overflow(elapsed, rate, &added) || added >= full - level) {
      level = full;
    } else {
      level += added;
    }
  }
  const int64_t last = std::max(state.last_ns, now.count());
  const int64_t need = static_cast<int64_t>(cost) * unit;

  TokenBucketStep step;
  step.decision.limit = limit.size();
  if (level >= need) {
    const int64_t left = level - need;
    step.decision.allowed = true;
    step.decision.remaining = static_cast<uint64_t>(left / unit);
    // rate is 1 for most limits (100 per minute, 10 per second...): no division.
    step.decision.reset_after = Nanos{rate == 1 ? full - left : ceil_div(full - left, rate)};
    step.next = {left, last};
  } else {
    step.decision.allowed = false;
    step.decision.remaining = static_cast<uint64_t>(level / unit);
    step.decision.reset_after = Nanos{ceil_div(full - level, rate)};
    // The shortest wait that refills the missing units; ceil so that retrying
    // exactly then succeeds and 1 ns earlier does not.
    step.decision.retry_after = Nanos{ceil_div(need - level, rate)};
    step.next = state;
  }
  return step;
}

}  // namespace sluice::core
