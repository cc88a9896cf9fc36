#include "cli/simulate.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>

#include "cli/args.h"
#include "config/values/values.h"
#include "simulate/simulate_report.h"
#include "simulate/simulation.h"
#include "simulate/simulation_queue.h"
#include "simulate/slow_upstream.h"
#include "simulate/time_text.h"
#include "simulate/trace.h"

namespace sluice::cli {
namespace {

constexpr const char* kHelp =
    R"(Usage: sluice simulate [--scenario NAME | --trace FILE] [--limit N] [--window DURATION]
                       [--delay DURATION] [--format table|csv|json]

Replays traffic against all five algorithms on a simulated clock (no waiting)
and prints, for each, the requests it allowed and denied and the most it
allowed in any window-length interval: whether "N per W" really kept every
interval of length W to N.

Every algorithm gets the same limit, "N per W": token_bucket and gcra hold N
tokens and refill N per W; fixed_window, sliding_log and sliding_window allow
N per window of length W (fixed windows are aligned on the Unix epoch).

Options:
  --scenario NAME    built-in traffic on one key, scaled to the limit (default
                     boundary-burst); the examples are for 100 per minute:
    boundary-burst   N requests W/60 before a window boundary and N W/60 after
                     it: 100 at 11:59:59 and 100 at 12:00:01 (2026-01-01 UTC),
                     the seed's example of the fixed-window flaw
    steady           twice the limit's rate, evenly spaced, for 5 windows:
                     one request every 300ms for 5 minutes
    bursty           idle for 10 windows, then 5xN requests within W/12, then
                     60% of the limit's rate for 2 windows: 500 requests in 5s,
                     then one per second for 2 minutes
    slow-upstream    half the limit's rate for 10 windows, each request held
                     W/2 by a slow upstream, against the five algorithms and a
                     concurrency limit of max(1, N/10) with lease W: one request
                     every 1200ms, each answered after 30s; the rate limits let
                     25 pile up at the upstream, concurrency max 10 holds it to
                     10 (the column is "max in flight")
  --trace FILE       replay a CSV file instead, one request per line:
                       time_ms,key,cost
                     time_ms: milliseconds since the Unix epoch, lines sorted
                     by it; key: any text without a comma, each key has its
                     own state; cost: the request's weight, >= 1 and <= N.
                     The header line is optional. Bad lines are reported as
                     FILE:LINE: message.
  --limit N          the limit's N, from 1 to 10000 (default 100)
  --window DURATION  the limit's W: 500ms, 10s, 1m, 1h, 1d... (default 1m)
  --delay DURATION   queue as a route's `delay` does, against token_bucket
                     "N per W" only: print one line per request, when it is
                     served (its arrival plus the wait it is held for), or
                     that it is denied because no wait up to DURATION would
                     serve it. nginx's limit_req rate=R burst=B (no nodelay)
                     is --limit 1, --window 1/R, --delay B/R: rate=10r/s
                     burst=4 is --limit 1 --window 100ms --delay 400ms.
  --format FORMAT    table (default), csv or json
  --help             this text

Columns: allowed and denied count requests. "max in any W" is the largest
total cost one key was allowed within any half-open interval of length W (for
token_bucket and gcra: the time to refill a full bucket, which is W here).

Exit status: 0 done, 1 the trace cannot be read or has bad lines, 2 bad usage.
)";

struct Options {
  std::optional<std::string> scenario;
  std::optional<std::string> trace;
  simulate::SimLimit limit;
  std::optional<Nanos> delay;
  simulate::ReportFormat format = simulate::ReportFormat::kTable;
  bool help = false;
};

struct UsageError {
  std::string message;
};

constexpr OptionSpec kOptions[] = {{"--scenario", ""}, {"--trace", ""}, {"--limit", ""},
                                   {"--window", ""},   {"--delay", ""}, {"--format", ""}};

// Parses `args`; an error message for anything unknown or malformed.
std::optional<UsageError> parse_options(std::span<const std::string_view> args, Options* o) {
  const ParsedArgs parsed = parse_args(args, kOptions);
  if (!parsed.error.empty()) return UsageError{parsed.error};
  o->help = parsed.help;
  for (const auto& [name, v] : parsed.values) {
    if (name == "--scenario") {
      o->scenario = v;
    } else if (name == "--trace") {
      o->trace = v;
    } else if (name == "--limit") {
      uint64_t n = 0;
      bool digits = !v.empty() && v.size() <= 9;
      for (char c : v) digits = digits && c >= '0' && c <= '9';
      if (digits) n = std::stoull(v);
      if (!digits || n < 1 || n > simulate::kMaxSimLimit) {
        return UsageError{"--limit must be a whole number from 1 to " +
                          std::to_string(simulate::kMaxSimLimit) + ", got '" + v + "'"};
      }
      o->limit.limit = n;
    } else if (name == "--window") {
      const Result<Nanos> w = config::parse_duration(v, /*allow_zero=*/false);
      if (!w.ok()) return UsageError{"--window " + w.error().message};
      o->limit.window = *w;
    } else if (name == "--delay") {
      const Result<Nanos> d = config::parse_duration(v, /*allow_zero=*/true);
      if (!d.ok()) return UsageError{"--delay " + d.error().message};
      o->delay = *d;
    } else {
      const std::optional<simulate::ReportFormat> f = simulate::parse_report_format(v);
      if (!f) return UsageError{"--format must be table, csv or json, got '" + v + "'"};
      o->format = *f;
    }
  }
  if (o->scenario && o->trace) return UsageError{"give --scenario or --trace, not both"};
  return std::nullopt;
}

int usage_error(std::ostream& err, const std::string& message) {
  err << "sluice simulate: " << message << "\nRun 'sluice simulate --help' for the options.\n";
  return 2;
}

// Reads the whole file; nullopt with errno's message on failure.
std::optional<std::string> read_file(const std::string& path, std::string* problem) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *problem = std::strerror(errno);
    return std::nullopt;
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    *problem = std::strerror(errno);
    return std::nullopt;
  }
  return text.str();
}

}  // namespace

int run_simulate(std::span<const std::string_view> args) {
  return run_simulate(args, std::cout, std::cerr);
}

int run_simulate(std::span<const std::string_view> args, std::ostream& out, std::ostream& err) {
  Options options;
  if (std::optional<UsageError> e = parse_options(args, &options)) {
    return usage_error(err, e->message);
  }
  if (options.help) {
    out << kHelp;
    return 0;
  }
  // The limit first: a window the algorithms refuse is a usage error.
  if (Result<std::vector<Limit>> limits = simulate::simulation_limits(options.limit);
      !limits.ok()) {
    return usage_error(err, "the limit " + std::to_string(options.limit.limit) + " per " +
                                simulate::format_duration(options.limit.window) +
                                " is refused: " + limits.error().message);
  }

  if (options.scenario == simulate::kSlowUpstreamScenario) {
    Result<simulate::SlowUpstream> scenario = simulate::make_slow_upstream(options.limit);
    if (!scenario.ok()) return usage_error(err, scenario.error().message);
    Result<std::vector<simulate::InFlightResult>> in_flight =
        simulate::replay_in_flight(*scenario, options.limit);
    if (!in_flight.ok()) {
      err << in_flight.error().message << "\n";
      return 1;
    }
    out << simulate::format_in_flight_report(options.format, *scenario, options.limit, *in_flight);
    return out.good() ? 0 : 1;
  }

  std::optional<simulate::Traffic> traffic;
  if (options.trace) {
    std::string problem;
    const std::optional<std::string> text = read_file(*options.trace, &problem);
    if (!text) {
      err << "sluice simulate: cannot read " << *options.trace << ": " << problem << "\n";
      return 1;
    }
    Result<simulate::Traffic> parsed = simulate::parse_trace(*text, *options.trace);
    if (!parsed.ok()) {
      err << parsed.error().message << "\n";
      return 1;
    }
    traffic = std::move(parsed).value();
  } else {
    Result<simulate::Traffic> made =
        simulate::make_scenario(options.scenario.value_or("boundary-burst"), options.limit);
    if (!made.ok()) return usage_error(err, made.error().message);
    traffic = std::move(made).value();
  }

  if (options.delay) {
    Result<std::vector<simulate::QueuedTurn>> turns =
        simulate::replay_queued(*traffic, options.limit, *options.delay);
    if (!turns.ok()) {
      err << turns.error().message << "\n";
      return 1;
    }
    out << simulate::format_queued_report(options.format, *traffic, options.limit, *options.delay,
                                          *turns);
    return out.good() ? 0 : 1;
  }
  Result<std::vector<simulate::AlgorithmResult>> results =
      simulate::replay(*traffic, options.limit);
  if (!results.ok()) {
    err << results.error().message << "\n";
    return 1;
  }
  out << simulate::format_report(options.format, *traffic, options.limit, *results);
  return out.good() ? 0 : 1;
}

}  // namespace sluice::cli
