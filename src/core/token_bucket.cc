#include "core/token_bucket.h"

#include <algorithm>

#include "core/int_math.h"

namespace sluice::core {

TokenBucketState token_bucket_fresh(const Limit& limit, Nanos now) {
  return {static_cast<int64_t>(limit.size()) * limit.token_units(), now.count()};
}

TokenBucketState token_bucket_refill(const Limit& limit, const TokenBucketState& state, Nanos now) {
  const int64_t rate = limit.units_per_ns();
  const int64_t full = static_cast<int64_t>(limit.size()) * limit.token_units();
  // (elapsed * rate) overflows 64 bits after decades of idleness at high
  // rates: an overflow means full. Time that runs backwards refills nothing.
  // A level in debt (below 0) refills the same way.
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
  return {level, std::max(state.last_ns, now.count())};
}

TokenBucketState token_bucket(const Limit& limit, const TokenBucketState& state, Nanos now,
                              uint64_t cost, Nanos max_wait, Decision& decision) {
  const int64_t unit = limit.token_units();
  const int64_t rate = limit.units_per_ns();
  const int64_t full = static_cast<int64_t>(limit.size()) * unit;

  const TokenBucketState refilled = token_bucket_refill(limit, state, now);
  const int64_t level = refilled.level_units;
  const int64_t last = refilled.last_ns;
  const int64_t need = static_cast<int64_t>(cost) * unit;
  const int64_t debt = debt_allowed(max_wait.count(), rate);

  TokenBucketState next;
  decision = Decision{};
  decision.limit = limit.size();
  if (level >= need) {
    const int64_t left = level - need;
    decision.allowed = true;
    decision.remaining = static_cast<uint64_t>(left / unit);
    // rate is 1 for most limits (100 per minute, 10 per second...): no division.
    decision.reset_after = Nanos{rate == 1 ? full - left : ceil_div(full - left, rate)};
    next = {left, last};
  } else if (static_cast<i128>(need) - level <= debt) {
    // Queued: the level goes below empty; the request's turn comes when
    // refill has brought it back to empty.
    const int64_t left = level - need;
    decision.allowed = true;
    decision.remaining = 0;
    decision.reset_after = Nanos{ceil_div(static_cast<i128>(full) - left, i128{rate})};
    decision.wait = Nanos{ceil_div(-left, rate)};
    next = {left, last};
  } else {
    decision.allowed = false;
    // A level in debt (queued requests) leaves nothing.
    decision.remaining = level > 0 ? static_cast<uint64_t>(level / unit) : 0;
    decision.reset_after = Nanos{ceil_div(static_cast<i128>(full) - level, i128{rate})};
    // The shortest wait that refills the missing units (beyond the debt a
    // queued request may take); ceil so that retrying exactly then succeeds
    // and 1 ns earlier does not.
    decision.retry_after = Nanos{ceil_div(static_cast<i128>(need) - level - debt, i128{rate})};
    next = state;
  }
  return next;
}

}  // namespace sluice::core
