// fixed_window: at most `limit` per window, windows aligned to the Unix epoch
// (window index = floor(now / window)). Simple, and admits up to 2 x limit
// across a window boundary — kept on purpose to show the seed's flaw.
#pragma once

#include <cstdint>

#include "sluice/decision.h"
#include "sluice/limit.h"

namespace sluice::core {

struct FixedWindowState {
  int64_t window_index;
  int64_t count;
};

struct FixedWindowStep {
  Decision decision;
  FixedWindowState next;  // equal to the input state when denied
};

FixedWindowState fixed_window_fresh(const Limit& limit, Nanos now);
// Writes the decision in place and returns the next state: the form stores
// call (core/step.h says why). The second form returns both.
FixedWindowState fixed_window(const Limit& limit, const FixedWindowState& state, Nanos now,
                              uint64_t cost, Decision& decision);
inline FixedWindowStep fixed_window(const Limit& limit, const FixedWindowState& state, Nanos now,
                                    uint64_t cost) {
  FixedWindowStep step;
  step.next = fixed_window(limit, state, now, cost, step.decision);
  return step;
}

}  // namespace sluice::core
