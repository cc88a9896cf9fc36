#include "core/fixed_window.h"

#include "core/int_math.h"

namespace sluice::core {

FixedWindowState fixed_window_fresh(const Limit& limit, Nanos now) {
  return {floor_div(now.count(), limit.period().count()), 0};
}

FixedWindowStep fixed_window(const Limit& limit, const FixedWindowState& state, Nanos now,
                             uint64_t cost) {
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

  FixedWindowStep step;
  step.decision.limit = limit.size();
  if (after <= max) {
    step.decision.allowed = true;
    step.decision.remaining = static_cast<uint64_t>(max - after);
    step.decision.reset_after = Nanos{window_end_in};
    step.next = {index, after};
  } else {
    step.decision.allowed = false;
    step.decision.remaining = static_cast<uint64_t>(max - count);
    step.decision.reset_after = Nanos{count > 0 ? window_end_in : 0};
    step.decision.retry_after = Nanos{window_end_in};
    step.next = state;
  }
  return step;
}

}  // namespace sluice::core
