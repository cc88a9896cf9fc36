// gcra: the generic cell rate algorithm. Same parameters and the same
// decisions as token_bucket, with one timestamp of state: the theoretical
// arrival time (TAT), the moment the bucket would be full again.
//
// TAT is kept as whole nanoseconds plus a fraction in 1/units_per_ns() of a
// nanosecond, so an emission interval that is not a whole number of
// nanoseconds (3 per second) never rounds.
//
// Queueing (max_wait > 0): a request that would take TAT more than the
// bucket's size ahead of now is allowed with Decision::wait when the excess
// is at most max_wait; the wait is that excess.
#pragma once

#include <cstdint>

#include "sluice/decision.h"
#include "sluice/limit.h"

namespace sluice::core {

struct GcraState {
  int64_t tat_ns;
  int64_t tat_frac;  // in [0, units_per_ns)
};

struct GcraStep {
  Decision decision;
  GcraState next;  // equal to the input state when denied
};

GcraState gcra_fresh(Nanos now);
// Writes the decision in place and returns the next state: the form stores
// call (core/step.h says why). The second form returns both.
GcraState gcra(const Limit& limit, const GcraState& state, Nanos now, uint64_t cost, Nanos max_wait,
               Decision& decision);
inline GcraStep gcra(const Limit& limit, const GcraState& state, Nanos now, uint64_t cost,
                     Nanos max_wait = Nanos{0}) {
  GcraStep step;
  step.next = gcra(limit, state, now, cost, max_wait, step.decision);
  return step;
}

}  // namespace sluice::core
