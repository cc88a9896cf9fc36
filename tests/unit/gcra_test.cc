// gcra: one timestamp of state, and the same decisions as token_bucket.
#include "core/gcra.h"

#include <gtest/gtest.h>

#include <string>

#include "test_util.h"

namespace sluice {
namespace {

using namespace std::chrono_literals;
using testing::allowed;
using testing::denied;
using testing::kNoon;
using testing::Model;
using testing::must;

struct BucketParams {
  const char* name;
  uint64_t capacity;
  uint64_t refill_tokens;
  Nanos refill_period;
};

class GcraEqualsTokenBucket : public ::testing::TestWithParam<BucketParams> {};

// The whole Decision, step by step, over 20,000 seeded random requests with
// random costs (1 to capacity) and random gaps, some simultaneous, some long.
TEST_P(GcraEqualsTokenBucket, OnSeededRandomTraces) {
  const BucketParams& p = GetParam();
  Model gcra(must(Limit::gcra(p.capacity, p.refill_tokens, p.refill_period)));
  Model bucket(must(Limit::token_bucket(p.capacity, p.refill_tokens, p.refill_period)));
  constexpr size_t kSteps = 20'000;
  const auto trace = testing::random_trace(
      0x5eed0000 + p.capacity, kNoon, testing::binding_gap(bucket.limit()), p.capacity, kSteps);
  size_t admitted = 0;
  for (size_t i = 0; i < trace.size(); ++i) {
    const Decision expected = bucket.apply(trace[i].at, trace[i].cost);
    const Decision actual = gcra.apply(trace[i].at, trace[i].cost);
    ASSERT_EQ(actual, expected) << "step " << i << " at +" << (trace[i].at - kNoon).count()
                                << "ns cost " << trace[i].cost;
    admitted += expected.allowed;
  }
  // The trace exercised both outcomes in earnest.
  EXPECT_GT(admitted, kSteps / 10);
  EXPECT_LT(admitted, kSteps - kSteps / 10);
}

INSTANTIATE_TEST_SUITE_P(
    BucketShapes, GcraEqualsTokenBucket,
    ::testing::Values(BucketParams{"Capacity100Rate10PerSecond", 100, 10, 1s},
                      BucketParams{"Capacity5Rate3PerSecond", 5, 3, 1s},
                      BucketParams{"Capacity10Rate7PerMinute", 10, 7, 1min},
                      BucketParams{"Capacity1Rate1PerDay", 1, 1, std::chrono::days(1)},
                      BucketParams{"Capacity1000Rate1MillionPerSecond", 1000, 1'000'000, 1s},
                      BucketParams{"Capacity3Rate2Per3Microseconds", 3, 2, 3us},
                      BucketParams{"Capacity7Rate13PerHour", 7, 13, 1h},
                      BucketParams{"Capacity50Rate9Per7Milliseconds", 50, 9, 7ms}),
    [](const ::testing::TestParamInfo<BucketParams>& info) {
      return std::string(info.param.name);
    });

TEST(Gcra, FreshStateHasTheTheoreticalArrivalTimeAtNow) {
  const core::GcraState s = core::gcra_fresh(kNoon);
  EXPECT_EQ(s.tat_ns, kNoon.count());
  EXPECT_EQ(s.tat_frac, 0);
}

TEST(Gcra, EachRequestPushesTheArrivalTimeOneEmissionIntervalPerToken) {
  const Limit limit = must(Limit::gcra(100, 10, 1s));
  core::GcraStep step = core::gcra(limit, core::gcra_fresh(kNoon), kNoon, 1);
  EXPECT_EQ(step.decision, allowed(100, 99, 100ms));
  EXPECT_EQ(step.next.tat_ns, (kNoon + 100ms).count());
  EXPECT_EQ(step.next.tat_frac, 0);
  // Cost 5: five intervals further.
  step = core::gcra(limit, step.next, kNoon, 5);
  EXPECT_EQ(step.decision, allowed(100, 94, 600ms));
  EXPECT_EQ(step.next.tat_ns, (kNoon + 600ms).count());
}

TEST(Gcra, AnEmissionIntervalThatIsNotWholeNanosecondsKeepsItsFraction) {
  // 3 per second: one token is 333,333,333 1/3 ns.
  const Limit limit = must(Limit::gcra(5, 3, 1s));
  core::GcraStep step = core::gcra(limit, core::gcra_fresh(kNoon), kNoon, 1);
  EXPECT_EQ(step.next.tat_ns, (kNoon + Nanos{333'333'333}).count());
  EXPECT_EQ(step.next.tat_frac, 1);  // + 1/3 ns
  step = core::gcra(limit, step.next, kNoon, 2);
  // Three tokens: exactly one second.
  EXPECT_EQ(step.next.tat_ns, (kNoon + 1s).count());
  EXPECT_EQ(step.next.tat_frac, 0);
  EXPECT_EQ(step.decision, allowed(5, 2, 1s));
}

TEST(Gcra, DenialReturnsTheInputState) {
  const Limit limit = must(Limit::gcra(2, 1, 1s));
  // Arrival time 1.5 s ahead: 1.5 of 2 tokens missing.
  const core::GcraState state{(kNoon + 1500ms).count(), 0};
  const core::GcraStep step = core::gcra(limit, state, kNoon, 1);
  ASSERT_FALSE(step.decision.allowed);
  EXPECT_EQ(step.next.tat_ns, state.tat_ns);
  EXPECT_EQ(step.next.tat_frac, state.tat_frac);
  // 0.5 tokens held: 0.5 s until one more, 1.5 s until full.
  EXPECT_EQ(step.decision, denied(2, 0, 1500ms, 500ms));
}

TEST(Gcra, AnArrivalTimeInThePastMeansAFullBucket) {
  const Limit limit = must(Limit::gcra(10, 1, 1s));
  const core::GcraState state{(kNoon - 1h).count(), 0};
  const core::GcraStep step = core::gcra(limit, state, kNoon, 10);
  EXPECT_EQ(step.decision, allowed(10, 0, 10s));
  EXPECT_EQ(step.next.tat_ns, (kNoon + 10s).count());
}

// A caller-supplied `now` before an earlier call's (time running backwards)
// leaves more debt than a full bucket holds: nothing remains, never a wrap.
TEST(Gcra, TimeRunningBackwardsLeavesNothingRatherThanWrapping) {
  const Limit limit = must(Limit::gcra(2, 1, 1s));
  // Arrival time 3 s ahead of `now`: 3 tokens missing from a bucket of 2.
  const core::GcraState state{(kNoon + 3s).count(), 0};
  const core::GcraStep step = core::gcra(limit, state, kNoon, 1);
  // Allowed once the debt falls to 1 token: 2 s later; full after 3 s.
  EXPECT_EQ(step.decision, denied(2, 0, 3s, 2s));
}

}  // namespace
}  // namespace sluice
