// One entry point over the fixed-size algorithms, for stores: every algorithm
// but sliding_log keeps 16 bytes of state, held here as two integers.
#pragma once

#include <cstdint>

#include "sluice/decision.h"
#include "sluice/limit.h"
#include "sluice/result.h"

namespace sluice::core {

struct PackedState {
  int64_t a;
  int64_t b;
};

struct PackedStep {
  Decision decision;
  PackedState next;
};

// The state of a key never seen (a full bucket, an empty window).
// Not for sliding_log.
PackedState fresh_state(const Limit& limit, Nanos now);

// Not for sliding_log.
PackedStep step(const Limit& limit, const PackedState& state, Nanos now, uint64_t cost);

// Checks a request's cost against a limit: 0 is invalid, and more than the
// limit's size could never be allowed however long the client waits.
Status check_cost(const Limit& limit, uint64_t cost);

}  // namespace sluice::core
