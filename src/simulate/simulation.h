// The engine of `sluice simulate`: traffic (built-in scenarios or a parsed
// trace), its replay against all five algorithms on simulated time, and the
// most that each algorithm let through in any window-length interval.
//
// Pure computation: no I/O, no real clock. Every number depends only on the
// traffic and the limit, so tests can state them exactly.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/clock.h"
#include "sluice/limit.h"
#include "sluice/result.h"

namespace sluice::simulate {

struct SimRequest {
  Nanos at;       // since the Unix epoch
  uint32_t key;   // index into Traffic::keys
  uint64_t cost;  // >= 1
  uint32_t line;  // line of a trace file; 0 for generated traffic
};

struct Traffic {
  std::string name;         // the scenario's name, or "trace"
  std::string description;  // one line: what the traffic is, e.g. "one request every 300ms for 5m"
  std::string source;       // the trace file, for error messages; empty for scenarios
  std::vector<std::string> keys;
  std::vector<SimRequest> requests;  // sorted by time
};

// "N per W", applied by every algorithm: token_bucket and gcra hold N tokens
// and refill N per W; the window algorithms allow N per window W.
struct SimLimit {
  uint64_t limit = 100;
  Nanos window = std::chrono::minutes(1);
};

// The largest N: sliding_log keeps one entry per request, and generated
// scenarios make up to 10 x N requests.
inline constexpr uint64_t kMaxSimLimit = Limit::kMaxSlidingLogLimit;

// "boundary-burst", "steady", "bursty": the scenarios make_scenario builds.
std::span<const std::string_view> scenario_names();

// The scenario whose requests are held by a slow upstream; `sluice simulate`
// replays it with slow_upstream.h, not as plain traffic.
inline constexpr std::string_view kSlowUpstreamScenario = "slow-upstream";

// The scenario's traffic, scaled to `limit` (the defaults give the numbers in
// the comments of simulation.cc). Error for an unknown name (naming every
// scenario `sluice simulate` knows) or a limit outside [1, kMaxSimLimit].
Result<Traffic> make_scenario(std::string_view name, const SimLimit& limit);

struct AlgorithmResult {
  Algorithm algorithm;
  uint64_t allowed = 0;  // requests
  uint64_t denied = 0;   // requests
  // The most cost allowed to one key within any half-open interval of the
  // limit's period (Limit::period(): the window, or a full bucket's refill time).
  uint64_t max_in_window = 0;
};

// The five limits "N per W", in the order results are reported.
Result<std::vector<Limit>> simulation_limits(const SimLimit& limit);

// Replays `traffic` through a fresh memory store, each algorithm keeping its own
// state per key. Error if the limit is invalid, or a request's cost exceeds N
// (such a request could never be allowed): "source:line: message" for traces.
Result<std::vector<AlgorithmResult>> replay(const Traffic& traffic, const SimLimit& limit);

struct AllowedEvent {
  Nanos at;
  uint64_t cost;
};

// The largest total cost of events inside any half-open interval [s, s + window).
// `events` must be sorted by time. Two pointers, linear time.
uint64_t max_in_window(std::span<const AllowedEvent> events, Nanos window);

}  // namespace sluice::simulate
