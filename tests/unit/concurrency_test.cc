// concurrency: in-flight requests per key. A slot is a sliding_log entry
// whose window is the lease; giving it back is Store::refund of its charge;
// the Limiter's Permit gives it back exactly once.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "sluice/limiter.h"
#include "sluice/memory_store.h"
#include "test_util.h"

namespace sluice {
namespace {

using namespace std::chrono_literals;
using testing::allowed;
using testing::denied;
using testing::kNoon;
using testing::Model;
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

// A key's slots live in its table slot while it holds one or two (an
// InlineLog); a third moves them to the heap, and they come back once one is
// left. memory_bytes() counts only the heap part beyond the table.
TEST(ConcurrencyMemoryStore, TwoSlotsStayInTheTableAThirdMovesToTheHeapAndBack) {
  MemoryStore store(testing::store_options(1'000, 1));
  const Limit l = must(Limit::concurrency(3, 60s));
  const Limit bucket = must(Limit::token_bucket(10, 1, 1s));
  ASSERT_TRUE(acquire(store, bucket, "k", kNoon).allowed);  // allocates the table
  const size_t table = store.memory_bytes();
  EXPECT_EQ(acquire(store, l, "k", kNoon), allowed(3, 2, 60s));
  EXPECT_EQ(acquire(store, l, "k", kNoon + 1ms), allowed(3, 1, 60s));
  EXPECT_EQ(store.memory_bytes(), table);
  EXPECT_EQ(acquire(store, l, "k", kNoon + 2ms), allowed(3, 0, 60s));
  EXPECT_GT(store.memory_bytes(), table);
  EXPECT_EQ(acquire(store, l, "k", kNoon + 3ms), denied(3, 0, 59'999ms, 1s));
  release(store, l, "k", kNoon + 1ms, kNoon + 4ms);  // 2 held: still on the heap
  EXPECT_GT(store.memory_bytes(), table);
  release(store, l, "k", kNoon, kNoon + 5ms);  // 1 held: back in the table
  EXPECT_EQ(store.memory_bytes(), table);
  // The slot left is the one taken at +2 ms.
  EXPECT_EQ(acquire(store, l, "k", kNoon + 6ms), allowed(3, 1, 60s));
  EXPECT_EQ(acquire(store, l, "k", kNoon + 7ms), allowed(3, 0, 60s));
  EXPECT_EQ(acquire(store, l, "k", kNoon + 60s + 2ms), allowed(3, 0, 60s));  // +2 ms's lease ended
  EXPECT_TRUE(must(store.reset(l, "k")));
  EXPECT_EQ(store.memory_bytes(), table);
}

// Leases end on the store's `now` (here a ManualClock through the Limiter),
// in the table and on the heap alike.
TEST(ConcurrencyPermit, SlotsNeverGivenBackFreeThemselvesWhenTheirLeasesEnd) {
  ManualClock clock(kNoon);
  auto store = std::make_shared<MemoryStore>();
  Limiter limiter(store, {must(Limit::concurrency(3, 10s))}, clock);
  std::vector<Permit> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(must(limiter.acquire("k")));
    ASSERT_TRUE(held.back().allowed());
    clock.advance(1s);
  }
  EXPECT_EQ(must(limiter.acquire("k")).decision(), denied(3, 0, 9s, 1s));
  clock.advance(7s);  // +10 s: the first lease ends
  Permit fourth = must(limiter.acquire("k"));
  EXPECT_EQ(fourth.decision(), allowed(3, 0, 10s));
  clock.advance(2s);  // +12 s: the second and third end too
  Permit fifth = must(limiter.acquire("k"));
  EXPECT_EQ(fifth.decision(), allowed(3, 1, 10s));
  // Releasing the expired permits gives back nothing of the live slots.
  for (Permit& p : held) ASSERT_TRUE(p.release().ok());
  EXPECT_EQ(must(limiter.acquire("k")).decision(), allowed(3, 0, 10s));
}

// A key at its max keeps its slots through a flood of new keys (eviction
// keeps denying states), and a key whose slots were on the heap gives that
// memory back when it is evicted.
TEST(ConcurrencyMemoryStore, EvictionKeepsAFullKeyAndFreesAnEvictedOne) {
  MemoryStore store(testing::store_options(20, 1));
  const Limit two = must(Limit::concurrency(2, 1min));
  const Limit three = must(Limit::concurrency(3, 1min));
  const Limit flood = must(Limit::token_bucket(10, 1, 1h));  // full again 1 h after a call
  ASSERT_TRUE(acquire(store, two, "full", kNoon).allowed);
  ASSERT_TRUE(acquire(store, two, "full", kNoon + 1ms).allowed);
  ASSERT_FALSE(acquire(store, two, "full", kNoon + 2ms).allowed);
  int flooded = 0;
  const auto flood_one = [&] {
    const std::string key = "flood" + std::to_string(flooded++);
    ASSERT_TRUE(acquire(store, flood, key, kNoon + 3ms).allowed) << key;
  };
  // 18 keys: the table has grown to the size it keeps from here on.
  for (int i = 0; i < 17; ++i) flood_one();
  const size_t table = store.memory_bytes();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(acquire(store, three, "heap", kNoon + 1ms * i).allowed);
  EXPECT_GT(store.memory_bytes(), table);
  // 20 keys, then a 21st: "heap" (free again at +1 min) is the state nearest
  // full and goes, with its heap part; "full" denies, and stays.
  flood_one();
  flood_one();
  EXPECT_EQ(store.size(), 20u);
  EXPECT_EQ(store.memory_bytes(), table);
  EXPECT_EQ(acquire(store, two, "full", kNoon + 4ms), denied(2, 0, 59'997ms, 1s));
  EXPECT_EQ(acquire(store, three, "heap", kNoon + 5ms), allowed(3, 2, 1min));
}

// Random acquires and releases on a few keys, against the log model: every
// decision exact, through slots in the table, spills to the heap (a third
// slot, or a cost above 255 at one instant), returns to the table, leases
// ending, and releases of charges whose lease has ended.
TEST(ConcurrencyMemoryStore, EveryDecisionMatchesTheLogModel) {
  MemoryStore store(testing::store_options(1'000, 1));
  const Limit l = must(Limit::concurrency(600, 5s));
  std::vector<Model> models;
  for (int k = 0; k < 3; ++k) models.emplace_back(l);
  std::vector<std::vector<std::pair<Nanos, uint64_t>>> charges(models.size());
  std::mt19937_64 rng(11);
  Nanos now = kNoon;
  size_t table = 0;  // memory_bytes() with every log in its slot
  int spilled = 0;   // calls after which some log was on the heap
  for (int i = 0; i < 20'000; ++i) {
    const size_t k = rng() % models.size();
    const std::string key = "k" + std::to_string(k);
    const uint64_t r = rng() % 100;
    now += r < 10 ? 0ns : r < 13 ? 6s : std::chrono::milliseconds(rng() % 1000);
    if (rng() % 2 == 0 && !charges[k].empty()) {
      const size_t c = rng() % charges[k].size();
      const auto [at, cost] = charges[k][c];
      charges[k].erase(charges[k].begin() + static_cast<std::ptrdiff_t>(c));
      const RefundRequest back{&l, key, cost, at};
      ASSERT_TRUE(store.refund({&back, 1}, now).ok());
      models[k].refund_log(at, now, cost);
      continue;
    }
    const uint64_t cost = rng() % 10 == 0 ? 150 : 1 + rng() % 2;
    const AcquireRequest req{&l, key, cost};
    Decision d;
    ASSERT_TRUE(store.acquire({&req, 1}, now, {&d, 1}).ok());
    ASSERT_EQ(d, models[k].apply(now, cost)) << "call " << i;
    if (d.allowed) charges[k].emplace_back(now, cost);
    if (table == 0) table = store.memory_bytes();
    spilled += store.memory_bytes() > table;
  }
  // Both forms were exercised at length.
  EXPECT_GT(spilled, 1000);
  EXPECT_LT(spilled, 19'000);
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
