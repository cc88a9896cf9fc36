// sliding_log: exact; never more than `limit` in any window-length interval.
#include "core/sliding_log.h"

#include <gtest/gtest.h>

#include <string>
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

TEST(SlidingLog, AdmitsTheLimitThenDeniesUntilTheOldestLeaves) {
  Model m(must(Limit::sliding_log(3, 10s)));
  EXPECT_EQ(m.apply(kNoon, 1), allowed(3, 2, 10s));
  EXPECT_EQ(m.apply(kNoon + 1s, 1), allowed(3, 1, 10s));
  EXPECT_EQ(m.apply(kNoon + 2s, 1), allowed(3, 0, 10s));
  // Full: the newest entry leaves at +12 s, the oldest at +10 s.
  EXPECT_EQ(m.apply(kNoon + 5s, 1), denied(3, 0, 7s, 5s));
}

TEST(SlidingLog, AnEntryLeavesExactlyOneWindowAfterIt) {
  Model m(must(Limit::sliding_log(3, 10s)));
  for (Nanos t : {kNoon, kNoon + 1s, kNoon + 2s}) ASSERT_TRUE(m.apply(t, 1).allowed);
  // The window is (now - 10 s, now]: the entry at +0 is still in at +10 s - 1 ns.
  EXPECT_FALSE(m.apply(kNoon + 10s - 1ns, 1).allowed);
  EXPECT_EQ(m.apply(kNoon + 10s, 1), allowed(3, 0, 10s));
}

TEST(SlidingLog, WeightedCostWaitsForEnoughEntriesToLeave) {
  Model m(must(Limit::sliding_log(10, 1min)));
  EXPECT_EQ(m.apply(kNoon, 4), allowed(10, 6, 1min));
  EXPECT_EQ(m.apply(kNoon + 10s, 4), allowed(10, 2, 1min));
  // Cost 7 needs 5 more: the entry at +0 (4) is not enough, the one at +10 s is.
  EXPECT_EQ(m.apply(kNoon + 20s, 7), denied(10, 2, 50s, 50s));
  // Cost 5 needs 3: the entry at +0 leaving is enough.
  EXPECT_EQ(m.apply(kNoon + 20s, 5), denied(10, 2, 50s, 40s));
  EXPECT_EQ(m.apply(kNoon + 20s, 2), allowed(10, 0, 1min));
}

TEST(SlidingLog, RequestsAtTheSameInstantShareOneEntry) {
  const Limit limit = must(Limit::sliding_log(100, 1min));
  core::SlidingLog log;
  for (int i = 0; i < 5; ++i) {
    const core::SlidingLogStep step = core::sliding_log(limit, log, kNoon, 2);
    ASSERT_TRUE(step.decision.allowed);
    core::sliding_log_commit(log, step, kNoon, 2);
  }
  EXPECT_EQ(log.size(), 1u);
  EXPECT_EQ(log.total_cost(), 10u);
}

TEST(SlidingLog, CommitDropsExpiredEntries) {
  const Limit limit = must(Limit::sliding_log(100, 1min));
  core::SlidingLog log;
  for (Nanos t : {kNoon, kNoon + 10s, kNoon + 20s}) {
    const core::SlidingLogStep step = core::sliding_log(limit, log, t, 1);
    core::sliding_log_commit(log, step, t, 1);
  }
  ASSERT_EQ(log.size(), 3u);
  // At +70 s the entries at +0 and +10 s are out.
  const core::SlidingLogStep step = core::sliding_log(limit, log, kNoon + 70s, 1);
  EXPECT_EQ(step.expired, 2u);
  EXPECT_EQ(step.decision, allowed(100, 98, 1min));
  core::sliding_log_commit(log, step, kNoon + 70s, 1);
  EXPECT_EQ(log.size(), 2u);
  EXPECT_EQ(log.total_cost(), 2u);
}

// A `now` before the newest entry (the caller's clock stepped back): the
// request joins the newest entry, so the log stays sorted and it leaves the
// window with that entry, one window after the newest time seen.
TEST(SlidingLog, TimeRunningBackJoinsTheNewestEntry) {
  Model m(must(Limit::sliding_log(3, 10s)));
  EXPECT_EQ(m.apply(kNoon + 5s, 1), allowed(3, 2, 10s));
  // Back to +2 s: the newest entry (+5 s) leaves at +15 s, 13 s away.
  EXPECT_EQ(m.apply(kNoon + 2s, 1), allowed(3, 1, 13s));
  EXPECT_EQ(m.apply(kNoon + 1s, 1), allowed(3, 0, 14s));
  EXPECT_EQ(m.apply(kNoon + 1s, 1), denied(3, 0, 14s, 14s));
  // Recorded at +1 s and +2 s they would have left by +12 s; joined to +5 s
  // they stay until +15 s.
  EXPECT_EQ(m.apply(kNoon + 12s, 1), denied(3, 0, 3s, 3s));
  EXPECT_FALSE(m.apply(kNoon + 15s - 1ns, 1).allowed);
  EXPECT_EQ(m.apply(kNoon + 15s, 3), allowed(3, 0, 10s));
}

struct WindowParams {
  const char* name;
  uint64_t limit;
  Nanos window;
};

class SlidingLogBound : public ::testing::TestWithParam<WindowParams> {};

// Checked against a brute-force count over every interval (t - window, t].
TEST_P(SlidingLogBound, NeverAdmitsMoreThanTheLimitInAnyWindowLengthInterval) {
  const WindowParams& p = GetParam();
  Model m(must(Limit::sliding_log(p.limit, p.window)));
  const auto trace = testing::random_trace(0xb0a710 + p.limit, kNoon,
                                           testing::binding_gap(m.limit()), p.limit, 3'000);
  std::vector<testing::Request> admitted;
  for (const testing::Request& r : trace) {
    if (m.apply(r.at, r.cost).allowed) admitted.push_back(r);
  }
  ASSERT_GT(admitted.size(), trace.size() / 10);
  ASSERT_LT(admitted.size(), trace.size() - trace.size() / 10);
  // Exact: the bound is reached, never passed.
  EXPECT_EQ(testing::max_in_any_window(admitted, p.window), p.limit);
}

INSTANTIATE_TEST_SUITE_P(Shapes, SlidingLogBound,
                         ::testing::Values(WindowParams{"Limit100PerMinute", 100, 1min},
                                           WindowParams{"Limit5PerSecond", 5, 1s},
                                           WindowParams{"Limit7Per3Milliseconds", 7, 3ms},
                                           WindowParams{"Limit1PerDay", 1, std::chrono::days(1)},
                                           WindowParams{"Limit1000Per1Microsecond", 1000, 1us}),
                         [](const ::testing::TestParamInfo<WindowParams>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace sluice
