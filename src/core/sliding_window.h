// sliding_window (counter): estimates the requests of the last window-length
// interval from two epoch-aligned window counters,
//   estimate = previous * (window - elapsed) / window + current,
// and allows iff estimate + cost <= limit. The comparison is done on the
// products (times window), so no division rounds a decision. Never admits
// 2 x limit or more in any window-length interval (docs/ARCHITECTURE.md).
#pragma once

#include <cstdint>

#include "sluice/decision.h"
#include "sluice/limit.h"

namespace sluice::core {

struct SlidingWindowState {
  int64_t window_index;
  uint32_t current;   // allowed in window `window_index`
  uint32_t previous;  // allowed in window `window_index - 1`
};

struct SlidingWindowStep {
  Decision decision;
  SlidingWindowState next;  // equal to the input state when denied
};

SlidingWindowState sliding_window_fresh(const Limit& limit, Nanos now);
// Writes the decision in place and returns the next state: the form stores
// call (core/step.h says why). The second form returns both.
SlidingWindowState sliding_window(const Limit& limit, const SlidingWindowState& state, Nanos now,
                                  uint64_t cost, Decision& decision);
inline SlidingWindowStep sliding_window(const Limit& limit, const SlidingWindowState& state,
                                        Nanos now, uint64_t cost) {
  SlidingWindowStep step;
  step.next = sliding_window(limit, state, now, cost, step.decision);
  return step;
}

}  // namespace sluice::core
