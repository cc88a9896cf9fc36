// sliding_window (counter): the previous window's count, weighted by how much
// of it still overlaps the last window-length interval, plus the current count.
#include "core/sliding_window.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "test_util.h"

namespace sluice {
namespace {

using namespace std::chrono_literals;
using testing::allowed;
using testing::denied;
using testing::kNoon;
using testing::Model;
using testing::must;

Limit hundred_per_minute() {
  return must(Limit::sliding_window(100, 1min));
}

TEST(SlidingWindow, WithNoPreviousWindowItAdmitsTheLimit) {
  Model m(hundred_per_minute());
  int admitted = 0;
  for (int i = 0; i < 150; ++i) admitted += m.apply(kNoon + 10s, 1).allowed;
  EXPECT_EQ(admitted, 100);
}

TEST(SlidingWindow, ThePreviousWindowWeighsByItsRemainingOverlap) {
  Model m(hundred_per_minute());
  ASSERT_TRUE(m.apply(kNoon - 30s, 100).allowed);
  // 15 s into the next window, 45 s of the previous one still overlap:
  // 100 * 45/60 = 75 counted, so 25 more fit.
  int admitted = 0;
  for (int i = 0; i < 50; ++i) admitted += m.apply(kNoon + 15s, 1).allowed;
  EXPECT_EQ(admitted, 25);
}

TEST(SlidingWindow, RemainingAndResetAfterAreExact) {
  Model m(hundred_per_minute());
  ASSERT_TRUE(m.apply(kNoon - 30s, 60).allowed);
  // At +20 s: 60 * 40/60 = 40 counted -> 59 left after this one; this window's
  // count is gone at 12:02:00, 100 s from now.
  EXPECT_EQ(m.apply(kNoon + 20s, 1), allowed(100, 59, 100s));
  // At +30 s: 60 * 30/60 + 2 = 32 -> 68 left.
  EXPECT_EQ(m.apply(kNoon + 30s, 1), allowed(100, 68, 90s));
  // At +31 s: 60 * 29/60 + 3 = 32 -> 68 left.
  EXPECT_EQ(m.apply(kNoon + 31s, 1), allowed(100, 68, 89s));
  // At +31.5 s: 60 * 28.5/60 + 4 = 32.5 -> 67.5 left, reported as 67.
  EXPECT_EQ(m.apply(kNoon + 31s + 500ms, 1), allowed(100, 67, 88500ms));
}

TEST(SlidingWindow, DeniedWhileThePreviousWindowStillWeighsTooMuch) {
  Model m(hundred_per_minute());
  ASSERT_TRUE(m.apply(kNoon - 30s, 100).allowed);
  ASSERT_TRUE(m.apply(kNoon + 15s, 25).allowed);
  // 75 + 25 = 100. One more fits once 100 * (60 - e)/60 <= 74, at e = 15.6 s.
  EXPECT_EQ(m.apply(kNoon + 15s, 1), denied(100, 0, 105s, 600ms));
  EXPECT_FALSE(m.apply(kNoon + 15600ms - 1ns, 1).allowed);
  EXPECT_TRUE(m.apply(kNoon + 15600ms, 1).allowed);
}

TEST(SlidingWindow, DeniedUntilTheNextWindowWhenThisOneIsFull) {
  Model m(hundred_per_minute());
  ASSERT_TRUE(m.apply(kNoon + 10s, 80).allowed);
  // 80 + 30 > 100 however light the previous window gets. In the next window,
  // 80 * (60 - e)/60 + 30 <= 100 at e = 7.5 s: 57.5 s from now.
  EXPECT_EQ(m.apply(kNoon + 10s, 30), denied(100, 20, 110s, 57500ms));
  EXPECT_FALSE(m.apply(kNoon + 67500ms - 1ns, 30).allowed);
  EXPECT_TRUE(m.apply(kNoon + 67500ms, 30).allowed);
}

TEST(SlidingWindow, BoundaryBurstAdmitsOneMoreThanTheLimit) {
  // 100 at 11:59:59, then at 12:00:01 the previous 100 still weigh 100 * 59/60
  // = 98.33, so only one more fits: 101 in two seconds, not 200.
  Model m(hundred_per_minute());
  int admitted = 0;
  for (int i = 0; i < 100; ++i) admitted += m.apply(kNoon - 1s, 1).allowed;
  for (int i = 0; i < 100; ++i) admitted += m.apply(kNoon + 1s, 1).allowed;
  EXPECT_EQ(admitted, 101);
}

TEST(SlidingWindow, DenialReturnsTheInputState) {
  const Limit limit = hundred_per_minute();
  const int64_t index = kNoon.count() / Nanos(1min).count();
  const core::SlidingWindowState state{index, 30, 90};
  const core::SlidingWindowStep step = core::sliding_window(limit, state, kNoon + 6s, 1);
  ASSERT_FALSE(step.decision.allowed);  // 90 * 54/60 + 30 = 111
  EXPECT_EQ(step.next.window_index, state.window_index);
  EXPECT_EQ(step.next.current, state.current);
  EXPECT_EQ(step.next.previous, state.previous);
}

TEST(SlidingWindow, AStateTwoWindowsOldCountsAsEmpty) {
  const Limit limit = hundred_per_minute();
  const int64_t index = kNoon.count() / Nanos(1min).count();
  const core::SlidingWindowState state{index - 2, 100, 100};
  const core::SlidingWindowStep step = core::sliding_window(limit, state, kNoon + 6s, 100);
  EXPECT_EQ(step.decision, allowed(100, 0, 114s));
  EXPECT_EQ(step.next.window_index, index);
  EXPECT_EQ(step.next.current, 100u);
  EXPECT_EQ(step.next.previous, 0u);
}

// Regression: with a limit larger than the window in nanoseconds, the wait
// into the next window came out negative (retry_after -1 ns for a denial).
// A `now` before an earlier request's (the caller's clock stepped back): the
// later window the state is in keeps counting, and as no time of it has
// passed, its previous window weighs in full.
TEST(SlidingWindow, TimeRunningBackIntoAnEarlierWindowKeepsCountingInTheLaterOne) {
  Model m(must(Limit::sliding_window(10, 1min)));
  ASSERT_EQ(m.apply(kNoon - 30s, 6), allowed(10, 4, 90s));
  // At 12:00:30 the 6 before noon weigh 6 * 30/60 = 3: 3 + 1 -> 6 left.
  EXPECT_EQ(m.apply(kNoon + 30s, 1), allowed(10, 6, 90s));
  // Back at 11:59:30: still noon's window (1 counted), the 6 weigh 6 * 60/60:
  // 6 + 1 + 1 -> 2 left. This window's count is gone at 12:02:00, 150 s away.
  EXPECT_EQ(m.apply(kNoon - 30s, 1), allowed(10, 2, 150s));
  // 6 + 2 + 3 > 10. At 12:00:10 the 6 weigh 5: 5 + 2 + 3 = 10 fits, 40 s away.
  EXPECT_EQ(m.apply(kNoon - 30s, 3), denied(10, 2, 150s, 40s));
  EXPECT_FALSE(m.apply(kNoon + 10s - 1ns, 3).allowed);
  EXPECT_EQ(m.apply(kNoon + 10s, 3), allowed(10, 0, 110s));
}

TEST(SlidingWindow, RetryAfterNeverPointsBeforeTheNextWindowWhenThisOneCannotAdmit) {
  Model m(must(Limit::sliding_window(2000, 1us)));
  const Nanos start = kNoon;  // a 1 us boundary
  ASSERT_TRUE(m.apply(start, 1500).allowed);
  ASSERT_TRUE(m.apply(start + 1us + 999ns, 500).allowed);  // 1500 * 1/1000 + 500 <= 2000
  // 1500 * 1/1000 + 500 + 1499 = 2000.5 > 2000: denied (1498.5 left, reported
  // as 1498); it cannot fit in this window, and in the next one 500 + 1499
  // fits at once, 1 ns from now.
  const Decision d = m.apply(start + 1us + 999ns, 1499);
  EXPECT_EQ(d, denied(2000, 1498, 1001ns, 1ns));
  EXPECT_TRUE(m.apply(start + 2us, 1499).allowed);
}

// The same property over random states where the bug above lives: limits
// larger than the window in nanoseconds, costs anywhere in [1, limit], gaps
// under half a window.
TEST(SlidingWindow, RetryAfterIsExactWhenTheLimitExceedsTheWindowInNanoseconds) {
  for (const auto& [size, window] :
       {std::pair<uint64_t, Nanos>{2000, 1us}, std::pair<uint64_t, Nanos>{5000, 2us},
        std::pair<uint64_t, Nanos>{100'000, 7us}}) {
    SCOPED_TRACE(std::to_string(size) + " per " + std::to_string(window.count()) + "ns");
    Model m(must(Limit::sliding_window(size, window)));
    std::mt19937_64 rng(size);
    Nanos now = kNoon;
    size_t denials = 0;
    for (int i = 0; i < 20'000; ++i) {
      now += Nanos{static_cast<int64_t>(rng() % static_cast<uint64_t>(window.count() / 2))};
      const uint64_t cost = 1 + rng() % size;
      const Decision d = m.apply(now, cost);
      if (d.allowed) continue;
      ++denials;
      ASSERT_GT(d.retry_after, 0ns) << "step " << i;
      ASSERT_FALSE(m.peek(now + d.retry_after - 1ns, cost).allowed) << "step " << i;
      ASSERT_TRUE(m.peek(now + d.retry_after, cost).allowed) << "step " << i;
    }
    EXPECT_GT(denials, 2'000u);
  }
}

class SlidingWindowBound : public ::testing::TestWithParam<std::tuple<uint64_t, Nanos>> {};

// The documented bound: fewer than 2 x limit in any window-length interval,
// checked with a brute-force count over seeded random traces.
TEST_P(SlidingWindowBound, AdmitsFewerThanTwiceTheLimitInAnyWindowLengthInterval) {
  const auto [size, window] = GetParam();
  Model m(must(Limit::sliding_window(size, window)));
  const auto trace =
      testing::random_trace(0x51d3 + size, kNoon, testing::binding_gap(m.limit()), size, 3'000);
  std::vector<testing::Request> admitted;
  for (const testing::Request& r : trace) {
    if (m.apply(r.at, r.cost).allowed) admitted.push_back(r);
  }
  ASSERT_GT(admitted.size(), trace.size() / 10);
  const uint64_t most = testing::max_in_any_window(admitted, window);
  EXPECT_LT(most, 2 * size);
  EXPECT_GE(most, size);
}

INSTANTIATE_TEST_SUITE_P(Shapes, SlidingWindowBound,
                         ::testing::Values(std::make_tuple(uint64_t{100}, Nanos(1min)),
                                           std::make_tuple(uint64_t{5}, Nanos(1s)),
                                           std::make_tuple(uint64_t{7}, Nanos(3ms)),
                                           std::make_tuple(uint64_t{1},
                                                           Nanos(std::chrono::days(1))),
                                           std::make_tuple(uint64_t{3000}, Nanos(1us))),
                         [](const ::testing::TestParamInfo<std::tuple<uint64_t, Nanos>>& info) {
                           return "Limit" + std::to_string(std::get<0>(info.param)) + "Per" +
                                  std::to_string(std::get<1>(info.param).count()) + "ns";
                         });

}  // namespace
}  // namespace sluice
