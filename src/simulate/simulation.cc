#include "simulate/simulation.h"

#include <algorithm>
#include <array>

#include "simulate/time_text.h"
#include "sluice/memory_store.h"

namespace sluice::simulate {
namespace {

using i128 = __int128;

// Scenarios start at (or just after) 2026-01-01 12:00:00 UTC: a fixed date, so
// every run prints the same table, and noon, so one-minute and one-hour
// windows are aligned on it as wall-clock windows are.
constexpr int64_t kNoonUnixSeconds = 1'767'268'800;
constexpr int64_t kNanosPerSecond = 1'000'000'000;

constexpr std::array<std::string_view, 3> kScenarioNames = {"boundary-burst", "steady", "bursty"};

Error invalid(std::string message) {
  return Error{ErrorCode::kInvalidArgument, std::move(message)};
}

// at + num * k / den in exact integers: evenly spaced requests whose spacing
// need not be a whole number of nanoseconds.
Nanos spaced(int64_t at, int64_t num, int64_t k, int64_t den) {
  return Nanos{at + static_cast<int64_t>(static_cast<i128>(num) * k / den)};
}

// The first instant aligned on `window` at or after noon.
int64_t start_of(Nanos window) {
  const i128 noon = static_cast<i128>(kNoonUnixSeconds) * kNanosPerSecond;
  const i128 w = window.count();
  return static_cast<int64_t>((noon + w - 1) / w * w);
}

Traffic one_key(std::string name) {
  Traffic t;
  t.name = std::move(name);
  t.keys.push_back("client");
  return t;
}

void add(Traffic& t, Nanos at) {
  t.requests.push_back({at, 0, 1, 0});
}

// The seed's example: N requests just before a window boundary and N just
// after it. With 100 per minute: 100 at 11:59:59 and 100 at 12:00:01.
Traffic boundary_burst(int64_t n, int64_t w) {
  Traffic t = one_key("boundary-burst");
  const int64_t boundary = start_of(Nanos{w});
  const Nanos before{boundary - w / 60};
  const Nanos after{boundary + w / 60};
  for (int64_t i = 0; i < n; ++i) add(t, before);
  for (int64_t i = 0; i < n; ++i) add(t, after);
  t.description = std::to_string(n) + " requests at " + format_time_of_day(before) + " and " +
                  std::to_string(n) + " at " + format_time_of_day(after) +
                  " UTC, either side of a window boundary";
  return t;
}

// Twice the limit's rate, evenly spaced, for 5 windows: with 100 per minute,
// one request every 300 ms for 5 minutes (1000 requests).
Traffic steady(int64_t n, int64_t w) {
  Traffic t = one_key("steady");
  const int64_t start = start_of(Nanos{w});
  for (int64_t k = 0; k < 10 * n; ++k) add(t, spaced(start, w, k, 2 * n));
  t.description = "one request every " + format_duration(Nanos{w / (2 * n)}) + " for " +
                  format_duration(Nanos{5 * w}) + " (" + std::to_string(10 * n) +
                  " requests, twice the limit's rate)";
  return t;
}

// Nothing for 10 windows, then 5 x N requests within 1/12 of a window, then
// 60% of the limit's rate for 2 windows. With 100 per minute: idle 10 minutes,
// 500 requests in 5 s (one every 10 ms), then one per second for 2 minutes.
Traffic bursty(int64_t n, int64_t w) {
  Traffic t = one_key("bursty");
  const int64_t burst_start = start_of(Nanos{w}) + 10 * w;
  for (int64_t i = 0; i < 5 * n; ++i) add(t, spaced(burst_start, w, i, 60 * n));
  const int64_t trickle_start = burst_start + w / 12;
  const int64_t trickle = std::max<int64_t>(6 * n / 5, 1);
  for (int64_t j = 0; j < trickle; ++j) add(t, spaced(trickle_start, 5 * w, j, 3 * n));
  t.description = "idle for " + format_duration(Nanos{10 * w}) + ", then " + std::to_string(5 * n) +
                  " requests in " + format_duration(Nanos{w / 12}) + ", then one every " +
                  format_duration(Nanos{5 * w / (3 * n)}) + " for " +
                  format_duration(Nanos{2 * w}) + " (" + std::to_string(t.requests.size()) +
                  " requests)";
  return t;
}

}  // namespace

std::span<const std::string_view> scenario_names() {
  return kScenarioNames;
}

Result<std::vector<Limit>> simulation_limits(const SimLimit& limit) {
  if (limit.limit < 1 || limit.limit > kMaxSimLimit) {
    return invalid("the limit must be from 1 to " + std::to_string(kMaxSimLimit) +
                   " (sliding_log keeps one entry per request), got " +
                   std::to_string(limit.limit));
  }
  const uint64_t n = limit.limit;
  const Nanos w = limit.window;
  std::vector<Limit> limits;
  for (Result<Limit> made :
       {Limit::token_bucket(n, n, w), Limit::gcra(n, n, w), Limit::fixed_window(n, w),
        Limit::sliding_log(n, w), Limit::sliding_window(n, w)}) {
    if (!made.ok()) return made.error();
    limits.push_back(std::move(made).value());
  }
  return limits;
}

Result<Traffic> make_scenario(std::string_view name, const SimLimit& limit) {
  // Validates N and W first: the scenario's arithmetic relies on their bounds.
  if (Result<std::vector<Limit>> limits = simulation_limits(limit); !limits.ok()) {
    return limits.error();
  }
  const int64_t n = static_cast<int64_t>(limit.limit);
  const int64_t w = limit.window.count();
  if (name == "boundary-burst") return boundary_burst(n, w);
  if (name == "steady") return steady(n, w);
  if (name == "bursty") return bursty(n, w);
  std::string known;
  for (std::string_view s : kScenarioNames) known += std::string(s) + ", ";
  known += kSlowUpstreamScenario;
  return invalid("unknown scenario '" + std::string(name) + "' (known: " + known + ")");
}

uint64_t max_in_window(std::span<const AllowedEvent> events, Nanos window) {
  uint64_t best = 0;
  uint64_t sum = 0;
  size_t left = 0;
  // For each event as the last one in, drop those at least `window` older:
  // what remains lies in (at - window, at], a half-open interval of that length.
  for (const AllowedEvent& e : events) {
    sum += e.cost;
    while (events[left].at <= e.at - window) sum -= events[left++].cost;
    best = std::max(best, sum);
  }
  return best;
}

Result<std::vector<AlgorithmResult>> replay(const Traffic& traffic, const SimLimit& limit) {
  Result<std::vector<Limit>> made = simulation_limits(limit);
  if (!made.ok()) return made.error();
  const std::vector<Limit>& limits = *made;
  for (const SimRequest& r : traffic.requests) {
    if (r.cost > limit.limit) {
      const std::string where =
          r.line > 0 ? traffic.source + ":" + std::to_string(r.line) + ": " : std::string();
      return invalid(where + "cost " + std::to_string(r.cost) + " exceeds the limit " +
                     std::to_string(limit.limit) + ": such a request could never be allowed");
    }
  }

  // One shard and room for every state: nothing is ever evicted, so each key
  // keeps its exact state for the whole replay. A fixed seed: same run, same store.
  MemoryStore store(MemoryStoreOptions{
      .max_keys = std::max<size_t>(limits.size() * traffic.keys.size(), 1),
      .shards = 1,
      .seed = uint64_t{0x5eed},
  });

  struct Allowed {
    uint32_t key;
    AllowedEvent event;
  };
  std::vector<AlgorithmResult> results;
  std::vector<std::vector<Allowed>> allowed(limits.size());
  for (const Limit& l : limits) results.push_back({l.algorithm()});

  for (const SimRequest& r : traffic.requests) {
    for (size_t i = 0; i < limits.size(); ++i) {
      const AcquireRequest request{&limits[i], traffic.keys[r.key], r.cost};
      Decision decision;
      if (Status s = store.acquire({&request, 1}, r.at, {&decision, 1}); !s.ok()) {
        return s.error();
      }
      if (decision.allowed) {
        ++results[i].allowed;
        allowed[i].push_back({r.key, {r.at, r.cost}});
      } else {
        ++results[i].denied;
      }
    }
  }

  // Per key: group each key's allowed events, still in time order.
  for (size_t i = 0; i < limits.size(); ++i) {
    std::vector<Allowed>& events = allowed[i];
    std::stable_sort(events.begin(), events.end(),
                     [](const Allowed& a, const Allowed& b) { return a.key < b.key; });
    std::vector<AllowedEvent> one_key;
    for (size_t begin = 0; begin < events.size();) {
      size_t end = begin;
      one_key.clear();
      while (end < events.size() && events[end].key == events[begin].key) {
        one_key.push_back(events[end++].event);
      }
      results[i].max_in_window =
          std::max(results[i].max_in_window, max_in_window(one_key, limits[i].period()));
      begin = end;
    }
  }
  return results;
}

}  // namespace sluice::simulate
