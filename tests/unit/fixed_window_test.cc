// fixed_window: at most `limit` per epoch-aligned window, and the boundary
// burst that makes it admit twice that across a boundary.
#include "core/fixed_window.h"

#include <gtest/gtest.h>

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
  return must(Limit::fixed_window(100, 1min));
}

TEST(FixedWindow, AdmitsTheLimitPerWindowThenDenies) {
  Model m(hundred_per_minute());
  int admitted = 0;
  for (int i = 0; i < 150; ++i) admitted += m.apply(kNoon + 10s, 1).allowed;
  EXPECT_EQ(admitted, 100);
}

TEST(FixedWindow, RemainingCountsDownAndResetAfterIsTheEndOfTheWindow) {
  Model m(hundred_per_minute());
  EXPECT_EQ(m.apply(kNoon + 15s, 1), allowed(100, 99, 45s));
  EXPECT_EQ(m.apply(kNoon + 20s, 1), allowed(100, 98, 40s));
  EXPECT_EQ(m.apply(kNoon + 59s, 98), allowed(100, 0, 1s));
}

TEST(FixedWindow, DeniesUntilTheWindowEnds) {
  Model m(hundred_per_minute());
  ASSERT_TRUE(m.apply(kNoon + 15s, 100).allowed);
  EXPECT_EQ(m.apply(kNoon + 20s, 1), denied(100, 0, 40s, 40s));
  EXPECT_FALSE(m.apply(kNoon + 1min - 1ns, 1).allowed);
  // The next window starts empty.
  EXPECT_EQ(m.apply(kNoon + 1min, 1), allowed(100, 99, 1min));
}

TEST(FixedWindow, BoundaryBurstAdmitsTwiceTheLimit) {
  // The seed's flaw: 100 per minute, 100 requests at 11:59:59 and 100 at
  // 12:00:01 -> all 200 admitted within two seconds.
  Model m(hundred_per_minute());
  int admitted = 0;
  for (int i = 0; i < 100; ++i) admitted += m.apply(kNoon - 1s, 1).allowed;
  for (int i = 0; i < 100; ++i) admitted += m.apply(kNoon + 1s, 1).allowed;
  EXPECT_EQ(admitted, 200);
}

TEST(FixedWindow, WindowsAreAlignedToTheEpoch) {
  const Limit limit = hundred_per_minute();
  const core::FixedWindowState s = core::fixed_window_fresh(limit, kNoon + 59s);
  EXPECT_EQ(s.window_index, kNoon.count() / Nanos(1min).count());
  EXPECT_EQ(s.count, 0);
}

TEST(FixedWindow, WeightedCostDeniesWhatDoesNotFitAndAdmitsWhatDoes) {
  Model m(must(Limit::fixed_window(10, 1min)));
  EXPECT_EQ(m.apply(kNoon + 10s, 4), allowed(10, 6, 50s));
  EXPECT_EQ(m.apply(kNoon + 10s, 4), allowed(10, 2, 50s));
  EXPECT_EQ(m.apply(kNoon + 10s, 4), denied(10, 2, 50s, 50s));
  EXPECT_EQ(m.apply(kNoon + 10s, 2), allowed(10, 0, 50s));
}

TEST(FixedWindow, DenialReturnsTheInputState) {
  const Limit limit = hundred_per_minute();
  const core::FixedWindowState state{kNoon.count() / Nanos(1min).count(), 100};
  const core::FixedWindowStep step = core::fixed_window(limit, state, kNoon + 30s, 1);
  ASSERT_FALSE(step.decision.allowed);
  EXPECT_EQ(step.next.window_index, state.window_index);
  EXPECT_EQ(step.next.count, state.count);
}

TEST(FixedWindow, AStateFromAnEarlierWindowCountsAsEmpty) {
  const Limit limit = hundred_per_minute();
  const core::FixedWindowState state{kNoon.count() / Nanos(1min).count() - 1, 100};
  const core::FixedWindowStep step = core::fixed_window(limit, state, kNoon + 30s, 1);
  EXPECT_EQ(step.decision, allowed(100, 99, 30s));
  EXPECT_EQ(step.next.window_index, state.window_index + 1);
  EXPECT_EQ(step.next.count, 1);
}

// A `now` before an earlier request's (the caller's clock stepped back):
// the later window the state is in keeps counting, and its end is measured
// from the earlier `now`.
TEST(FixedWindow, TimeRunningBackIntoAnEarlierWindowKeepsCountingInTheLaterOne) {
  Model m(must(Limit::fixed_window(10, 1min)));
  EXPECT_EQ(m.apply(kNoon + 30s, 4), allowed(10, 6, 30s));
  // 11:59:50 is in the window before noon's: still noon's window, 4 counted,
  // and it ends at 12:01:00, 70 s away.
  EXPECT_EQ(m.apply(kNoon - 10s, 3), allowed(10, 3, 70s));
  EXPECT_EQ(m.apply(kNoon - 10s, 4), denied(10, 3, 70s, 70s));
  // Back in noon's window: the 7 counted while time ran backwards are there.
  EXPECT_EQ(m.apply(kNoon + 31s, 3), allowed(10, 0, 29s));
  EXPECT_EQ(m.apply(kNoon + 31s, 1), denied(10, 0, 29s, 29s));
}

}  // namespace
}  // namespace sluice
