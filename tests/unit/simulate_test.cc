// The engine of `sluice simulate`: the scenarios' exact numbers (derived in
// the comments), traces, the max-in-window scan and the three output formats
// (tests/cli/simulate_command_test.cc: the command line).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "simulate/simulate_report.h"
#include "simulate/simulation.h"
#include "simulate/slow_upstream.h"
#include "simulate/time_text.h"
#include "simulate/trace.h"

namespace sluice::simulate {
namespace {

using namespace std::chrono_literals;

// 2026-01-01 12:00:00 UTC.
constexpr Nanos kNoon = std::chrono::seconds(1'767'268'800);

// allowed, denied, max_in_window per algorithm, in report order.
struct Expected {
  uint64_t allowed, denied, max_in_window;
};

void expect_results(const Result<std::vector<AlgorithmResult>>& results,
                    const std::vector<Expected>& expected) {
  ASSERT_TRUE(results.ok()) << results.error().message;
  const Algorithm order[] = {Algorithm::kTokenBucket, Algorithm::kGcra, Algorithm::kFixedWindow,
                             Algorithm::kSlidingLog, Algorithm::kSlidingWindow};
  ASSERT_EQ(results->size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const AlgorithmResult& r = (*results)[i];
    SCOPED_TRACE(std::string(algorithm_name(r.algorithm)));
    EXPECT_EQ(r.algorithm, order[i]);
    EXPECT_EQ(r.allowed, expected[i].allowed);
    EXPECT_EQ(r.denied, expected[i].denied);
    EXPECT_EQ(r.max_in_window, expected[i].max_in_window);
  }
}

Traffic scenario(std::string_view name, SimLimit limit = {}) {
  Result<Traffic> t = make_scenario(name, limit);
  EXPECT_TRUE(t.ok()) << t.error().message;
  return t.ok() ? std::move(t).value() : Traffic{};
}

// ---- max_in_window -------------------------------------------------------

TEST(MaxInWindow, EmptyIsZero) {
  EXPECT_EQ(max_in_window({}, 1s), 0u);
}

TEST(MaxInWindow, IntervalsAreHalfOpen) {
  // [0, 1s) holds the first two; the third, exactly 1s after the first, does not join them.
  const std::vector<AllowedEvent> events = {{0s, 1}, {999'999'999ns, 1}, {1s, 1}};
  EXPECT_EQ(max_in_window(events, 1s), 2u);
  EXPECT_EQ(max_in_window(events, 1s + 1ns), 3u);
}

TEST(MaxInWindow, SumsCostAndCountsEqualTimes) {
  const std::vector<AllowedEvent> events = {{0s, 2}, {5s, 3}, {5s, 4}, {9s, 1}, {16s, 10}};
  // [5s, 15s) holds 3 + 4 + 1; [9s, 19s) holds 1 + 10.
  EXPECT_EQ(max_in_window(events, 10s), 11u);
  EXPECT_EQ(max_in_window(events, 5s), 10u);  // [16s, 21s)
  EXPECT_EQ(max_in_window(events, 1s), 10u);
  EXPECT_EQ(max_in_window(events, 100s), 20u);
}

// ---- scenarios -----------------------------------------------------------

TEST(Scenario, BoundaryBurstIsTheSeedsExample) {
  const Traffic t = scenario("boundary-burst");
  ASSERT_EQ(t.requests.size(), 200u);
  ASSERT_EQ(t.keys.size(), 1u);
  for (size_t i = 0; i < 100; ++i) EXPECT_EQ(t.requests[i].at, kNoon - 1s);    // 11:59:59
  for (size_t i = 100; i < 200; ++i) EXPECT_EQ(t.requests[i].at, kNoon + 1s);  // 12:00:01
  EXPECT_EQ(t.description,
            "100 requests at 11:59:59 and 100 at 12:00:01 UTC, either side of a window boundary");
}

TEST(Scenario, BoundaryBurstNumbers) {
  // Limit 100 per minute.
  // token_bucket, gcra: 100 at 11:59:59 empty the bucket; 2 s refill 2 * 100/60
  //   = 3.33 tokens, so 3 more at 12:00:01. 103, all within one minute.
  // fixed_window: 100 in the 11:59 window, 100 in the 12:00 window: 200 in 2 s.
  // sliding_log: the 100 of 11:59:59 are still in (12:00:01 - 60 s, 12:00:01]: 100.
  // sliding_window: at 12:00:01, previous = 100 weighs 59/60, so allowed while
  //   100 * 59 + current * 60 <= 100 * 60, i.e. current <= 1.67: one more, 101.
  expect_results(replay(scenario("boundary-burst"), {}),
                 {{103, 97, 103}, {103, 97, 103}, {200, 0, 200}, {100, 100, 100}, {101, 99, 101}});
}

TEST(Scenario, SteadyShape) {
  const Traffic t = scenario("steady");
  ASSERT_EQ(t.requests.size(), 1000u);
  EXPECT_EQ(t.requests[0].at, kNoon);
  EXPECT_EQ(t.requests[1].at, kNoon + 300ms);
  EXPECT_EQ(t.requests[999].at, kNoon + 999 * 300ms);
  EXPECT_EQ(t.description,
            "one request every 300ms for 5m (1000 requests, twice the limit's rate)");
}

TEST(Scenario, SteadyNumbers) {
  // Limit 100 per minute; request k at 12:00:00 + 0.3k s, k = 0..999.
  // token_bucket, gcra: one token per 0.6 s, so half a token per request.
  //   Before request k (all earlier allowed) the bucket holds 100 - k/2: allowed
  //   up to k = 198 (199 requests); then every other one, k = 200, 202..998 (400).
  //   599 allowed. The 60 s from request 0 hold requests 0..198: 199.
  // fixed_window: the first 100 of each minute's 200: 5 * 100 = 500; the
  //   allowed ones fill the first half of each minute, so no interval holds more than 100.
  // sliding_log: the same 500: the 100 of a minute's first half leave the log
  //   exactly at the next minute's start.
  // sliding_window: minute 0: 100. Minute 1 (previous 100): request i of the
  //   minute is allowed iff current + 1 <= i/2: i = 2, 4..198, 99. Minutes 2-4
  //   (previous 99): iff 200 * current <= 99 * i: 99 each. 100 + 4 * 99 = 496;
  //   no interval holds more than 100.
  expect_results(
      replay(scenario("steady"), {}),
      {{599, 401, 199}, {599, 401, 199}, {500, 500, 100}, {500, 500, 100}, {496, 504, 100}});
}

TEST(Scenario, BurstyShape) {
  const Traffic t = scenario("bursty");
  ASSERT_EQ(t.requests.size(), 620u);
  const Nanos burst = kNoon + 10min;
  EXPECT_EQ(t.requests[0].at, burst);
  EXPECT_EQ(t.requests[1].at, burst + 10ms);
  EXPECT_EQ(t.requests[499].at, burst + 4990ms);
  EXPECT_EQ(t.requests[500].at, burst + 5s);
  EXPECT_EQ(t.requests[619].at, burst + 124s);
  EXPECT_EQ(t.description,
            "idle for 10m, then 500 requests in 5s, then one every 1s for 2m (620 requests)");
}

TEST(Scenario, BurstyNumbers) {
  // Limit 100 per minute. Burst: 500 requests at B + 10 ms * i (B = 12:10:00);
  // then one per second at B + 5 s + j, j = 0..119.
  // token_bucket, gcra: one token per 0.6 s = per 60 burst requests. Before
  //   request i the bucket holds 100 + i/60 - allowed: i = 0..100 pass (101),
  //   then i = 120, 180..480 (7): 108. At B + 5 s it holds 0.33: denied; from
  //   then on each second adds 1.67 and takes 1: 119 pass. 227 allowed;
  //   [B, B + 60 s) holds 108 + 54 = 162.
  // fixed_window: 100 of the burst; the 55 trickle requests left in the 12:10
  //   window are denied; 60 in 12:11 and 5 in 12:12 pass: 165, at most 100 in a minute.
  // sliding_log: 100 of the burst; the trickle is denied until B + 60 s, when
  //   the first burst entries leave: 65 more, 165.
  // sliding_window: 100 of the burst; in 12:11 (previous 100) the trickle at
  //   second e passes iff current + 1 <= 5e/3: e = 1..59, 59; in 12:12 all 5: 164.
  expect_results(
      replay(scenario("bursty"), {}),
      {{227, 393, 162}, {227, 393, 162}, {165, 455, 100}, {165, 455, 100}, {164, 456, 100}});
}

TEST(Scenario, ScalesWithTheLimit) {
  // 10 per second: 10 requests W/60 = 16.67 ms either side of 12:00:00.
  // token_bucket: 33.3 ms refill 0.33 tokens: nothing more. sliding_window:
  // previous 10 weighs (1 - 1/60) = 9.83 > 9: nothing more. fixed_window: 20.
  const SimLimit limit{10, 1s};
  const Traffic t = scenario("boundary-burst", limit);
  ASSERT_EQ(t.requests.size(), 20u);
  EXPECT_EQ(t.requests[0].at, kNoon - 16'666'666ns);
  EXPECT_EQ(t.requests[10].at, kNoon + 16'666'666ns);
  EXPECT_EQ(t.description,
            "10 requests at 11:59:59.983 and 10 at 12:00:00.016 UTC, either side of a window "
            "boundary");
  expect_results(replay(t, limit),
                 {{10, 10, 10}, {10, 10, 10}, {20, 0, 20}, {10, 10, 10}, {10, 10, 10}});
}

TEST(Scenario, UnknownNameAndBadLimitsAreRefused) {
  Result<Traffic> unknown = make_scenario("nope", {});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().message,
            "unknown scenario 'nope' (known: boundary-burst, steady, bursty, slow-upstream)");
  EXPECT_FALSE(make_scenario("steady", {0, 1s}).ok());
  EXPECT_FALSE(make_scenario("steady", {kMaxSimLimit + 1, 1s}).ok());
}

// ---- traces --------------------------------------------------------------

// Limit 2 per second. Keys have their own state: bob's cost-2 request at 1.5 s
// passes although alice emptied her limits.
constexpr std::string_view kTrace =
    "time_ms,key,cost\r\n"
    "1000,alice,1\r\n"
    "1000,alice,1\r\n"
    "1000,alice,1\r\n"
    "\r\n"
    "1500, bob ,2\r\n"
    "1900,alice,1\r\n"
    "2000,alice,1\r\n"
    "2000,bob,1\r\n"
    "2400,alice,2\r\n";

TEST(Trace, ParsesRecordsKeysAndLines) {
  Result<Traffic> t = parse_trace(kTrace, "t.csv");
  ASSERT_TRUE(t.ok()) << t.error().message;
  ASSERT_EQ(t->keys, (std::vector<std::string>{"alice", "bob"}));
  ASSERT_EQ(t->requests.size(), 8u);
  EXPECT_EQ(t->requests[3].at, 1500ms);
  EXPECT_EQ(t->requests[3].key, 1u);
  EXPECT_EQ(t->requests[3].cost, 2u);
  EXPECT_EQ(t->requests[3].line, 6u);  // the header and a blank line come first
  EXPECT_EQ(t->description, "8 requests, 2 keys, over 1400ms");
}

TEST(Trace, ReplayNumbers) {
  // token_bucket, gcra (one token per 500 ms). alice: 2 tokens at 1.0 s: two
  //   pass, the third is denied; 1.9 s: 1.8 tokens, pass; 2.0 s: 1.0, pass;
  //   2.4 s: 0.8 < 2, denied. bob: 1.5 s: 2 tokens for cost 2, pass; 2.0 s: 1.0,
  //   pass. 6 allowed; [1.0 s, 2.0 s) holds 3 of alice's; [1.5 s, 2.5 s) 3 of bob's.
  // fixed_window (windows [1 s, 2 s), [2 s, 3 s)). alice: two pass, the third
  //   and 1.9 s are denied; 2.0 s passes, 2.4 s (1 + 2 > 2) is denied. bob: both
  //   pass. 5 allowed; bob's 2 at 1.5 s and 1 at 2.0 s make 3 in one second.
  // sliding_log. alice: two pass; 1.9 s denied; at 2.0 s the entries of 1.0 s
  //   have left (1.0 s is not in (1.0 s, 2.0 s]): pass; 2.4 s: 1 + 2 > 2, denied.
  //   bob: 1.5 s passes; 2.0 s: 2 + 1 > 2, denied. 4 allowed, never more than 2.
  // sliding_window. alice: two pass; 1.9 s denied; at 2.0 s previous = 2 weighs
  //   fully: denied; 2.4 s: 2 * 0.6 + 2 > 2, denied. bob: 1.5 s passes; 2.0 s:
  //   2 + 1 > 2, denied. 3 allowed.
  Result<Traffic> t = parse_trace(kTrace, "t.csv");
  ASSERT_TRUE(t.ok()) << t.error().message;
  expect_results(replay(*t, {2, 1s}), {{6, 2, 3}, {6, 2, 3}, {5, 3, 3}, {4, 4, 2}, {3, 5, 2}});
}

TEST(Trace, HeaderIsOptional) {
  Result<Traffic> t = parse_trace("0,k,1\n5,k,1", "t.csv");
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t->requests.size(), 2u);
  EXPECT_EQ(t->requests[1].at, 5ms);
  EXPECT_EQ(t->requests[1].line, 2u);
}

TEST(Trace, EveryBadLineIsReportedWithItsNumber) {
  const std::string text =
      "time_ms,key,cost\n"
      "10,a,1\n"
      "x,a,1\n"
      "11,,0\n"
      "12,a\n"
      "5,a,1\n"
      "13,a,1,2\n"
      "-1,a,1\n";
  Result<Traffic> t = parse_trace(text, "bad.csv");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().message,
            "bad.csv:3: time_ms must be a whole number of milliseconds from 0 to "
            "9000000000000, got 'x'\n"
            "bad.csv:4: key is empty\n"
            "bad.csv:4: cost must be a whole number from 1 to 4294967295, got '0'\n"
            "bad.csv:5: expected 3 fields time_ms,key,cost, got 2\n"
            "bad.csv:6: time_ms 5 is before 10 on line 2: lines must be sorted by time\n"
            "bad.csv:7: expected 3 fields time_ms,key,cost, got 4\n"
            "bad.csv:8: time_ms must be a whole number of milliseconds from 0 to "
            "9000000000000, got '-1'");
}

TEST(Trace, ErrorsAreCapped) {
  std::string text;
  for (int i = 0; i < 25; ++i) text += "oops\n";
  Result<Traffic> t = parse_trace(text, "f");
  ASSERT_FALSE(t.ok());
  const std::string& m = t.error().message;
  EXPECT_EQ(std::count(m.begin(), m.end(), '\n'), 20);
  EXPECT_TRUE(m.ends_with("\nf: 5 more bad lines")) << m;
}

TEST(Trace, EmptyTraceIsAnError) {
  Result<Traffic> t = parse_trace("time_ms,key,cost\n\n", "e.csv");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().message, "e.csv: the trace holds no requests");
}

TEST(Trace, CostAboveTheLimitNamesItsLine) {
  Result<Traffic> t = parse_trace("0,a,1\n1,a,3\n", "c.csv");
  ASSERT_TRUE(t.ok());
  auto r = replay(*t, {2, 1s});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message,
            "c.csv:2: cost 3 exceeds the limit 2: such a request could never be allowed");
}

// ---- output --------------------------------------------------------------

std::string boundary_burst_report(ReportFormat format) {
  const Traffic t = scenario("boundary-burst");
  auto results = replay(t, {});
  EXPECT_TRUE(results.ok());
  return format_report(format, t, {}, *results);
}

TEST(Report, BoundaryBurstTable) {
  EXPECT_EQ(boundary_burst_report(ReportFormat::kTable),
            "Scenario boundary-burst, limit 100 per 1m for every algorithm\n"
            "Traffic: 100 requests at 11:59:59 and 100 at 12:00:01 UTC, either side of a window "
            "boundary\n"
            "\n"
            "algorithm       allowed  denied  max in any 1m\n"
            "token_bucket        103      97            103\n"
            "gcra                103      97            103\n"
            "fixed_window        200       0            200\n"
            "sliding_log         100     100            100\n"
            "sliding_window      101      99            101\n"
            "\n"
            "allowed, denied: requests each algorithm let through or refused (each keeps its own "
            "state).\n"
            "max in any 1m: the most requests allowed within any 1m interval; the limit means at "
            "most 100.\n"
            "Above 100:\n"
            "  fixed_window 200: its count restarts at each window boundary; bursts either side "
            "add up (up to 2x).\n"
            "  token_bucket 103, gcra 103: a full bucket plus what refills during the interval "
            "(up to 2x).\n"
            "  sliding_window 101: it estimates the previous window's share and can overshoot "
            "(always under 2x).\n");
}

TEST(Report, BoundaryBurstCsv) {
  EXPECT_EQ(boundary_burst_report(ReportFormat::kCsv),
            "scenario,limit,window_ms,algorithm,allowed,denied,max_in_window\n"
            "boundary-burst,100,60000,token_bucket,103,97,103\n"
            "boundary-burst,100,60000,gcra,103,97,103\n"
            "boundary-burst,100,60000,fixed_window,200,0,200\n"
            "boundary-burst,100,60000,sliding_log,100,100,100\n"
            "boundary-burst,100,60000,sliding_window,101,99,101\n");
}

TEST(Report, BoundaryBurstJson) {
  EXPECT_EQ(boundary_burst_report(ReportFormat::kJson),
            "{\n"
            "  \"scenario\": \"boundary-burst\",\n"
            "  \"description\": \"100 requests at 11:59:59 and 100 at 12:00:01 UTC, either side "
            "of a window boundary\",\n"
            "  \"limit\": 100,\n"
            "  \"window_ms\": 60000,\n"
            "  \"results\": [\n"
            "    {\"algorithm\": \"token_bucket\", \"allowed\": 103, \"denied\": 97, "
            "\"max_in_window\": 103},\n"
            "    {\"algorithm\": \"gcra\", \"allowed\": 103, \"denied\": 97, "
            "\"max_in_window\": 103},\n"
            "    {\"algorithm\": \"fixed_window\", \"allowed\": 200, \"denied\": 0, "
            "\"max_in_window\": 200},\n"
            "    {\"algorithm\": \"sliding_log\", \"allowed\": 100, \"denied\": 100, "
            "\"max_in_window\": 100},\n"
            "    {\"algorithm\": \"sliding_window\", \"allowed\": 101, \"denied\": 99, "
            "\"max_in_window\": 101}\n"
            "  ]\n"
            "}\n");
}

TEST(Report, TableSaysWhenNoAlgorithmExceedsTheLimit) {
  Result<Traffic> t = parse_trace("0,a,1\n0,b,2\n", "two.csv");
  ASSERT_TRUE(t.ok());
  auto results = replay(*t, {2, 1s});
  ASSERT_TRUE(results.ok());
  const std::string table = format_report(ReportFormat::kTable, *t, {2, 1s}, *results);
  EXPECT_TRUE(
      table.starts_with("Trace two.csv, limit 2 per 1s for every algorithm\n"
                        "Traffic: 2 requests, 2 keys, over 0s\n"))
      << table;
  EXPECT_NE(table.find("max in any 1s: the most requests (summed by cost) allowed to one key "
                       "within any 1s interval; the limit means at most 2.\n"
                       "Every algorithm kept within 2 in every 1s interval.\n"),
            std::string::npos)
      << table;
}

// ---- time text -----------------------------------------------------------

TEST(TimeText, Durations) {
  EXPECT_EQ(format_duration(60s), "1m");
  EXPECT_EQ(format_duration(300ms), "300ms");
  EXPECT_EQ(format_duration(16'666'666ns), "16.666ms");
  EXPECT_EQ(format_duration(20'571'428'571ns), "20.571s");
  EXPECT_EQ(format_duration(Nanos{std::chrono::hours(120)} / 21), "5.714h");
  EXPECT_EQ(format_duration(50ns), "50ns");
  EXPECT_EQ(format_duration(1'500ns), "1.500us");
  EXPECT_EQ(format_time_of_day(kNoon - 1s), "11:59:59");
  EXPECT_EQ(format_time_of_day(kNoon + 250ms), "12:00:00.250");
}

// ---- slow-upstream: rate limits against a concurrency limit ---------------

TEST(SimulateSlowUpstream, RateLimitsLetTwentyFivePileUpConcurrencyHoldsTen) {
  const SimLimit limit{100, std::chrono::minutes(1)};
  const Result<SlowUpstream> s = make_slow_upstream(limit);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->traffic.requests.size(), 500u);  // one every 1.2 s for 10 minutes
  EXPECT_EQ(s->upstream_time, std::chrono::seconds(30));
  EXPECT_EQ(s->max, 10u);
  const Result<std::vector<InFlightResult>> r = replay_in_flight(*s, limit);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->size(), 6u);
  // 50 a minute is under every "100 per minute": all pass, 30 s / 1.2 s = 25
  // at the upstream at once.
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ((*r)[i].allowed, 500u) << i;
    EXPECT_EQ((*r)[i].denied, 0u) << i;
    EXPECT_EQ((*r)[i].max_in_flight, 25u) << i;
  }
  // Concurrency: 10 in, then 15 denied until the first answer frees its slot
  // at the very instant the 26th arrives; 10 of every 25, 20 times over.
  EXPECT_EQ((*r)[5].algorithm, Algorithm::kConcurrency);
  EXPECT_EQ((*r)[5].allowed, 200u);
  EXPECT_EQ((*r)[5].denied, 300u);
  EXPECT_EQ((*r)[5].max_in_flight, 10u);
}

}  // namespace
}  // namespace sluice::simulate
