// ClockOffset: the lower bound of a Redis node's clock offset that converts
// call deadlines (src/store/redis/clock_offset.h). Pure arithmetic, no Redis.
#include "store/redis/clock_offset.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace sluice::redis {
namespace {

// Steady clock readings (microseconds since boot) and a Redis clock exactly
// 1,780,000,000 s ahead of it.
constexpr int64_t kSteady = 5'000'000'000;  // 5,000 s after boot
constexpr int64_t kTheta = 1'780'000'000'000'000;

TEST(ClockOffset, NoObservationNoDeadline) {
  ClockOffset clock;
  EXPECT_EQ(clock.to_redis(kSteady, kSteady), 0);
  EXPECT_EQ(clock.bound_at(kSteady), ClockOffset::kNone);
}

// Receipt times below are whole milliseconds, where the rounding towards the
// safe side (1 us at most) does not show, so the bounds are exact.

TEST(ClockOffset, AnObservationBoundsByTheReplyLatency) {
  ClockOffset clock;
  // Sent 100 us before kSteady, TIME read 30 us later, received at kSteady.
  clock.observe(kSteady - 70 + kTheta, kSteady - 100, kSteady);
  // r - v = theta - 70: the latency from the read to the receipt.
  EXPECT_EQ(clock.bound_at(kSteady), kTheta - 70);
  // A deadline 50 ms on: the drift loosens the bound by 50 us (1,000 ppm).
  const int64_t deadline = kSteady + 50'000;
  EXPECT_EQ(clock.to_redis(deadline, kSteady), deadline + kTheta - 70 - 50);
  // Sent after its deadline (another thread's observation could be newer
  // than the deadline): the bound is taken at the send.
  EXPECT_EQ(clock.to_redis(kSteady - 5'000, kSteady), kSteady - 5'000 + kTheta - 70);
}

TEST(ClockOffset, TheBoundIsLoosenedByTheDriftOfTheTimeElapsed) {
  ClockOffset clock;
  clock.observe(kSteady + kTheta, kSteady, kSteady);
  EXPECT_EQ(clock.bound_at(kSteady), kTheta);
  EXPECT_EQ(clock.bound_at(kSteady + 1'000'000), kTheta - 1'000);    // 1 s: 1 ms
  EXPECT_EQ(clock.bound_at(kSteady + 60'000'000), kTheta - 60'000);  // 1 min: 60 ms
}

TEST(ClockOffset, KeepsTheTightestBoundNetOfDrift) {
  ClockOffset clock;
  clock.observe(kSteady - 60 + kTheta, kSteady - 100, kSteady);  // theta - 60
  // A slower reply says less: the bound stays, loosened by 2 ms of drift.
  clock.observe(kSteady + 1'040 + kTheta, kSteady + 1'000, kSteady + 2'000);  // theta - 960
  EXPECT_EQ(clock.bound_at(kSteady + 2'000), kTheta - 62);
  // A faster one replaces it.
  clock.observe(kSteady + 2'990 + kTheta, kSteady + 2'980, kSteady + 3'000);  // theta - 10
  EXPECT_EQ(clock.bound_at(kSteady + 3'000), kTheta - 10);
  // 10 s later the best bound has drifted 10 ms down: an observation worse than
  // it was, theta - 500, is now the tighter.
  const int64_t later = kSteady + 10'000'000;
  clock.observe(later - 500 + kTheta, later - 1'000, later);
  EXPECT_EQ(clock.bound_at(later), kTheta - 500);
}

TEST(ClockOffset, ARedisClockSteppedBackIsNoticedAtTheNextReply) {
  ClockOffset clock;
  clock.observe(kSteady - 50 + kTheta, kSteady - 100, kSteady);  // theta - 50
  // Redis's clock goes back 2 s. Slow replies alone could never lower the
  // bound, but this one was sent when theta was at most r - s, below the
  // stored bound: impossible, so the observation replaces it.
  const int64_t stepped = kTheta - 2'000'000;
  const int64_t t = kSteady + 1'000'000;
  clock.observe(t - 50 + stepped, t - 100, t);
  EXPECT_EQ(clock.bound_at(t), stepped - 50);
  EXPECT_EQ(clock.to_redis(t + 50'000, t), t + 50'000 + stepped - 50 - 50);
}

TEST(ClockOffset, ARedisClockSteppedForwardRaisesTheBound) {
  ClockOffset clock;
  clock.observe(kSteady - 50 + kTheta, kSteady - 100, kSteady);
  const int64_t stepped = kTheta + 2'000'000;
  const int64_t t = kSteady + 1'000'000;
  clock.observe(t - 50 + stepped, t - 100, t);
  EXPECT_EQ(clock.bound_at(t), stepped - 50);
}

TEST(ClockOffset, ADeadlineIsNeverLaterThanTheTrueOneWhateverTheLatencies) {
  // Replies with latencies from 0 to 2 ms at random times over about a minute,
  // against a Redis clock running 500 ppm slower, then faster, than ours
  // (within the bound's assumption): a deadline converted at any moment is
  // never later than the true one.
  for (const int64_t sign : {-1, 1}) {
    ClockOffset clock;
    uint64_t seed = 42;
    const auto next = [&seed](int64_t n) {
      seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
      return static_cast<int64_t>((seed >> 33) % static_cast<uint64_t>(n));
    };
    // TIME truncates to a whole microsecond, as Redis's does.
    const auto redis_at = [sign](int64_t steady) {
      return steady + kTheta + sign * (steady - kSteady) / 2'000;
    };
    int64_t t = kSteady;
    for (int i = 0; i < 10'000; ++i) {
      t += next(12'000);
      const int64_t read_at = t + next(1'000);
      const int64_t received = read_at + next(1'000);
      clock.observe(redis_at(read_at), t, received);
      const int64_t deadline = received + next(100'000);
      ASSERT_LE(clock.to_redis(deadline, received), redis_at(deadline))
          << "drift sign " << sign << ", step " << i;
      // ... and not much earlier either: within the fastest reply's latency
      // plus the drift allowance.
      ASSERT_GE(clock.to_redis(deadline, received), redis_at(deadline) - 2'000 - 200)
          << "drift sign " << sign << ", step " << i;
    }
  }
}

TEST(ClockOffset, ConcurrentObservationsKeepTheMaximum) {
  ClockOffset clock;
  std::vector<std::thread> threads;
  for (int th = 0; th < 4; ++th) {
    threads.emplace_back([&clock, th] {
      for (int i = 0; i < 10'000; ++i) {
        const int64_t latency = 10 + (i * 7 + th * 13) % 500;
        clock.observe(kSteady + kTheta, kSteady - latency, kSteady + latency);
      }
    });
  }
  for (auto& t : threads) t.join();
  // The fastest reply any thread saw: 10 us from TIME to receipt.
  EXPECT_EQ(clock.bound_at(kSteady), kTheta - 10);
}

}  // namespace
}  // namespace sluice::redis
