// concurrency: in-flight requests per key. A slot is a sliding_log entry
// whose window is the lease; giving it back is Store::refund of its charge;
// the Limiter's Permit gives it back exactly once.
#include <gtest/gtest.h>

#include <memory>
#include <utility>

#include "sluice/limiter.h"
#include "sluice/memory_store.h"
#include "test_util.h"

namespace sluice {
namespace {

using namespace std::chrono_literals;
using testing::allowed;
using testing::denied;
using testing::kNoon;
using testing::must;

Decision acquire(Store& store, const Limit& limit, std::string_view key, Nanos now) {
  const AcquireRequest r{&limit, key, 1};
  Decision d;
  EXPECT_TRUE(store.acquire({&r, 1}, now, {&d, 1}).ok());
  d.decided_at = now;
  return d;
}

void release(Store& store, const Limit& limit, std::string_view key, Nanos charged_at, Nanos now) {
  const RefundRequest r{&limit, key, 1, charged_at};
  ASSERT_TRUE(store.refund({&r, 1}, now).ok());
}

TEST(ConcurrencyLimit, IsValidatedLikeASlidingLog) {
  const Limit l = must(Limit::concurrency(4, 60s));
  EXPECT_EQ(l.algorithm(), Algorithm::kConcurrency);
  EXPECT_EQ(l.size(), 4u);
  EXPECT_EQ(l.period(), Nanos(60s));
  EXPECT_TRUE(l.keeps_log());
  EXPECT_EQ(l.describe(), "concurrency max=4 lease=1m");
  EXPECT_NE(l.fingerprint(), must(Limit::sliding_log(4, 60s)).fingerprint());

  EXPECT_EQ(Limit::concurrency(0, 60s).error().message, "concurrency: max must be at least 1");
  EXPECT_EQ(Limit::concurrency(10'001, 60s).error().message,
            "concurrency: max must be at most 10000 (got 10001)");
  EXPECT_EQ(Limit::concurrency(4, 0s).error().message, "concurrency: lease must be greater than 0");
  EXPECT_EQ(Limit::create({.algorithm = Algorithm::kConcurrency,
                           .capacity = 4,
                           .refill_tokens = 1,
                           .refill_period = 1s})
                .error()
                .message,
            "concurrency takes max and lease, not capacity and refill_rate");
  Algorithm a = Algorithm::kTokenBucket;
  ASSERT_TRUE(parse_algorithm("concurrency", &a));
  EXPECT_EQ(a, Algorithm::kConcurrency);
}

TEST(ConcurrencyMemoryStore, MaxSlotsThenDeniedWithARetryOfOneSecond) {
  MemoryStore store;
  const Limit l = must(Limit::concurrency(4, 60s));
  // Slots 4 -> 0 free; reset_after is the newest slot's lease.
  for (uint64_t i = 0; i < 4; ++i) {
    EXPECT_EQ(acquire(store, l, "k", kNoon), allowed(4, 3 - i, 60s)) << i;
  }
  EXPECT_EQ(acquire(store, l, "k", kNoon + 1ms), denied(4, 0, 59'999ms, 1s));
  EXPECT_EQ(acquire(store, l, "other", kNoon + 1ms), allowed(4, 3, 60s));
}

TEST(ConcurrencyMemoryStore, AReleasedSlotIsFreeAtOnce) {
  MemoryStore store;
  const Limit l = must(Limit::concurrency(2, 60s));
  const Decision first = acquire(store, l, "k", kNoon);
  ASSERT_TRUE(acquire(store, l, "k", kNoon + 1ms).allowed);
  ASSERT_FALSE(acquire(store, l, "k", kNoon + 2ms).allowed);
  release(store, l, "k", first.decided_at, kNoon + 3ms);
  EXPECT_EQ(acquire(store, l, "k", kNoon + 4ms), allowed(2, 0, 60s));
  EXPECT_FALSE(acquire(store, l, "k", kNoon + 5ms).allowed);
}

TEST(ConcurrencyMemoryStore, SlotsTakenAtOneInstantAreReleasedOneByOne) {
  MemoryStore store;
  const Limit l = must(Limit::concurrency(3, 60s));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(acquire(store, l, "k", kNoon).allowed);
  release(store, l, "k", kNoon, kNoon + 1ms);
  EXPECT_EQ(acquire(store, l, "k", kNoon + 2ms), allowed(3, 0, 60s));
  EXPECT_FALSE(acquire(store, l, "k", kNoon + 2ms).allowed);
}

TEST(ConcurrencyMemoryStore, ASlotNeverGivenBackFreesItselfWhenItsLeaseEnds) {
  MemoryStore store;
  const Limit l = must(Limit::concurrency(1, 10s));
  ASSERT_TRUE(acquire(store, l, "k", kNoon).allowed);
  EXPECT_EQ(acquire(store, l, "k", kNoon + 9'999ms), denied(1, 0, 1ms, 1ms));
  EXPECT_EQ(acquire(store, l, "k", kNoon + 10s), allowed(1, 0, 10s));
  // Releasing the expired slot now gives back nothing of the new one.
  release(store, l, "k", kNoon, kNoon + 10s);
  EXPECT_FALSE(acquire(store, l, "k", kNoon + 10s + 1ms).allowed);
}

TEST(ConcurrencyMemoryStore, TakesNoSlotWhenAnotherLimitOfTheRequestDenies) {
  MemoryStore store;
  const Limit slots = must(Limit::concurrency(2, 60s));
  const Limit bucket = must(Limit::token_bucket(1, 1, 1h));
  const AcquireRequest both[] = {{&slots, "k", 1}, {&bucket, "k", 1}};
  Decision out[2];
  ASSERT_TRUE(store.acquire(both, kNoon, out).ok());
  ASSERT_TRUE(out[0].allowed && out[1].allowed);
  ASSERT_TRUE(store.acquire(both, kNoon, out).ok());
  EXPECT_FALSE(out[1].allowed);
  // The denied request took no slot: one of two is still free.
  EXPECT_EQ(acquire(store, slots, "k", kNoon), allowed(2, 0, 60s));
}

TEST(ConcurrencyPermit, GivesItsSlotBackWhenItGoes) {
  ManualClock clock(kNoon);
  Limiter limiter(std::make_shared<MemoryStore>(), {must(Limit::concurrency(1, 60s))}, clock);
  {
    Permit p = must(limiter.acquire("k"));
    ASSERT_TRUE(p.allowed());
    EXPECT_TRUE(p.held());
    Permit q = must(limiter.acquire("k"));
    EXPECT_EQ(q.decision(), denied(1, 0, 60s, 1s));
    EXPECT_FALSE(q.held());
  }
  clock.advance(1ms);
  EXPECT_TRUE(must(limiter.acquire("k")).allowed());
}

TEST(ConcurrencyPermit, ReleasesExactlyOnceWhateverIsCalled) {
  ManualClock clock(kNoon);
  Limiter limiter(std::make_shared<MemoryStore>(), {must(Limit::concurrency(2, 60s))}, clock);
  Permit a = must(limiter.acquire("k"));
  clock.advance(1ms);
  Permit b = must(limiter.acquire("k"));
  ASSERT_TRUE(a.allowed() && b.allowed());
  EXPECT_TRUE(a.release().ok());
  EXPECT_TRUE(a.release().ok());  // nothing more
  Permit moved = std::move(b);
  EXPECT_FALSE(b.held());  // NOLINT(bugprone-use-after-move): what a move leaves
  // Had `a` been given back twice, b's slot would be free too.
  clock.advance(1ms);
  Permit c = must(limiter.acquire("k"));
  EXPECT_EQ(c.decision(), allowed(2, 0, 60s));
  EXPECT_FALSE(must(limiter.acquire("k")).allowed());
}

TEST(ConcurrencyPermit, OtherLimitsStayCharged) {
  ManualClock clock(kNoon);
  Limiter limiter(std::make_shared<MemoryStore>(),
                  {must(Limit::concurrency(5, 60s)), must(Limit::token_bucket(2, 1, 1h))}, clock);
  { ASSERT_TRUE(must(limiter.acquire("k")).allowed()); }
  { ASSERT_TRUE(must(limiter.acquire("k")).allowed()); }
  // Both slots came back, but the bucket's two tokens are spent.
  Permit p = must(limiter.acquire("k"));
  EXPECT_FALSE(p.allowed());
  EXPECT_EQ(p.decision().limit, 2u);
  EXPECT_FALSE(p.held());
}

TEST(ConcurrencyPermit, WithoutAConcurrencyLimitHoldsNothing) {
  ManualClock clock(kNoon);
  Limiter limiter(std::make_shared<MemoryStore>(), {must(Limit::token_bucket(2, 1, 1h))}, clock);
  Permit p = must(limiter.acquire("k"));
  EXPECT_TRUE(p.allowed());
  EXPECT_FALSE(p.held());
}

}  // namespace
}  // namespace sluice
