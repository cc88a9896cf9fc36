// Properties every algorithm shares, checked over all five: retry_after is
// exact, remaining never wraps, weighted costs, extreme values, and the
// seed's boundary-burst comparison.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/gcra.h"
#include "core/token_bucket.h"
#include "test_util.h"

namespace sluice {
namespace {

using namespace std::chrono_literals;
using testing::allowed;
using testing::bucket;
using testing::Days;
using testing::denied;
using testing::kNoon;
using testing::kYear1990;
using testing::kYear2090;
using testing::Model;
using testing::must;
using testing::window;

struct NamedLimit {
  std::string name;
  LimitSpec spec;
};

// Every algorithm over several shapes: whole and fractional refill intervals,
// tiny and huge windows, limits larger than the window in nanoseconds.
std::vector<NamedLimit> all_shapes() {
  std::vector<NamedLimit> out;
  for (Algorithm a : {Algorithm::kTokenBucket, Algorithm::kGcra}) {
    const std::string n(algorithm_name(a));
    out.push_back({n + "_100_per_10_per_s", bucket(a, 100, 10, 1s)});
    out.push_back({n + "_5_at_3_per_s", bucket(a, 5, 3, 1s)});
    out.push_back({n + "_10_at_7_per_min", bucket(a, 10, 7, 1min)});
    out.push_back({n + "_1_per_day", bucket(a, 1, 1, Days(1))});
    out.push_back({n + "_1000_at_1M_per_s", bucket(a, 1000, 1'000'000, 1s)});
    out.push_back({n + "_3_at_2_per_3us", bucket(a, 3, 2, 3us)});
  }
  for (Algorithm a : {Algorithm::kFixedWindow, Algorithm::kSlidingLog, Algorithm::kSlidingWindow}) {
    const std::string n(algorithm_name(a));
    out.push_back({n + "_100_per_min", window(a, 100, 1min)});
    out.push_back({n + "_5_per_s", window(a, 5, 1s)});
    out.push_back({n + "_7_per_3ms", window(a, 7, 3ms)});
    out.push_back({n + "_1_per_day", window(a, 1, Days(1))});
    out.push_back({n + "_2000_per_us", window(a, 2000, 1us)});
  }
  return out;
}

class EveryAlgorithm : public ::testing::TestWithParam<NamedLimit> {};

// Over seeded random traces: at every denial, retrying exactly retry_after
// later is allowed and 1 ns earlier is denied (nothing else consuming).
TEST_P(EveryAlgorithm, RetryAfterIsExactlyTheShortestWait) {
  Model m(must(Limit::create(GetParam().spec)));
  const auto trace = testing::random_trace(
      0x7e7 + m.limit().size(), kNoon, testing::binding_gap(m.limit()), m.limit().size(), 5'000);
  size_t denials = 0;
  for (size_t i = 0; i < trace.size(); ++i) {
    const auto [now, cost] = trace[i];
    const Decision d = m.apply(now, cost);
    if (d.allowed) continue;
    ++denials;
    ASSERT_GT(d.retry_after, 0ns) << "step " << i;
    ASSERT_FALSE(m.peek(now + d.retry_after - 1ns, cost).allowed)
        << "step " << i << ": retry_after " << d.retry_after.count() << "ns is too long";
    ASSERT_TRUE(m.peek(now + d.retry_after, cost).allowed)
        << "step " << i << ": retry_after " << d.retry_after.count() << "ns is too short";
  }
  EXPECT_GT(denials, trace.size() / 20);
}

// remaining is unsigned: a wrap would show as a value above the limit.
TEST_P(EveryAlgorithm, DecisionsAreWellFormed) {
  Model m(must(Limit::create(GetParam().spec)));
  const uint64_t size = m.limit().size();
  const auto trace =
      testing::random_trace(0xf0e + size, kNoon, testing::binding_gap(m.limit()), size, 5'000);
  for (size_t i = 0; i < trace.size(); ++i) {
    const Decision d = m.apply(trace[i].at, trace[i].cost);
    ASSERT_EQ(d.limit, size) << "step " << i;
    ASSERT_LE(d.remaining, size) << "step " << i;
    ASSERT_GE(d.reset_after, 0ns) << "step " << i;
    if (d.allowed) {
      ASSERT_EQ(d.retry_after, 0ns) << "step " << i;
      // Something was consumed, so something is to be restored.
      ASSERT_GT(d.reset_after, 0ns) << "step " << i;
      ASSERT_LE(d.remaining, size - trace[i].cost) << "step " << i;
    } else {
      ASSERT_GT(d.retry_after, 0ns) << "step " << i;
      ASSERT_LT(d.remaining, trace[i].cost) << "step " << i << ": denied with enough remaining";
    }
  }
}

// A key left alone for a century is full again, whatever it held.
TEST_P(EveryAlgorithm, ACenturyIdleRestoresTheWholeLimit) {
  Model m(must(Limit::create(GetParam().spec)));
  const uint64_t size = m.limit().size();
  ASSERT_TRUE(m.apply(kYear1990, size).allowed);
  ASSERT_FALSE(m.apply(kYear1990, 1).allowed);
  const Decision d = m.apply(kYear2090, size);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 0u);
  EXPECT_FALSE(m.apply(kYear2090, 1).allowed);
}

INSTANTIATE_TEST_SUITE_P(Shapes, EveryAlgorithm, ::testing::ValuesIn(all_shapes()),
                         [](const ::testing::TestParamInfo<NamedLimit>& info) {
                           return info.param.name;
                         });

// Weighted cost, the same sequence through every algorithm, all at one instant
// (12:00:10): capacity/limit 10; costs 4, 4, 4, 2, 1.
struct WeightedCase {
  const char* name;
  LimitSpec spec;
  std::vector<Decision> expected;
};

class WeightedCost : public ::testing::TestWithParam<WeightedCase> {};

TEST_P(WeightedCost, ChargesTheCostAndDeniesWhatDoesNotFit) {
  const WeightedCase& c = GetParam();
  Model m(must(Limit::create(c.spec)));
  const uint64_t costs[] = {4, 4, 4, 2, 1};
  ASSERT_EQ(c.expected.size(), std::size(costs));
  for (size_t i = 0; i < std::size(costs); ++i) {
    EXPECT_EQ(m.apply(kNoon + 10s, costs[i]), c.expected[i])
        << "request " << i << " cost " << costs[i];
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllAlgorithms, WeightedCost,
    ::testing::Values(
        // 10 -> 6 -> 2 tokens; 4 more need 2 s; 2 -> 0; 1 more needs 1 s.
        WeightedCase{"TokenBucket",
                     bucket(Algorithm::kTokenBucket, 10, 1, 1s),
                     {allowed(10, 6, 4s), allowed(10, 2, 8s), denied(10, 2, 8s, 2s),
                      allowed(10, 0, 10s), denied(10, 0, 10s, 1s)}},
        WeightedCase{"Gcra",
                     bucket(Algorithm::kGcra, 10, 1, 1s),
                     {allowed(10, 6, 4s), allowed(10, 2, 8s), denied(10, 2, 8s, 2s),
                      allowed(10, 0, 10s), denied(10, 0, 10s, 1s)}},
        // The window ends in 50 s.
        WeightedCase{"FixedWindow",
                     window(Algorithm::kFixedWindow, 10, 1min),
                     {allowed(10, 6, 50s), allowed(10, 2, 50s), denied(10, 2, 50s, 50s),
                      allowed(10, 0, 50s), denied(10, 0, 50s, 50s)}},
        // Everything is one entry at 12:00:10, which leaves at 12:01:10.
        WeightedCase{"SlidingLog",
                     window(Algorithm::kSlidingLog, 10, 1min),
                     {allowed(10, 6, 1min), allowed(10, 2, 1min), denied(10, 2, 1min, 1min),
                      allowed(10, 0, 1min), denied(10, 0, 1min, 1min)}},
        // This window's count is gone at 12:02:00 (110 s). Cost 4 over 8: in
        // the next window 8 * (60 - e)/60 + 4 <= 10 at e = 15 s (65 s from now);
        // cost 1 over 10: 10 * (60 - e)/60 + 1 <= 10 at e = 6 s (56 s).
        WeightedCase{"SlidingWindow",
                     window(Algorithm::kSlidingWindow, 10, 1min),
                     {allowed(10, 6, 110s), allowed(10, 2, 110s), denied(10, 2, 110s, 65s),
                      allowed(10, 0, 110s), denied(10, 0, 110s, 56s)}}),
    [](const ::testing::TestParamInfo<WeightedCase>& info) {
      return std::string(info.param.name);
    });

// Extreme values: exact results, no overflow (UBSan would abort on a signed
// overflow), at timestamps decades ahead.
struct ExtremeCase {
  const char* name;
  LimitSpec spec;
  Nanos at;
  std::vector<std::pair<uint64_t, Decision>> steps;  // (cost, expected), all at `at`
  Nanos retry_check;                                 // the last denial's retry_after
};

class Extremes : public ::testing::TestWithParam<ExtremeCase> {};

TEST_P(Extremes, AreExact) {
  const ExtremeCase& c = GetParam();
  Model m(must(Limit::create(c.spec)));
  for (size_t i = 0; i < c.steps.size(); ++i) {
    EXPECT_EQ(m.apply(c.at, c.steps[i].first), c.steps[i].second) << "step " << i;
  }
  const uint64_t last_cost = c.steps.back().first;
  EXPECT_FALSE(m.peek(c.at + c.retry_check - 1ns, last_cost).allowed);
  EXPECT_TRUE(m.peek(c.at + c.retry_check, last_cost).allowed);
}

constexpr uint64_t kMillion = 1'000'000;
constexpr Nanos k2090At6 = kYear2090 + 6h;  // 2090-01-01 06:00

INSTANTIATE_TEST_SUITE_P(
    AllAlgorithms, Extremes,
    ::testing::Values(
        ExtremeCase{"TokenBucketOnePerDayIn2090",
                    bucket(Algorithm::kTokenBucket, 1, 1, Days(1)),
                    k2090At6,
                    {{1, allowed(1, 0, Days(1))}, {1, denied(1, 0, Days(1), Days(1))}},
                    Days(1)},
        ExtremeCase{"GcraOnePerDayIn2090",
                    bucket(Algorithm::kGcra, 1, 1, Days(1)),
                    k2090At6,
                    {{1, allowed(1, 0, Days(1))}, {1, denied(1, 0, Days(1), Days(1))}},
                    Days(1)},
        ExtremeCase{"FixedWindowOnePerDayIn2090",
                    window(Algorithm::kFixedWindow, 1, Days(1)),
                    k2090At6,
                    {{1, allowed(1, 0, 18h)}, {1, denied(1, 0, 18h, 18h)}},
                    18h},
        ExtremeCase{"SlidingLogOnePerDayIn2090",
                    window(Algorithm::kSlidingLog, 1, Days(1)),
                    k2090At6,
                    {{1, allowed(1, 0, Days(1))}, {1, denied(1, 0, Days(1), Days(1))}},
                    Days(1)},
        // One in this day's window keeps a weight above 0 until the next day
        // ends: 18 h + 24 h.
        ExtremeCase{"SlidingWindowOnePerDayIn2090",
                    window(Algorithm::kSlidingWindow, 1, Days(1)),
                    k2090At6,
                    {{1, allowed(1, 0, 42h)}, {1, denied(1, 0, 42h, 42h)}},
                    42h},
        // A million per second: one token per microsecond.
        ExtremeCase{"TokenBucketMillionPerSecondIn2090",
                    bucket(Algorithm::kTokenBucket, kMillion, kMillion, 1s),
                    kYear2090,
                    {{kMillion - 1, allowed(kMillion, 1, 999'999us)},
                     {1, allowed(kMillion, 0, 1s)},
                     {1, denied(kMillion, 0, 1s, 1us)}},
                    1us},
        ExtremeCase{"GcraMillionPerSecondIn2090",
                    bucket(Algorithm::kGcra, kMillion, kMillion, 1s),
                    kYear2090,
                    {{kMillion - 1, allowed(kMillion, 1, 999'999us)},
                     {1, allowed(kMillion, 0, 1s)},
                     {1, denied(kMillion, 0, 1s, 1us)}},
                    1us},
        ExtremeCase{"FixedWindowMillionPerSecondIn2090",
                    window(Algorithm::kFixedWindow, kMillion, 1s),
                    kYear2090 + 250ms,
                    {{kMillion - 1, allowed(kMillion, 1, 750ms)},
                     {1, allowed(kMillion, 0, 750ms)},
                     {1, denied(kMillion, 0, 750ms, 750ms)}},
                    750ms},
        // sliding_log holds at most 10,000: the same rate as 10,000 per 10 ms.
        ExtremeCase{"SlidingLogMillionPerSecondIn2090",
                    window(Algorithm::kSlidingLog, 10'000, 10ms),
                    kYear2090,
                    {{9'999, allowed(10'000, 1, 10ms)},
                     {1, allowed(10'000, 0, 10ms)},
                     {1, denied(10'000, 0, 10ms, 10ms)}},
                    10ms},
        // At 250 ms into the window, nothing before: next window at 750 ms,
        // where the million weigh (1 - e) * 10^6 + 1 <= 10^6 from e = 1 us.
        ExtremeCase{"SlidingWindowMillionPerSecondIn2090",
                    window(Algorithm::kSlidingWindow, kMillion, 1s),
                    kYear2090 + 250ms,
                    {{kMillion - 1, allowed(kMillion, 1, 1750ms)},
                     {1, allowed(kMillion, 0, 1750ms)},
                     {1, denied(kMillion, 0, 1750ms, 750ms + 1us)}},
                    750ms + 1us},
        // The largest size there is, refilled at ~4.3 billion per microsecond:
        // a token is 200 units, 858,993,459 units arrive per ns.
        ExtremeCase{"TokenBucketLargestCapacityAtTheHighestRate",
                    bucket(Algorithm::kTokenBucket, Limit::kMaxLimit, Limit::kMaxLimit, 1us),
                    kYear2090,
                    {{Limit::kMaxLimit, allowed(Limit::kMaxLimit, 0, 1us)},
                     {1, denied(Limit::kMaxLimit, 0, 1us, 1ns)}},
                    1ns}),
    [](const ::testing::TestParamInfo<ExtremeCase>& info) { return std::string(info.param.name); });

// The largest limit over the longest window, in 2090 (90 days before a
// 3660-day window ends): the estimate's products reach 2^32 * 2^58.
TEST(Extremes, SlidingWindowLargestLimitOverTenYears) {
  const Days w(3660);
  Model m(must(Limit::sliding_window(Limit::kMaxLimit, w)));
  ASSERT_EQ(kYear2090 % w, w - Days(90));
  // This window's count is gone when the next one ends: 90 + 3660 days.
  EXPECT_EQ(m.apply(kYear2090, Limit::kMaxLimit), allowed(Limit::kMaxLimit, 0, Days(3750)));
  // In the next window the full previous count must weigh at most max - 1:
  // (w - e) * max <= (max - 1) * w from e = ceil(w / max) = 73,626,638 ns.
  const Nanos retry = Days(90) + Nanos{73'626'638};
  EXPECT_EQ(m.apply(kYear2090, 1), denied(Limit::kMaxLimit, 0, Days(3750), retry));
  EXPECT_FALSE(m.peek(kYear2090 + retry - 1ns, 1).allowed);
  EXPECT_TRUE(m.peek(kYear2090 + retry, 1).allowed);
}

// The largest bucket Limit::create accepts counts 2^62 units when full
// (capacity 2^31, one token = 2^31 units). Draining it and asking for all of
// it again must not overflow 64 bits.
TEST(Extremes, TheLargestExactBucketCountsWithoutOverflow) {
  constexpr uint64_t kCapacity = uint64_t{1} << 31;
  const Nanos period{int64_t{125} << 31};  // 125 tokens per 268.435456 s
  for (Algorithm a : {Algorithm::kTokenBucket, Algorithm::kGcra}) {
    SCOPED_TRACE(std::string(algorithm_name(a)));
    Model m(must(Limit::create(bucket(a, kCapacity, 125, period))));
    ASSERT_EQ(m.limit().token_units(), int64_t{1} << 31);
    ASSERT_EQ(m.limit().units_per_ns(), 1);
    const Nanos full_after{int64_t{1} << 62};  // 2^62 units at 1 unit per ns
    EXPECT_EQ(m.apply(kYear2090, kCapacity), allowed(kCapacity, 0, full_after));
    EXPECT_EQ(m.apply(kYear2090, kCapacity), denied(kCapacity, 0, full_after, full_after));
    EXPECT_EQ(m.apply(kYear2090, 1), denied(kCapacity, 0, full_after, Nanos{int64_t{1} << 31}));
  }
}

// The seed's boundary burst, the comparison `sluice simulate` prints: 100 per
// minute, 100 requests at 11:59:59 and 100 at 12:00:01, through a Limiter on a
// manual clock.
struct BurstCase {
  const char* name;
  LimitSpec spec;
  int admitted;
};

class BoundaryBurst : public ::testing::TestWithParam<BurstCase> {};

TEST_P(BoundaryBurst, AdmitsExactly) {
  const BurstCase& c = GetParam();
  ManualClock clock(kNoon - 1s);
  Limiter limiter(std::make_shared<MemoryStore>(), {must(Limit::create(c.spec))}, clock);
  int admitted = 0;
  for (int i = 0; i < 100; ++i) admitted += must(limiter.try_acquire("client")).allowed;
  clock.set(kNoon + 1s);
  for (int i = 0; i < 100; ++i) admitted += must(limiter.try_acquire("client")).allowed;
  EXPECT_EQ(admitted, c.admitted);
}

INSTANTIATE_TEST_SUITE_P(
    SeedExample, BoundaryBurst,
    ::testing::Values(
        // Twice the limit: the flaw the seed warns about.
        BurstCase{"FixedWindow", window(Algorithm::kFixedWindow, 100, 1min), 200},
        // Exact: nothing more within the minute.
        BurstCase{"SlidingLog", window(Algorithm::kSlidingLog, 100, 1min), 100},
        // The previous window still weighs 98.33: one more.
        BurstCase{"SlidingWindow", window(Algorithm::kSlidingWindow, 100, 1min), 101},
        // Two seconds refill 3.33 tokens: three more.
        BurstCase{"TokenBucket", bucket(Algorithm::kTokenBucket, 100, 100, 1min), 103},
        BurstCase{"Gcra", bucket(Algorithm::kGcra, 100, 100, 1min), 103}),
    [](const ::testing::TestParamInfo<BurstCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace sluice
