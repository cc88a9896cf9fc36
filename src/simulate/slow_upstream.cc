#include "simulate/slow_upstream.h"

#include <algorithm>
#include <functional>
#include <queue>

#include "simulate/time_text.h"
#include "sluice/memory_store.h"
#include "util/json_escape.h"

namespace sluice::simulate {
namespace {

// 2026-01-01 12:00:00 UTC, as the other scenarios.
constexpr int64_t kNoonNs = int64_t{1'767'268'800} * 1'000'000'000;

}  // namespace

Result<SlowUpstream> make_slow_upstream(const SimLimit& limit) {
  if (Result<std::vector<Limit>> limits = simulation_limits(limit); !limits.ok()) {
    return limits.error();
  }
  const int64_t n = static_cast<int64_t>(limit.limit);
  const int64_t w = limit.window.count();
  SlowUpstream s;
  s.upstream_time = Nanos{w / 2};
  s.max = std::max<uint64_t>(1, limit.limit / 10);
  s.traffic.name = kSlowUpstreamScenario;
  s.traffic.keys.push_back("client");
  // One every 2W/N (half the allowed rate), evenly spaced in exact integers.
  for (int64_t k = 0; k < 5 * n; ++k) {
    s.traffic.requests.push_back(
        {Nanos{kNoonNs + static_cast<int64_t>(static_cast<__int128>(2 * w) * k / n)}, 0, 1, 0});
  }
  s.traffic.description = "one request every " + format_duration(Nanos{2 * w / n}) + " for " +
                          format_duration(Nanos{10 * w}) + " (" + std::to_string(5 * n) +
                          " requests, half the limit's rate), each answered after " +
                          format_duration(s.upstream_time) + " by a slow upstream";
  return s;
}

Result<std::vector<InFlightResult>> replay_in_flight(const SlowUpstream& scenario,
                                                     const SimLimit& limit) {
  Result<std::vector<Limit>> made = simulation_limits(limit);
  if (!made.ok()) return made.error();
  std::vector<Limit> limits = std::move(made).value();
  Result<Limit> slots = Limit::concurrency(scenario.max, limit.window);
  if (!slots.ok()) return slots.error();
  limits.push_back(std::move(slots).value());

  std::vector<InFlightResult> results;
  for (const Limit& l : limits) {
    MemoryStore store(MemoryStoreOptions{.max_keys = 1, .shards = 1, .seed = uint64_t{0x5eed}});
    InFlightResult r{l.algorithm()};
    // Answers still due: (when it completes, when it was charged).
    using Due = std::pair<int64_t, int64_t>;
    std::priority_queue<Due, std::vector<Due>, std::greater<>> due;
    for (const SimRequest& req : scenario.traffic.requests) {
      // An answer completing at this instant frees its slot for this request.
      while (!due.empty() && due.top().first <= req.at.count()) {
        if (l.algorithm() == Algorithm::kConcurrency) {
          // The scenario has one key and costs of 1: the answer's key and cost are these.
          const RefundRequest back{&l, scenario.traffic.keys[req.key], req.cost,
                                   Nanos{due.top().second}};
          if (Status s = store.refund({&back, 1}, Nanos{due.top().first}); !s.ok()) {
            return s.error();
          }
        }
        due.pop();
      }
      const AcquireRequest ask{&l, scenario.traffic.keys[req.key], req.cost};
      Decision d;
      if (Status s = store.acquire({&ask, 1}, req.at, {&d, 1}); !s.ok()) return s.error();
      if (!d.allowed) {
        ++r.denied;
        continue;
      }
      ++r.allowed;
      due.push({req.at.count() + scenario.upstream_time.count(), req.at.count()});
      r.max_in_flight = std::max<uint64_t>(r.max_in_flight, due.size());
    }
    results.push_back(r);
  }
  return results;
}

std::string format_in_flight_report(ReportFormat format, const SlowUpstream& scenario,
                                    const SimLimit& limit,
                                    const std::vector<InFlightResult>& results) {
  const std::string window = format_duration(limit.window);
  if (format == ReportFormat::kCsv) {
    std::string out = "scenario,limit,window_ms,max,algorithm,allowed,denied,max_in_flight\n";
    for (const InFlightResult& r : results) {
      out += scenario.traffic.name + "," + std::to_string(limit.limit) + "," +
             std::to_string(limit.window.count() / 1'000'000) + "," + std::to_string(scenario.max) +
             "," + std::string(algorithm_name(r.algorithm)) + "," + std::to_string(r.allowed) +
             "," + std::to_string(r.denied) + "," + std::to_string(r.max_in_flight) + "\n";
    }
    return out;
  }
  if (format == ReportFormat::kJson) {
    std::string out = "{\n  \"scenario\": \"" + scenario.traffic.name + "\",\n";
    out += "  \"description\": \"";
    append_json_escaped(scenario.traffic.description, out);
    out += "\",\n  \"limit\": " + std::to_string(limit.limit) +
           ",\n  \"window_ms\": " + std::to_string(limit.window.count() / 1'000'000) +
           ",\n  \"max\": " + std::to_string(scenario.max) + ",\n  \"results\": [\n";
    for (size_t i = 0; i < results.size(); ++i) {
      const InFlightResult& r = results[i];
      out += "    {\"algorithm\": \"" + std::string(algorithm_name(r.algorithm)) +
             "\", \"allowed\": " + std::to_string(r.allowed) +
             ", \"denied\": " + std::to_string(r.denied) +
             ", \"max_in_flight\": " + std::to_string(r.max_in_flight) + "}" +
             (i + 1 < results.size() ? ",\n" : "\n");
    }
    return out + "  ]\n}\n";
  }
  const std::vector<std::string> header = {"algorithm", "allowed", "denied", "max in flight"};
  std::vector<std::vector<std::string>> rows;
  for (const InFlightResult& r : results) {
    rows.push_back({std::string(algorithm_name(r.algorithm)), std::to_string(r.allowed),
                    std::to_string(r.denied), std::to_string(r.max_in_flight)});
  }
  std::string out = "Scenario slow-upstream, limit " + std::to_string(limit.limit) + " per " +
                    window + " for the rate algorithms, concurrency max " +
                    std::to_string(scenario.max) + " (lease " + window + ")\n";
  out += "Traffic: " + scenario.traffic.description + "\n\n";
  out += aligned_table(header, rows);
  const uint64_t piled = results.empty() ? 0 : results.front().max_in_flight;
  out += "\nmax in flight: the most requests waiting at the upstream at one instant.\n";
  out += "The traffic stays under every rate limit, so each lets all of it through and " +
         std::to_string(piled) +
         " requests pile up at the slow upstream;\nconcurrency holds it to " +
         std::to_string(scenario.max) + " and answers the rest 429 with Retry-After: 1.\n";
  return out;
}

}  // namespace sluice::simulate
