// token_bucket: capacity tokens, refilled continuously, starting full.
#include "core/token_bucket.h"

#include <gtest/gtest.h>

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

// A bucket of 100 refilled 10 per second.
Limit hundred_at_ten_per_second() {
  return must(Limit::token_bucket(100, 10, 1s));
}

TEST(TokenBucket, BurstOfCapacityThenDenied) {
  Model m(hundred_at_ten_per_second());
  int admitted = 0;
  for (int i = 0; i < 150; ++i) admitted += m.apply(kNoon, 1).allowed;
  EXPECT_EQ(admitted, 100);
}

TEST(TokenBucket, AfterTheBurstExactlyTenPerSecond) {
  Model m(hundred_at_ten_per_second());
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(m.apply(kNoon, 1).allowed);
  // Each following second: 20 attempts at its start, exactly 10 get through.
  for (int second = 1; second <= 5; ++second) {
    int admitted = 0;
    for (int i = 0; i < 20; ++i)
      admitted += m.apply(kNoon + std::chrono::seconds(second), 1).allowed;
    EXPECT_EQ(admitted, 10) << "second " << second;
  }
}

TEST(TokenBucket, PollingEveryMillisecondAdmitsOneEveryHundredMilliseconds) {
  Model m(hundred_at_ten_per_second());
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(m.apply(kNoon, 1).allowed);
  std::vector<Nanos> admitted_at;
  for (Nanos t = kNoon + 1ms; t <= kNoon + 10s; t += 1ms) {
    if (m.apply(t, 1).allowed) admitted_at.push_back(t - kNoon);
  }
  ASSERT_EQ(admitted_at.size(), 100u);
  for (size_t k = 0; k < admitted_at.size(); ++k) {
    EXPECT_EQ(admitted_at[k], 100ms * static_cast<int64_t>(k + 1)) << "admission " << k;
  }
}

TEST(TokenBucket, RemainingCountsDownAndResetAfterGrowsByOneRefillIntervalPerToken) {
  Model m(hundred_at_ten_per_second());
  for (uint64_t i = 1; i <= 100; ++i) {
    // 101 - i -> 100 - i tokens; each missing token takes 100 ms to come back.
    EXPECT_EQ(m.apply(kNoon, 1), allowed(100, 100 - i, 100ms * static_cast<int64_t>(i)))
        << "request " << i;
  }
}

TEST(TokenBucket, EmptyBucketDeniesWithRetryAfterOneRefillInterval) {
  Model m(hundred_at_ten_per_second());
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(m.apply(kNoon, 1).allowed);
  // 0 tokens: 10 s until full, 100 ms until the next token.
  EXPECT_EQ(m.apply(kNoon, 1), denied(100, 0, 10s, 100ms));
}

TEST(TokenBucket, PartialRefillIsCountedExactly) {
  Model m(hundred_at_ten_per_second());
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(m.apply(kNoon, 1).allowed);
  // 50 ms later: half a token. Not enough; 50 ms more is.
  EXPECT_EQ(m.apply(kNoon + 50ms, 1), denied(100, 0, 9950ms, 50ms));
  // 150 ms after the burst: 1.5 tokens -> 0.5 after this request; 99.5
  // missing take 9.95 s.
  EXPECT_EQ(m.apply(kNoon + 150ms, 1), allowed(100, 0, 9950ms));
  // 0.5 tokens: 50 ms to the next one.
  EXPECT_EQ(m.apply(kNoon + 150ms, 1), denied(100, 0, 9950ms, 50ms));
}

TEST(TokenBucket, RetryingAtRetryAfterIsAllowedAndOneNanosecondEarlierIsDenied) {
  Model m(hundred_at_ten_per_second());
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(m.apply(kNoon, 1).allowed);
  const Decision d = m.apply(kNoon + 30ms, 1);
  ASSERT_FALSE(d.allowed);
  ASSERT_EQ(d.retry_after, 70ms);
  EXPECT_FALSE(m.apply(kNoon + 30ms + d.retry_after - 1ns, 1).allowed);
  EXPECT_TRUE(m.apply(kNoon + 30ms + d.retry_after, 1).allowed);
}

TEST(TokenBucket, RefillStopsAtCapacity) {
  Model m(hundred_at_ten_per_second());
  ASSERT_TRUE(m.apply(kNoon, 1).allowed);
  // An hour idle refills 36,000 tokens' worth, but the bucket holds 100.
  int admitted = 0;
  for (int i = 0; i < 200; ++i) admitted += m.apply(kNoon + 1h, 1).allowed;
  EXPECT_EQ(admitted, 100);
}

TEST(TokenBucket, ThreeTokensPerSecondNeverDrifts) {
  // One token every 333,333,333.33 ns: the bucket counts in thirds of a
  // nanosecond, so retrying exactly at retry_after admits the k-th request at
  // ceil(k * 10^9 / 3) ns, and the 3,000th at exactly 1,000 s. (Capacity 2,
  // so that the bucket never overflows and drops a fraction: with capacity 1
  // the 2/3 ns refilled past full at 333,333,334 ns would be lost.)
  Model m(must(Limit::token_bucket(2, 3, 1s)));
  ASSERT_TRUE(m.apply(kNoon, 2).allowed);
  Nanos t = kNoon;
  for (int64_t k = 1; k <= 3000; ++k) {
    const Decision d = m.apply(t, 1);
    ASSERT_FALSE(d.allowed);
    t += d.retry_after;
    ASSERT_TRUE(m.apply(t, 1).allowed);
    ASSERT_EQ(t - kNoon, Nanos{(k * 1'000'000'000 + 2) / 3}) << "admission " << k;
  }
  EXPECT_EQ(t - kNoon, 1000s);
}

TEST(TokenBucket, DenialReturnsTheInputState) {
  const Limit limit = hundred_at_ten_per_second();
  // 0.5 tokens, computed 40 ms ago.
  const core::TokenBucketState state{limit.token_units() / 2, (kNoon - 40ms).count()};
  const core::TokenBucketStep step = core::token_bucket(limit, state, kNoon, 1);
  ASSERT_FALSE(step.decision.allowed);
  EXPECT_EQ(step.next.level_units, state.level_units);
  EXPECT_EQ(step.next.last_ns, state.last_ns);
  // 0.9 tokens now: 10 ms to the next one, 9.91 s to 100.
  EXPECT_EQ(step.decision, denied(100, 0, 9910ms, 10ms));
}

TEST(TokenBucket, AllowedStepRecordsTheRefilledLevelAtNow) {
  const Limit limit = hundred_at_ten_per_second();
  const core::TokenBucketState state{limit.token_units() / 2, (kNoon - 100ms).count()};
  const core::TokenBucketStep step = core::token_bucket(limit, state, kNoon, 1);
  ASSERT_TRUE(step.decision.allowed);
  // 0.5 + 1 refilled - 1 spent = 0.5 tokens, as of now.
  EXPECT_EQ(step.next.level_units, limit.token_units() / 2);
  EXPECT_EQ(step.next.last_ns, kNoon.count());
}

TEST(TokenBucket, FreshStateIsFull) {
  const Limit limit = hundred_at_ten_per_second();
  const core::TokenBucketState s = core::token_bucket_fresh(limit, kNoon);
  EXPECT_EQ(s.level_units, 100 * limit.token_units());
  EXPECT_EQ(s.last_ns, kNoon.count());
}

TEST(TokenBucket, TimeRunningBackwardsRefillsNothing) {
  const Limit limit = hundred_at_ten_per_second();
  const core::TokenBucketState state{0, kNoon.count()};
  const core::TokenBucketStep step = core::token_bucket(limit, state, kNoon - 1h, 1);
  EXPECT_FALSE(step.decision.allowed);
  EXPECT_EQ(step.decision.retry_after, 100ms);
}

}  // namespace
}  // namespace sluice
