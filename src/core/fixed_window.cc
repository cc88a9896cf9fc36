#include "core/fixed_window.h"

#include "core/int_math.h"

namespace sluice::core {

FixedWindowState fixed_window_fresh(const Limit& limit, Nanos now) {
  return {floor_div(now.count(), limit.period().count()), 0};
}

FixedWindowState fixed_window(const Limit& limit, const FixedWindowState& state, Nanos now,
                              uint64_t cost, Decision& decision) {
  const int64_t window = limit.period().count();
  const int64_t max = static_cast<int64_t>(limit.size());
  int64_t index = floor_div(now.count(), window);
  int64_t count = 0;
  // A state from a later window (time ran backwards) keeps counting there.
  if (state.window_index >= index) {
    index = state.window_index;
    count = state.count;
  }
  const int64_t window_end_in = (index + 1) * window - now.count();
  const int64_t after = count + static_cast<int64_t>(cost);

  FixedWindowState next;
  decision = Decision{};
  decision.limit = limit.size();
  if (after <= max) {
    decision.allowed = true;
    decision.remaining = static_cast<uint64_t>(max - after);
    decision.reset_after = Nanos{window_end_in};
    next = {index, after};
  } else {
    decision.allowed = false;
    // A settled cost (core/debit.h) may have taken the count past the limit.
    decision.remaining = count < max ? static_cast<uint64_t>(max - count) : 0;
    decision.reset_after = Nanos{count > 0 ? window_end_in : 0};
    decision.retry_after = Nanos{window_end_in};
    next = state;
  }
  return next;
}

}  // namespace sluice::core
