#include "core/gcra.h"

#include "core/int_math.h"

namespace sluice::core {

GcraState gcra_fresh(Nanos now) {
  return {now.count(), 0};
}

GcraState gcra(const Limit& limit, const GcraState& state, Nanos now, uint64_t cost, Nanos max_wait,
               Decision& decision) {
  const int64_t unit = limit.token_units();
  const int64_t rate = limit.units_per_ns();
  const int64_t full = static_cast<int64_t>(limit.size()) * unit;
  const int64_t need = static_cast<int64_t>(cost) * unit;

  // debt = max(0, TAT - now) in units (ns * rate): the tokens missing from a
  // full bucket. It never exceeds `full` plus the queueing debt (each at most
  // 2^62 and 2^61 units), so it fits 64 bits; the difference of
  // timestamps is formed in 128 bits because TAT may lie decades in the past.
  int64_t debt = 0;
  const i128 ahead = static_cast<i128>(state.tat_ns - now.count()) * rate + state.tat_frac;
  if (ahead > 0) debt = static_cast<int64_t>(ahead);
  const int64_t queue = debt_allowed(max_wait.count(), rate);

  // debt + need reaches 2^63 when a full-size request meets an empty bucket of
  // the largest exact size (full = 2^62): form the sum in 128 bits.
  const i128 wanted = static_cast<i128>(debt) + need;

  GcraState next;
  decision = Decision{};
  decision.limit = limit.size();
  if (wanted <= full) {
    const int64_t new_debt = debt + need;
    decision.allowed = true;
    decision.remaining = static_cast<uint64_t>((full - new_debt) / unit);
    decision.reset_after = Nanos{ceil_div(new_debt, rate)};
    next = {now.count() + new_debt / rate, new_debt % rate};
  } else if (wanted - full <= queue) {
    // Queued: TAT moves on as for any charge; the request's turn comes when
    // TAT is back within the bucket's size of now.
    const int64_t new_debt = static_cast<int64_t>(wanted);
    decision.allowed = true;
    decision.remaining = 0;
    decision.reset_after = Nanos{ceil_div(new_debt, rate)};
    decision.wait = Nanos{ceil_div(static_cast<int64_t>(wanted - full), rate)};
    next = {now.count() + new_debt / rate, new_debt % rate};
  } else {
    decision.allowed = false;
    // A `now` earlier than a previous call's (caller-supplied time running
    // backwards) can put the debt above `full`: nothing is left then.
    decision.remaining = debt >= full ? 0 : static_cast<uint64_t>((full - debt) / unit);
    decision.reset_after = Nanos{ceil_div(debt, rate)};
    // Beyond the debt a queued request may take (0 without max_wait).
    decision.retry_after = Nanos{ceil_div(static_cast<int64_t>(wanted - full - queue), rate)};
    next = state;
  }
  return next;
}

}  // namespace sluice::core
