// Limiter: the embedding API. Reads its clock once per call, applies all its
// limits all-or-nothing, reports the most restrictive decision, and stays
// exact under concurrent callers.
#include "sluice/limiter.h"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace sluice {
namespace {

using namespace std::chrono_literals;
using testing::allowed;
using testing::denied;
using testing::kNoon;
using testing::must;

TEST(Limiter, DefaultCostIsOne) {
  ManualClock clock(kNoon);
  Limiter limiter(std::make_shared<MemoryStore>(), {must(Limit::token_bucket(100, 10, 1s))}, clock);
  EXPECT_EQ(must(limiter.try_acquire("k")), allowed(100, 99, 100ms));
  EXPECT_EQ(must(limiter.try_acquire("k", 9)), allowed(100, 90, 1s));
}

TEST(Limiter, ReadsItsClockOnEveryCall) {
  ManualClock clock(kNoon);
  Limiter limiter(std::make_shared<MemoryStore>(), {must(Limit::token_bucket(1, 1, 1s))}, clock);
  ASSERT_TRUE(must(limiter.try_acquire("k")).allowed);
  EXPECT_EQ(must(limiter.try_acquire("k")), denied(1, 0, 1s, 1s));
  clock.advance(999ms);
  EXPECT_EQ(must(limiter.try_acquire("k")), denied(1, 0, 1ms, 1ms));
  clock.advance(1ms);
  EXPECT_EQ(must(limiter.try_acquire("k")), allowed(1, 0, 1s));
}

TEST(Limiter, CostZeroIsAnInvalidArgumentAndChargesNothing) {
  ManualClock clock(kNoon);
  Limiter limiter(std::make_shared<MemoryStore>(), {must(Limit::token_bucket(10, 1, 1s))}, clock);
  Result<Decision> r = limiter.try_acquire("k", 0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(r.error().message, "cost must be at least 1");
  EXPECT_EQ(must(limiter.try_acquire("k")).remaining, 9u);
}

TEST(Limiter, CostAboveTheLimitIsAnErrorNotAWait) {
  ManualClock clock(kNoon);
  Limiter limiter(std::make_shared<MemoryStore>(),
                  {must(Limit::token_bucket(10, 1, 1s)), must(Limit::fixed_window(5, 1min))},
                  clock);
  Result<Decision> r = limiter.try_acquire("k", 6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kCostExceedsLimit);
  EXPECT_EQ(r.error().message,
            "cost 6 exceeds the limit's size 5 (fixed_window limit=5 window=1m): this request can "
            "never be allowed");
  // Nothing was charged to the bucket, which alone could have taken 6.
  EXPECT_EQ(must(limiter.try_acquire("k", 5)), allowed(5, 0, 1min));
  EXPECT_EQ(must(limiter.try_acquire("k", 5)).allowed, false);
}

TEST(Limiter, WithoutLimitsEveryCallIsAnError) {
  Limiter limiter(std::make_shared<MemoryStore>(), {});
  Result<Decision> r = limiter.try_acquire("k");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
}

TEST(Limiter, WhenAllAllowItReportsTheLimitWithTheLeastRemaining) {
  ManualClock clock(kNoon + 30s);
  Limiter limiter(std::make_shared<MemoryStore>(),
                  {must(Limit::token_bucket(10, 1, 1s)), must(Limit::fixed_window(5, 1min))},
                  clock);
  // bucket 10 -> 9, window 5 -> 4: the window's decision.
  EXPECT_EQ(must(limiter.try_acquire("k")), allowed(5, 4, 30s));
}

TEST(Limiter, WhenOneDeniesItReportsTheDenial) {
  ManualClock clock(kNoon + 30s);
  Limiter limiter(std::make_shared<MemoryStore>(),
                  {must(Limit::token_bucket(10, 1, 1s)), must(Limit::fixed_window(5, 1min))},
                  clock);
  ASSERT_TRUE(must(limiter.try_acquire("k", 5)).allowed);
  // The window denies (the bucket, with 5, would allow).
  EXPECT_EQ(must(limiter.try_acquire("k")), denied(5, 0, 30s, 30s));
}

TEST(Limiter, WhenSeveralDenyItReportsTheLongestRetry) {
  ManualClock clock(kNoon + 30s);
  Limiter limiter(std::make_shared<MemoryStore>(),
                  {must(Limit::fixed_window(2, 1min)), must(Limit::token_bucket(2, 1, 1min))},
                  clock);
  ASSERT_TRUE(must(limiter.try_acquire("k", 2)).allowed);
  // The window reopens in 30 s; the bucket has a token in 60 s.
  EXPECT_EQ(must(limiter.try_acquire("k")), denied(2, 0, 2min, 1min));
}

TEST(Limiter, ManyLimitsAreStillAllOrNothing) {
  // More limits than the limiter keeps on its stack: windows of 6, 5, 4, 3, 2
  // and a bucket of 7.
  ManualClock clock(kNoon);
  auto store = std::make_shared<MemoryStore>();
  std::vector<Limit> limits;
  for (uint64_t size = 6; size >= 2; --size)
    limits.push_back(must(Limit::fixed_window(size, 1min)));
  limits.push_back(must(Limit::token_bucket(7, 1, 1min)));
  Limiter limiter(store, limits, clock);
  EXPECT_EQ(must(limiter.try_acquire("k")), allowed(2, 1, 1min));
  EXPECT_EQ(must(limiter.try_acquire("k")), allowed(2, 0, 1min));
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(must(limiter.try_acquire("k")).allowed);
  // The others were charged twice, not five times.
  Limiter six(store, {limits[0]}, clock);
  EXPECT_EQ(must(six.try_acquire("k")), allowed(6, 3, 1min));
  Limiter bucket(store, {limits[5]}, clock);
  EXPECT_EQ(must(bucket.try_acquire("k")), allowed(7, 4, 3min));
}

TEST(Limiter, ResetForgetsTheKeyUnderEveryLimit) {
  ManualClock clock(kNoon);
  auto store = std::make_shared<MemoryStore>();
  Limiter limiter(store, {must(Limit::token_bucket(3, 1, 1min)), must(Limit::sliding_log(3, 1min))},
                  clock);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(must(limiter.try_acquire("k")).allowed);
  ASSERT_TRUE(must(limiter.try_acquire("other")).allowed);
  ASSERT_FALSE(must(limiter.try_acquire("k")).allowed);
  EXPECT_EQ(store->size(), 4u);
  ASSERT_TRUE(limiter.reset("k").ok());
  EXPECT_EQ(store->size(), 2u);
  EXPECT_EQ(must(limiter.try_acquire("k")), allowed(3, 2, 1min));
  // Both hold 1; the bucket takes longer to refill (2 min) than the log (1 min).
  EXPECT_EQ(must(limiter.try_acquire("other")), allowed(3, 1, 2min));
}

// most_restrictive() on its own.
TEST(MostRestrictive, OfNothingIsAnEmptyDecision) {
  EXPECT_EQ(most_restrictive({}), Decision{});
}

TEST(MostRestrictive, AllowedPicksTheLeastRemainingThenTheLongestReset) {
  const Decision a = allowed(10, 3, 5s);
  const Decision b = allowed(100, 3, 9s);
  const Decision c = allowed(5, 4, 60s);
  const std::vector<Decision> all{a, b, c};
  EXPECT_EQ(most_restrictive(all), b);
}

TEST(MostRestrictive, DeniedPicksTheDenialWithTheLongestRetry) {
  const Decision ok = allowed(10, 0, 1h);
  const Decision soon = denied(5, 0, 10s, 1s);
  const Decision late = denied(7, 1, 20s, 4s);
  const std::vector<Decision> all{ok, late, soon};
  EXPECT_EQ(most_restrictive(all), late);
}

// Exactness under contention: threads hammer one key of a bucket that does
// not refill; exactly `capacity` calls may succeed, however they interleave.
class ConcurrentCallers : public ::testing::TestWithParam<int> {};

TEST_P(ConcurrentCallers, OnOneKeyWithoutRefillAllowExactlyTheCapacity) {
  const int threads = GetParam();
  constexpr int kCallsPerThread = 100'000;
  constexpr uint64_t kCapacity = 1000;
  ManualClock clock(kNoon);
  Limiter limiter(std::make_shared<MemoryStore>(),
                  {must(Limit::token_bucket(kCapacity, 1, testing::kNoRefillPeriod))}, clock);
  std::atomic<uint64_t> admitted{0};
  std::atomic<uint64_t> refused{0};
  std::atomic<uint64_t> errors{0};
  std::latch start(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      start.arrive_and_wait();
      uint64_t yes = 0;
      uint64_t no = 0;
      for (int i = 0; i < kCallsPerThread; ++i) {
        Result<Decision> d = limiter.try_acquire("one key");
        if (!d.ok()) {
          errors.fetch_add(1);
        } else if (d->allowed) {
          ++yes;
        } else {
          ++no;
        }
      }
      admitted.fetch_add(yes);
      refused.fetch_add(no);
    });
  }
  for (std::thread& th : pool) th.join();
  EXPECT_EQ(errors.load(), 0u);
  EXPECT_EQ(admitted.load(), kCapacity);
  EXPECT_EQ(refused.load(), static_cast<uint64_t>(threads) * kCallsPerThread - kCapacity);
}

INSTANTIATE_TEST_SUITE_P(Threads, ConcurrentCallers, ::testing::Values(2, 4, 8),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param) + "Threads";
                         });

// The same under all-or-nothing: a global limit and a per-user one per call.
// The global limit admits exactly 1,000 in total; no user gets more than its
// 300; and what each user's limit still holds afterwards is exactly 300 minus
// what that user was admitted (denied batches charged nothing).
TEST(ConcurrentBatches, AreExactForEveryLimitInvolved) {
  constexpr int kUsers = 4;
  constexpr int kCallsPerUser = 25'000;
  ManualClock clock(kNoon);
  auto store = std::make_shared<MemoryStore>();
  const Limit global = must(Limit::token_bucket(1000, 1, testing::kNoRefillPeriod));
  const Limit per_user = must(Limit::sliding_window(300, std::chrono::days(1)));
  std::vector<uint64_t> admitted(kUsers, 0);
  std::latch start(kUsers);
  std::vector<std::thread> pool;
  for (int u = 0; u < kUsers; ++u) {
    pool.emplace_back([&, u] {
      const std::string user = "user:" + std::to_string(u);
      const std::array<AcquireRequest, 2> requests{AcquireRequest{&per_user, user},
                                                   AcquireRequest{&global, "global"}};
      std::array<Decision, 2> out;
      start.arrive_and_wait();
      for (int i = 0; i < kCallsPerUser; ++i) {
        if (store->acquire(requests, clock.now(), out).ok() && all_allowed(out)) ++admitted[u];
      }
    });
  }
  for (std::thread& th : pool) th.join();
  uint64_t total = 0;
  for (int u = 0; u < kUsers; ++u) {
    total += admitted[u];
    EXPECT_LE(admitted[u], 300u);
    const std::string user = "user:" + std::to_string(u);
    const AcquireRequest probe{&per_user, user, 1};
    Decision d;
    ASSERT_TRUE(store->acquire({&probe, 1}, clock.now(), {&d, 1}).ok());
    if (admitted[u] < 300) {
      EXPECT_EQ(d.remaining, 300 - admitted[u] - 1) << user;
    } else {
      EXPECT_FALSE(d.allowed) << user;
    }
  }
  EXPECT_EQ(total, 1000u);
}

}  // namespace
}  // namespace sluice
