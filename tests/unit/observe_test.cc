// src/observe: metrics and their Prometheus text, the denial log gate, the
// top denied keys.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "observe/denial_log.h"
#include "observe/logging.h"
#include "observe/metrics.h"
#include "observe/open_family.h"
#include "observe/request_duration.h"
#include "observe/top_keys.h"
#include "observe/upstream_metrics.h"

namespace sluice::observe {
namespace {

using namespace std::chrono_literals;

TEST(Counter, IncrementsFromManyThreadsAreAllCounted) {
  Counter counter;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 100'000; ++i) counter.add();
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(counter.value(), 400'000u);
}

TEST(Registry, RendersCountersGaugesAndHistogramsInPrometheusText) {
  Registry r;
  r.counter("t_requests_total", "Requests.", {{"route", "GET /a"}, {"result", "allowed"}})->add(3);
  r.counter("t_requests_total", "Requests.", {{"route", "GET /a"}, {"result", "denied"}})->add(1);
  r.gauge("t_keys", "Keys.", {}, [] { return 7.0; });
  Histogram* h = r.histogram("t_latency_seconds", "Latency.", {}, {1'000, 5'000'000});
  h->observe_ns(500);        // <= 1 µs
  h->observe_ns(1'000);      // <= 1 µs: bounds are inclusive
  h->observe_ns(2'000);      // <= 5 ms
  h->observe_ns(7'000'000);  // +Inf
  EXPECT_EQ(r.render(),
            "# HELP t_keys Keys.\n"
            "# TYPE t_keys gauge\n"
            "t_keys 7\n"
            "# HELP t_latency_seconds Latency.\n"
            "# TYPE t_latency_seconds histogram\n"
            "t_latency_seconds_bucket{le=\"0.000001\"} 2\n"
            "t_latency_seconds_bucket{le=\"0.005\"} 3\n"
            "t_latency_seconds_bucket{le=\"+Inf\"} 4\n"
            "t_latency_seconds_sum 0.0070035\n"
            "t_latency_seconds_count 4\n"
            "# HELP t_requests_total Requests.\n"
            "# TYPE t_requests_total counter\n"
            "t_requests_total{route=\"GET /a\",result=\"allowed\"} 3\n"
            "t_requests_total{route=\"GET /a\",result=\"denied\"} 1\n");
}

TEST(Registry, SameSeriesTwiceIsOneCounter) {
  Registry r;
  Counter* a = r.counter("t_total", "T.", {{"route", "x"}});
  Counter* b = r.counter("t_total", "T.", {{"route", "x"}});
  EXPECT_EQ(a, b);
  EXPECT_NE(a, r.counter("t_total", "T.", {{"route", "y"}}));
}

TEST(Registry, LabelValuesAreEscaped) {
  EXPECT_EQ(render_labels({{"route", "GET /a\"b\\c\nd"}}), R"({route="GET /a\"b\\c\nd"})");
  EXPECT_EQ(render_labels({}), "");
}

TEST(Registry, ACounterOfSecondsIsReadAtScrapeTimeAndKeepsItsFraction) {
  Registry registry;
  double cpu = 0.25;
  registry.counter_function_seconds("process_cpu_seconds_total", "CPU.", {}, [&] { return cpu; });
  EXPECT_EQ(registry.render(),
            "# HELP process_cpu_seconds_total CPU.\n# TYPE process_cpu_seconds_total counter\n"
            "process_cpu_seconds_total 0.25\n");
  cpu = 1.5;
  EXPECT_EQ(registry.render(),
            "# HELP process_cpu_seconds_total CPU.\n# TYPE process_cpu_seconds_total counter\n"
            "process_cpu_seconds_total 1.5\n");
}

TEST(OpenCounterFamily, CountsPerLabelSetAndRendersThemSorted) {
  OpenCounterFamily family("x_total", "X.", {"domain", "result"}, 10);
  Registry registry;
  family.attach(registry);
  const std::string_view b[] = {"d", "ok"};
  const std::string_view a[] = {"d", "near_limit"};
  family.add(b);
  family.add(b, 2);
  family.add(a);
  EXPECT_EQ(registry.render(),
            "# HELP x_total X.\n# TYPE x_total counter\n"
            "x_total{domain=\"d\",result=\"near_limit\"} 1\n"
            "x_total{domain=\"d\",result=\"ok\"} 3\n");
  EXPECT_EQ(family.series(), 2u);
}

TEST(OpenCounterFamily, LabelSetsPastTheBoundShareTheOverflowSeries) {
  OpenCounterFamily family("x_total", "X.", {"key"}, 2);
  for (std::string_view key : {"a", "b", "c", "d", "a"}) {
    const std::string_view values[] = {key};
    family.add(values);
  }
  // A call with the wrong number of values counts nothing.
  const std::string_view wrong[] = {"a", "b"};
  family.add(wrong);
  EXPECT_EQ(family.series(), 2u);
  const Registry::SeriesValues snap = family.snapshot();
  ASSERT_EQ(snap.size(), 3u);
  EXPECT_EQ(snap[0], (std::pair<Labels, uint64_t>{{{"key", "a"}}, 2}));
  EXPECT_EQ(snap[1], (std::pair<Labels, uint64_t>{{{"key", "b"}}, 1}));
  EXPECT_EQ(snap[2], (std::pair<Labels, uint64_t>{{{"key", "_other_"}}, 2}));
}

TEST(OpenCounterFamily, ValuesThatWouldSpellTheSameJoinedTextAreTwoSeries) {
  OpenCounterFamily family("x_total", "X.", {"a", "b"}, 10);
  const std::string_view one[] = {"x:", "y"};
  const std::string_view two[] = {"x", ":y"};
  family.add(one);
  family.add(two);
  EXPECT_EQ(family.series(), 2u);
}

TEST(Registry, AFamilyFunctionCannotShareItsNameWithAnotherFamily) {
  Registry registry;
  registry.counter("x_total", "X.", {});
  OpenCounterFamily family("x_total", "X.", {"k"}, 1);
  EXPECT_THROW(family.attach(registry), std::logic_error);
}

TEST(DenialLogGate, OneLinePerIntervalWithACountOfTheRest) {
  DenialLogGate gate(1.0);  // one line per second
  const Nanos t0 = 1'700'000'000s;
  EXPECT_TRUE(gate.admit(t0).log);
  EXPECT_FALSE(gate.admit(t0).log);
  EXPECT_FALSE(gate.admit(t0 + 500ms).log);
  EXPECT_FALSE(gate.admit(t0 + 1s - 1ns).log);
  const DenialLogGate::Admission next = gate.admit(t0 + 1s);
  EXPECT_TRUE(next.log);
  EXPECT_EQ(next.suppressed_before, 3u);
  EXPECT_EQ(gate.logged(), 2u);
  EXPECT_EQ(gate.suppressed_total(), 3u);
  // The count restarts after each logged line.
  EXPECT_FALSE(gate.admit(t0 + 1500ms).log);
  EXPECT_EQ(gate.admit(t0 + 2s).suppressed_before, 1u);
}

TEST(DenialLogGate, FractionalRatesAndZero) {
  DenialLogGate slow(0.1);  // one line per 10 s
  const Nanos t0 = 1'700'000'000s;
  EXPECT_TRUE(slow.admit(t0).log);
  EXPECT_FALSE(slow.admit(t0 + 9s).log);
  EXPECT_TRUE(slow.admit(t0 + 10s).log);

  DenialLogGate never(0);
  EXPECT_FALSE(never.admit(t0).log);
  EXPECT_FALSE(never.admit(t0 + 100s).log);
  EXPECT_EQ(never.suppressed_total(), 2u);
}

TEST(DenialLogGate, TheNoteOfALineCountsTheEventsNotLoggedBeforeIt) {
  DenialLogGate gate(1.0);
  const Nanos t0 = 1'700'000'000s;
  EXPECT_EQ(suppressed_note(gate.admit(t0), "failed handshakes"), "");
  EXPECT_FALSE(gate.admit(t0 + 1ms).log);
  EXPECT_FALSE(gate.admit(t0 + 2ms).log);
  const DenialLogGate::Admission next = gate.admit(t0 + 1s);
  ASSERT_TRUE(next.log);
  EXPECT_EQ(suppressed_note(next, "failed handshakes"),
            " (2 failed handshakes not logged before this one)");
}

TEST(DenialLogGate, ManyThreadsLogOneLinePerInterval) {
  DenialLogGate gate(1.0);
  const Nanos t0 = 1'700'000'000s;
  std::atomic<int> logged{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10'000; ++i) {
        if (gate.admit(t0 + Nanos{i}).log) logged.fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(logged.load(), 1);  // all within one second
  EXPECT_EQ(gate.suppressed_total(), 39'999u);
}

TEST(TopKeys, CountsKeysAndKeepsAtMostCapacity) {
  TopKeys top(2);
  top.record("a");
  top.record("a");
  top.record("b");
  top.record("c");  // replaces b (the least counted): count 1 + 1, error 1
  const std::vector<TopKeys::Entry> entries = top.top();
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].key, "a");
  EXPECT_EQ(entries[0].count, 2u);
  EXPECT_EQ(entries[0].error, 0u);
  EXPECT_EQ(entries[1].key, "c");
  EXPECT_EQ(entries[1].count, 2u);
  EXPECT_EQ(entries[1].error, 1u);
}

TEST(TopKeys, AHeavyKeyStaysOnTopAmongManyLightOnes) {
  TopKeys top(TopKeys::kDefaultCapacity);
  for (int i = 0; i < 10'000; ++i) {
    top.record("attacker");
    top.record("client-" + std::to_string(i));  // 10,000 distinct keys, one each
  }
  const std::vector<TopKeys::Entry> entries = top.top();
  EXPECT_EQ(entries.size(), TopKeys::kDefaultCapacity);
  EXPECT_EQ(entries[0].key, "attacker");
  EXPECT_EQ(entries[0].count, 10'000u);
}

TEST(TopKeys, LongKeysAreTruncated) {
  TopKeys top;
  top.record(std::string(1000, 'k'));
  EXPECT_EQ(top.top()[0].key.size(), TopKeys::kMaxKeyBytes);
}

TEST(LogfmtValue, BareWhenSafeElseQuotedWithEscapes) {
  EXPECT_EQ(logfmt_value("ip:192.0.2.1"), "ip:192.0.2.1");
  EXPECT_EQ(logfmt_value("/a?x=1"), "\"/a?x=1\"");
  EXPECT_EQ(logfmt_value("GET /a"), "\"GET /a\"");
  EXPECT_EQ(logfmt_value("a\"b\\c\n"), "\"a\\\"b\\\\c\\x0a\"");
  EXPECT_EQ(logfmt_value(""), "-");
}

TEST(UpstreamFailure, ATimeoutWinsThenTheStepThenTheParse) {
  using F = UpstreamFailure;
  EXPECT_EQ(upstream_failure(true, true, false), F::kTimeout);
  EXPECT_EQ(upstream_failure(false, true, true), F::kTimeout);
  EXPECT_EQ(upstream_failure(true, false, false), F::kConnect);
  EXPECT_EQ(upstream_failure(false, false, true), F::kBadResponse);
  EXPECT_EQ(upstream_failure(false, false, false), F::kReset);
}

TEST(UpstreamRecorder, CountsFinalResponsesByClassAndFailuresByReason) {
  Registry registry;
  const UpstreamSeries series = make_upstream_series(registry, "GET /a");
  UpstreamRecorder recorder(series);
  recorder.began(std::chrono::steady_clock::now());
  for (unsigned status : {200u, 204u, 301u, 404u, 503u, 599u, 101u, 103u}) {
    recorder.responded(status);
  }
  recorder.failed(UpstreamFailure::kReset);
  EXPECT_EQ(series.responses[0]->value(), 2u);
  EXPECT_EQ(series.responses[1]->value(), 1u);
  EXPECT_EQ(series.responses[2]->value(), 1u);
  EXPECT_EQ(series.responses[3]->value(), 2u);
  EXPECT_EQ(series.duration->snapshot().count, 6u);  // 1xx: neither counted nor timed
  EXPECT_EQ(series.failures[2]->value(), 1u);
  const std::string text = registry.render();
  EXPECT_NE(text.find("sluice_upstream_failures_total{route=\"GET /a\",reason=\"bad_response\"} 0"),
            std::string::npos);
  EXPECT_NE(text.find("sluice_upstream_duration_seconds_bucket{route=\"GET /a\",le=\"50\"} 6"),
            std::string::npos);
  // A recorder of a route without series records nothing, and does not crash.
  UpstreamRecorder none{UpstreamSeries{}};
  none.responded(200);
  none.failed(UpstreamFailure::kConnect);
}

TEST(RequestDurations, AVerdictIsTimedUnderTheResultItIsCountedAs) {
  Registry registry;
  const RequestDurations plain = make_request_durations(registry, "GET /a", false);
  const RequestDurations shadow = make_request_durations(registry, "GET /s", true);
  EXPECT_EQ(plain.shadow_denied, nullptr);
  policy::Verdict v;
  EXPECT_EQ(plain.of(v), plain.allowed);  // no limit applied
  v.result = policy::Verdict::Result::kAllowed;
  EXPECT_EQ(plain.of(v), plain.allowed);
  v.result = policy::Verdict::Result::kDenied;
  EXPECT_EQ(plain.of(v), plain.denied);
  EXPECT_EQ(shadow.of(v), shadow.shadow_denied);
  v.result = policy::Verdict::Result::kFailedDenied;
  EXPECT_EQ(plain.of(v), plain.error);
  v.result = policy::Verdict::Result::kFailedAllowed;
  EXPECT_EQ(plain.of(v), plain.error);
  v.result = policy::Verdict::Result::kInvalid;
  EXPECT_EQ(plain.of(v), nullptr);
}

}  // namespace
}  // namespace sluice::observe
