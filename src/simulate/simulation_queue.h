// `sluice simulate --delay`: a trace replayed against one bucket with a
// route's `delay` (queueing), to see when each request would be served.
//
// Pure computation on simulated time, as simulate/simulation.h.
#pragma once

#include <vector>

#include "simulate/simulation.h"
#include "sluice/clock.h"
#include "sluice/result.h"

namespace sluice::simulate {

// What happened to one request of the traffic (same index).
struct QueuedTurn {
  bool served = false;
  Nanos wait{0};  // served: how long it was held (0: at once)
};

// Replays `traffic` against token_bucket "N per W" (N tokens, N refilled per
// W; gcra serves at the same turns) as the gateway does with `delay`: a
// request is served at its arrival plus its wait, or denied when no wait up
// to `delay` would serve it. Clients never leave. Each key has its own
// bucket. Errors as replay(): an invalid limit, a cost above N.
Result<std::vector<QueuedTurn>> replay_queued(const Traffic& traffic, const SimLimit& limit,
                                              Nanos delay);

}  // namespace sluice::simulate
