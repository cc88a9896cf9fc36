// `sluice simulate --scenario slow-upstream`: why a rate limit does not
// protect a slow upstream and a concurrency limit does.
//
// One key sends requests at half the rate "N per W" allows (one every 2W/N,
// for 10 W: 5N requests), and the upstream takes W/2 to answer each. Every
// rate algorithm lets all of them through, so N/4 pile up at the upstream at
// once; a concurrency limit of max(1, N/10) (lease W) keeps at most that many
// in flight and denies the rest. With 100 per minute: one request every 1.2s
// for 10 minutes, each held 30s: 25 in flight under every rate limit, 10
// under concurrency max 10.
//
// Pure computation on simulated time (a one-shard MemoryStore, `now` passed
// in): a request's slot is given back (Store::refund) when its answer
// completes, as the gateway gives it back.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "simulate/simulate_report.h"
#include "simulate/simulation.h"
#include "sluice/result.h"

namespace sluice::simulate {

struct SlowUpstream {
  Traffic traffic;
  Nanos upstream_time{0};  // how long the upstream takes to answer each request
  uint64_t max = 1;        // the concurrency limit's max
};

// The scenario for "N per W" (see above); an error for a limit outside
// [1, kMaxSimLimit].
Result<SlowUpstream> make_slow_upstream(const SimLimit& limit);

struct InFlightResult {
  Algorithm algorithm;
  uint64_t allowed = 0;
  uint64_t denied = 0;
  uint64_t max_in_flight = 0;  // the most requests at the upstream at one instant
};

// The five rate algorithms "N per W", then concurrency max with lease W.
Result<std::vector<InFlightResult>> replay_in_flight(const SlowUpstream& scenario,
                                                     const SimLimit& limit);

std::string format_in_flight_report(ReportFormat format, const SlowUpstream& scenario,
                                    const SimLimit& limit,
                                    const std::vector<InFlightResult>& results);

}  // namespace sluice::simulate
