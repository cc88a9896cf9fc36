// The Redis store's deny cache (src/store/redis/deny_cache.h): the table on
// its own with made-up times, then the store against a real redis-server
// (time_source local, so `now` is the tests' own), counting the script calls
// Redis ran (INFO commandstats) and comparing every decision with a store
// without the cache on the same traces.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <thread>
#include <vector>

#include "store/redis/deny_cache.h"
#include "test_util.h"

namespace sluice::testing {
namespace {

using redis::CachedDenial;
using redis::DenyCache;

constexpr int64_t kSecond = 1'000'000'000;

Decision denied(Nanos retry_after, Nanos reset_after, uint64_t remaining, Nanos decided_at) {
  Decision d;
  d.allowed = false;
  d.limit = 10;
  d.remaining = remaining;
  d.retry_after = retry_after;
  d.reset_after = reset_after;
  d.decided_at = decided_at;
  return d;
}

TEST(DenyCacheTable, ADenialHoldsForItsCostUntilItsEndOnly) {
  DenyCache cache(64, true);
  const CachedDenial d =
      redis::denial_of(denied(Nanos{5 * kSecond}, Nanos{9 * kSecond}, 1, Nanos{100 * kSecond}), 2,
                       false, false, 100 * kSecond, 100 * kSecond, true);
  EXPECT_EQ(d.until, 105 * kSecond);
  EXPECT_EQ(d.retry_at, 105 * kSecond);
  EXPECT_EQ(d.reset_at, 109 * kSecond);
  cache.insert(7, d, 100 * kSecond, cache.generation());
  CachedDenial found;
  EXPECT_TRUE(cache.find(7, 2, 105 * kSecond - 1, &found));
  EXPECT_EQ(found.remaining, 1u);
  // A larger cost would wait longer than Redis said: Redis is asked.
  EXPECT_FALSE(cache.find(7, 3, 100 * kSecond, &found));
  EXPECT_FALSE(cache.find(7, 1, 100 * kSecond, &found));  // a smaller cost may fit
  EXPECT_FALSE(cache.find(7, 2, 105 * kSecond, &found));  // over: Redis decides again
  EXPECT_FALSE(cache.find(8, 2, 100 * kSecond, &found));
}

TEST(DenyCacheTable, AFixedWindowsDenialHoldsForLargerCostsToo) {
  DenyCache cache(64, true);
  const CachedDenial d = redis::denial_of(denied(Nanos{kSecond}, Nanos{kSecond}, 0, Nanos{0}), 2,
                                          true, false, 0, 0, true);
  cache.insert(7, d, 0, cache.generation());
  CachedDenial found;
  EXPECT_TRUE(cache.find(7, 2, 0, &found));
  EXPECT_TRUE(cache.find(7, 9, 0, &found));
  EXPECT_FALSE(cache.find(7, 1, 0, &found));
}

TEST(DenyCacheTable, WithRedisTimeTheLocalEndIsEarlyByTheDriftAndTheWaitCountsFromTheAnswer) {
  // Issued at 1 s, answered at 1.002 s (steady clock); Redis said 10 s.
  // 1,000 ppm of 10 s is 10 ms: the local denial ends at 1 + 10 - 0.01 s,
  // the wait it reports runs to 1.002 + 10 s.
  const CachedDenial d =
      redis::denial_of(denied(Nanos{10 * kSecond}, Nanos{20 * kSecond}, 0, Nanos{777}), 1, false,
                       false, kSecond, kSecond + 2'000'000, false);
  EXPECT_EQ(d.until, 11 * kSecond - 10'000'000);
  EXPECT_EQ(d.retry_at, 11 * kSecond + 2'000'000);
  EXPECT_EQ(d.reset_at, 21 * kSecond + 2'000'000);
}

TEST(DenyCacheTable, ALockoutDeniesEveryCost) {
  const CachedDenial d = redis::denial_of(denied(Nanos{kSecond}, Nanos{kSecond}, 0, Nanos{0}), 5,
                                          true, true, 0, 0, true);
  EXPECT_EQ(d.cost, 1u);
  EXPECT_TRUE(d.larger_costs);
}

TEST(DenyCacheTable, IsBoundedAndEvictsAnExpiredDenialFirstThenTheOneEndingFirst) {
  DenyCache cache(4, true);  // one set of 4
  ASSERT_EQ(cache.capacity(), 4u);
  const auto until = [](int64_t t) {
    CachedDenial d;
    d.cost = 1;
    d.until = t;
    d.retry_at = t;
    return d;
  };
  cache.insert(1, until(50), 0, 0);
  cache.insert(2, until(40), 0, 0);
  cache.insert(3, until(30), 0, 0);
  cache.insert(4, until(5), 0, 0);
  CachedDenial f;
  // At 10, 4 is over: the fifth denial takes its place.
  cache.insert(5, until(60), 10, 0);
  EXPECT_FALSE(cache.find(4, 1, 0, &f));
  // None over: the one ending first (3) goes.
  cache.insert(6, until(70), 10, 0);
  EXPECT_FALSE(cache.find(3, 1, 10, &f));
  for (uint64_t id : {1, 2, 5, 6}) EXPECT_TRUE(cache.find(id, 1, 10, &f)) << id;
}

TEST(DenyCacheTable, ADenialFromACallIssuedBeforeAForgetIsNotRecorded) {
  DenyCache cache(64, true);
  const Limit limit = must(Limit::fixed_window(1, std::chrono::hours(1)));
  const uint64_t id = cache.identity(limit, "k");
  CachedDenial d;
  d.cost = 1;
  d.until = 100;
  d.retry_at = 100;
  const uint64_t before = cache.generation();
  cache.insert(id, d, 0, before);
  cache.forget(limit, "k");
  CachedDenial f;
  EXPECT_FALSE(cache.find(id, 1, 0, &f));
  cache.insert(id, d, 0, before);  // Redis's answer to a call issued before the reset
  EXPECT_FALSE(cache.find(id, 1, 0, &f));
  cache.insert(id, d, 0, cache.generation());
  EXPECT_TRUE(cache.find(id, 1, 0, &f));
}

TEST(DenyCacheTable, ThreadsRecordAndFindAtOnce) {
  DenyCache cache(1'024, true);
  std::vector<std::thread> threads;
  std::atomic<uint64_t> found{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t i = 1; i <= 20'000; ++i) {
        const uint64_t id = i * 4 + static_cast<uint64_t>(t);
        CachedDenial d;
        d.cost = 1;
        d.until = 1'000;
        d.retry_at = 1'000;
        cache.insert(id, d, 0, cache.generation());
        CachedDenial f;
        if (cache.find(id, 1, 0, &f)) {
          cache.count_hit(id);
          found.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(cache.hits(), found.load());
  EXPECT_GT(found.load(), 0u);
}

// ------------------------------------------------------------ against Redis

Limit fixed_window_with_block(uint64_t limit, Nanos window, Nanos block) {
  LimitSpec spec;
  spec.algorithm = Algorithm::kFixedWindow;
  spec.limit = limit;
  spec.window = window;
  spec.block = block;
  return must(Limit::create(spec));
}

class RedisDenyCache : public ::testing::Test {
 protected:
  void SetUp() override {
    SLUICE_REQUIRE_REDIS();
    ASSERT_TRUE(server_.start());
    store_ = make_store(local_options(server_.address()));
    ASSERT_NE(store_, nullptr);
  }

  long long script_calls() const { return server_.script_calls(); }

  RedisServer server_;
  std::shared_ptr<RedisStore> store_;
};

TEST_F(RedisDenyCache, AThousandRequestsForAnExhaustedKeyCostNoScriptCallUntilTheWaitIsOver) {
  // 5 per second: a token every 200 ms.
  const Limit limit = must(Limit::token_bucket(5, 5, std::chrono::seconds(1)));
  const int64_t t0 = kEpochUs;
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(acquire_one(*store_, limit, "attacker", us(t0))->allowed);
  const auto first = acquire_one(*store_, limit, "attacker", us(t0));
  ASSERT_TRUE(first.ok());
  ASSERT_FALSE(first->allowed);
  ASSERT_EQ(first->retry_after, std::chrono::milliseconds(200));

  const long long calls_before = script_calls();
  AsyncDriver driver(store_);
  for (int64_t i = 0; i < 1'000; ++i) {
    // Spread over the 200 ms, from worker-like threads and synchronous calls.
    const int64_t at = t0 + i * 199;
    const auto d = i % 2 == 0 ? acquire_one(*store_, limit, "attacker", us(at))
                              : Result<Decision>(driver.call(limit, "attacker", us(at)).decision);
    ASSERT_TRUE(d.ok());
    ASSERT_FALSE(d->allowed) << i;
    EXPECT_EQ(d->retry_after, us(200'000 - i * 199)) << i;
    EXPECT_EQ(d->remaining, 0u);
  }
  EXPECT_EQ(script_calls() - calls_before, 0);
  EXPECT_EQ(store_->stats().deny_cache_hits, 1'000u);

  // 1 us before the token: still denied here, with 1 us to wait.
  const auto last = acquire_one(*store_, limit, "attacker", us(t0 + 199'999));
  ASSERT_FALSE(last->allowed);
  EXPECT_EQ(last->retry_after, us(1));
  EXPECT_EQ(script_calls() - calls_before, 0);
  // At the token: Redis is asked, and allows.
  const auto again = acquire_one(*store_, limit, "attacker", us(t0 + 200'000));
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->allowed);
  EXPECT_EQ(script_calls() - calls_before, 1);
  EXPECT_EQ(store_->stats().deny_cache_hits, 1'001u);
}

TEST_F(RedisDenyCache, InAFixedWindowASmallerCostGoesToRedisAndALargerOneIsDeniedHere) {
  const Limit limit = must(Limit::fixed_window(3, std::chrono::hours(1)));
  const int64_t t0 = kEpochUs;
  ASSERT_TRUE(acquire_one(*store_, limit, "k", us(t0), 2)->allowed);  // 3 -> 1
  const auto two = acquire_one(*store_, limit, "k", us(t0), 2);
  ASSERT_FALSE(two->allowed);
  EXPECT_EQ(two->remaining, 1u);
  const long long before = script_calls();
  const auto three = acquire_one(*store_, limit, "k", us(t0 + 1), 3);
  ASSERT_FALSE(three->allowed);
  EXPECT_EQ(three->remaining, 1u);
  EXPECT_EQ(three->retry_after, two->retry_after - us(1));  // the window's end
  EXPECT_EQ(script_calls() - before, 0);
  const auto one = acquire_one(*store_, limit, "k", us(t0 + 2), 1);  // 1 -> 0, in Redis
  EXPECT_TRUE(one->allowed);
  EXPECT_EQ(script_calls() - before, 1);
}

TEST_F(RedisDenyCache, AFixedWindowThatAnAllowEmptiedIsDeniedHereWithoutAskingRedisFirst) {
  // Windows of 1 s aligned to the epoch: kEpochUs + 250 ms is 750 ms from the end.
  const Limit limit = must(Limit::fixed_window(5, std::chrono::seconds(1)));
  const int64_t t0 = kEpochUs - kEpochUs % 1'000'000 + 250'000;
  const long long before = script_calls();
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(acquire_one(*store_, limit, "k", us(t0))->allowed);
  const auto last = acquire_one(*store_, limit, "k", us(t0), 1);  // 5 -> 0
  ASSERT_TRUE(last->allowed);
  EXPECT_EQ(last->remaining, 0u);
  // The first call's EVALSHA was refused (NOSCRIPT, counted as a call) and sent again.
  const long long loads = static_cast<long long>(store_->stats().script_loads);
  ASSERT_EQ(loads, 1);
  ASSERT_EQ(script_calls() - before, 5 + loads);
  for (int64_t i = 0; i < 1'000; ++i) {
    const int64_t at = t0 + i * 749;
    const uint64_t cost = 1 + static_cast<uint64_t>(i % 3);
    const auto d = acquire_one(*store_, limit, "k", us(at), cost);
    ASSERT_TRUE(d.ok());
    ASSERT_FALSE(d->allowed) << i;
    EXPECT_EQ(d->retry_after, us(750'000 - i * 749)) << i;
    EXPECT_EQ(d->remaining, 0u) << i;
  }
  EXPECT_EQ(script_calls() - before, 5 + loads);
  EXPECT_EQ(store_->stats().deny_cache_hits, 1'000u);
  // The next window: Redis is asked, and allows.
  const auto next = acquire_one(*store_, limit, "k", us(t0 + 750'000));
  ASSERT_TRUE(next.ok());
  EXPECT_TRUE(next->allowed);
  EXPECT_EQ(next->remaining, 4u);
  EXPECT_EQ(script_calls() - before, 6 + loads);
}

TEST_F(RedisDenyCache, AnAllowThatEmptiesAWindowWithABlockLeavesTheLockoutToRedis) {
  const Limit limit = fixed_window_with_block(2, std::chrono::seconds(1), std::chrono::seconds(10));
  const int64_t t0 = kEpochUs - kEpochUs % 1'000'000 + 250'000;
  ASSERT_TRUE(acquire_one(*store_, limit, "k", us(t0))->allowed);
  ASSERT_TRUE(acquire_one(*store_, limit, "k", us(t0))->allowed);  // 2 -> 0
  const long long before = script_calls();
  const auto locked = acquire_one(*store_, limit, "k", us(t0 + 1));
  ASSERT_FALSE(locked->allowed);
  EXPECT_EQ(locked->retry_after, std::chrono::seconds(10));  // the lockout Redis started
  EXPECT_EQ(script_calls() - before, 1);
  EXPECT_EQ(store_->stats().deny_cache_hits, 0u);
}

TEST_F(RedisDenyCache, AConcurrencyDenialIsNeverAnsweredHereSoAReleaseElsewhereIsSeenAtOnce) {
  const Limit limit = must(Limit::concurrency(1, std::chrono::hours(1)));
  const int64_t t0 = kEpochUs;
  const auto held = acquire_one(*store_, limit, "k", us(t0));
  ASSERT_TRUE(held->allowed);
  const long long before = script_calls();
  for (int i = 1; i <= 3; ++i) {
    const auto busy = acquire_one(*store_, limit, "k", us(t0 + i));
    ASSERT_FALSE(busy->allowed);
    EXPECT_EQ(busy->retry_after, std::chrono::seconds(1));
    EXPECT_EQ(script_calls() - before, i);
  }
  // Another instance gives the slot back: the next request here gets it.
  std::shared_ptr<RedisStore> other = make_store(local_options(server_.address()));
  ASSERT_NE(other, nullptr);
  const RefundRequest release{&limit, "k", 1, held->decided_at};
  ASSERT_TRUE(other->refund({&release, 1}, us(t0 + 4)).ok());
  EXPECT_TRUE(acquire_one(*store_, limit, "k", us(t0 + 5))->allowed);
  EXPECT_EQ(store_->stats().deny_cache_hits, 0u);
}

TEST_F(RedisDenyCache, InATokenBucketALargerCostGoesToRedisForItsLongerWait) {
  const Limit limit = must(Limit::token_bucket(3, 1, std::chrono::seconds(1)));
  const int64_t t0 = kEpochUs;
  ASSERT_TRUE(acquire_one(*store_, limit, "k", us(t0), 3)->allowed);  // 3 -> 0
  const auto one = acquire_one(*store_, limit, "k", us(t0), 1);
  ASSERT_FALSE(one->allowed);
  EXPECT_EQ(one->retry_after, std::chrono::seconds(1));
  const long long before = script_calls();
  EXPECT_EQ(acquire_one(*store_, limit, "k", us(t0), 1)->retry_after, std::chrono::seconds(1));
  EXPECT_EQ(script_calls() - before, 0);
  const auto two = acquire_one(*store_, limit, "k", us(t0), 2);
  ASSERT_FALSE(two->allowed);
  EXPECT_EQ(two->retry_after, std::chrono::seconds(2));
  EXPECT_EQ(script_calls() - before, 1);
}

TEST_F(RedisDenyCache, ARequestIsAnsweredHereOnlyWhenEveryLimitIsKnownDenied) {
  const Limit one = must(Limit::fixed_window(1, std::chrono::hours(1)));
  const Limit two = must(Limit::fixed_window(2, std::chrono::hours(1)));
  const int64_t t0 = kEpochUs;
  const auto both = [&](int64_t at, Decision* out) {
    const AcquireRequest r[2] = {{&one, "a|k", 1}, {&two, "b|k", 1}};
    return store_->acquire(r, us(at), {out, 2});
  };
  Decision out[2];
  ASSERT_TRUE(both(t0, out).ok());
  ASSERT_TRUE(out[0].allowed && out[1].allowed);  // one: 0 left, two: 1 left
  const long long before = script_calls();
  // The single-limit request below is the fixed window's fast path's first
  // call: its EVALSHA is refused (NOSCRIPT, a script call too) and it is sent
  // again with EVAL.
  const uint64_t loads = store_->stats().script_loads;
  const auto reloads = [&] { return static_cast<long long>(store_->stats().script_loads - loads); };
  // `one` denies and is remembered; `two` would allow, and only Redis knows
  // what it has left: every such request is Redis's.
  for (int i = 1; i <= 2; ++i) {
    ASSERT_TRUE(both(t0 + i, out).ok());
    EXPECT_FALSE(out[0].allowed);
    EXPECT_TRUE(out[1].allowed);
    EXPECT_EQ(out[1].remaining, 0u);  // what it would have left after this request
    EXPECT_EQ(script_calls() - before, i);
  }
  // `two` left empty by an allow: known denied from then on, like `one`.
  ASSERT_TRUE(acquire_one(*store_, two, "b|k", us(t0 + 3))->allowed);
  EXPECT_EQ(reloads(), 1);
  EXPECT_EQ(script_calls() - before, 3 + reloads());
  // Now both are known denied: answered here, as Redis would answer.
  const Nanos window_end = std::chrono::hours(1) - us((t0 + 4) % 3'600'000'000);
  ASSERT_TRUE(both(t0 + 4, out).ok());
  EXPECT_FALSE(out[0].allowed);
  EXPECT_FALSE(out[1].allowed);
  EXPECT_EQ(out[0].retry_after, window_end);
  EXPECT_EQ(out[1].retry_after, window_end);
  EXPECT_EQ(out[0].remaining, 0u);
  EXPECT_EQ(out[1].remaining, 0u);
  EXPECT_EQ(script_calls() - before, 3 + reloads());
  EXPECT_EQ(store_->stats().deny_cache_hits, 1u);
}

TEST_F(RedisDenyCache, ARequestWithALockoutLimitNotKnownLockedGoesToRedisWhichLocksItOut) {
  const Limit tight = must(Limit::fixed_window(1, std::chrono::hours(1)));
  const Limit locking = fixed_window_with_block(1, std::chrono::hours(1), std::chrono::hours(2));
  const int64_t t0 = kEpochUs;
  ASSERT_TRUE(acquire_one(*store_, locking, "b|k", us(t0))->allowed);  // 1 -> 0
  ASSERT_TRUE(acquire_one(*store_, tight, "a|k", us(t0))->allowed);
  ASSERT_FALSE(acquire_one(*store_, tight, "a|k", us(t0))->allowed);  // known denied here
  ASSERT_EQ(store_->stats().deny_cache_hits, 1u);
  const long long before = script_calls();
  const AcquireRequest r[2] = {{&tight, "a|k", 1}, {&locking, "b|k", 1}};
  Decision out[2];
  ASSERT_TRUE(store_->acquire(r, us(t0 + 1), out).ok());
  EXPECT_FALSE(out[0].allowed);
  EXPECT_FALSE(out[1].allowed);
  EXPECT_EQ(out[1].retry_after, std::chrono::hours(2));
  EXPECT_EQ(script_calls() - before, 1);
  EXPECT_EQ(server_.integer({"EXISTS", store_->redis_lockout_key(locking, "b|k")}), 1);
  EXPECT_EQ(store_->stats().deny_cache_hits, 1u);
}

TEST_F(RedisDenyCache, AResetOrARefundEndsTheLocalDenial) {
  const Limit limit = must(Limit::fixed_window(1, std::chrono::hours(1)));
  const int64_t t0 = kEpochUs;
  const auto charge = acquire_one(*store_, limit, "r", us(t0));
  ASSERT_TRUE(charge->allowed);
  ASSERT_FALSE(acquire_one(*store_, limit, "r", us(t0))->allowed);
  ASSERT_TRUE(store_->reset(limit, "r").ok());
  const auto after_reset = acquire_one(*store_, limit, "r", us(t0 + 1));
  ASSERT_TRUE(after_reset->allowed);
  ASSERT_FALSE(acquire_one(*store_, limit, "r", us(t0 + 2))->allowed);
  const RefundRequest give_back{&limit, "r", 1, after_reset->decided_at};
  ASSERT_TRUE(store_->refund({&give_back, 1}, us(t0 + 3)).ok());
  EXPECT_TRUE(acquire_one(*store_, limit, "r", us(t0 + 4))->allowed);
}

TEST_F(RedisDenyCache, ALockoutIsDeniedHereForEveryCostUntilItEnds) {
  const Limit limit = fixed_window_with_block(3, std::chrono::seconds(1), std::chrono::minutes(1));
  const int64_t t0 = kEpochUs;
  ASSERT_TRUE(acquire_one(*store_, limit, "login", us(t0), 3)->allowed);
  ASSERT_FALSE(acquire_one(*store_, limit, "login", us(t0), 2)->allowed);  // lockout to t0 + 1 min
  const long long before = script_calls();
  // A new window, cost 1: still the lockout, answered here.
  const auto locked = acquire_one(*store_, limit, "login", us(t0 + 5'000'000), 1);
  ASSERT_FALSE(locked->allowed);
  EXPECT_EQ(locked->retry_after, std::chrono::seconds(55));
  EXPECT_EQ(script_calls() - before, 0);
  EXPECT_TRUE(acquire_one(*store_, limit, "login", us(t0 + 60'000'000), 1)->allowed);
  EXPECT_EQ(script_calls() - before, 1);
}

TEST_F(RedisDenyCache, WithRedisTimeAnExhaustedKeyIsDeniedHere) {
  RedisStoreOptions o = local_options(server_.address());
  o.time_source = RedisTimeSource::kRedis;
  store_ = make_store(o);
  ASSERT_NE(store_, nullptr);
  const Limit limit = must(Limit::token_bucket(1, 1, std::chrono::hours(1)));
  ASSERT_TRUE(acquire_one(*store_, limit, "t", Nanos{0})->allowed);
  const auto first = acquire_one(*store_, limit, "t", Nanos{0});
  ASSERT_FALSE(first->allowed);
  const long long before = script_calls();
  for (int i = 0; i < 100; ++i) {
    const auto d = acquire_one(*store_, limit, "t", Nanos{0});
    ASSERT_FALSE(d->allowed);
    // Counted down on the steady clock from the reply.
    EXPECT_GT(d->retry_after, Nanos{0});
    EXPECT_LE(d->retry_after, first->retry_after);
  }
  EXPECT_EQ(script_calls() - before, 0);
  EXPECT_EQ(store_->stats().deny_cache_hits, 100u);
}

// Every decision of a store with the cache, against one without it on the
// same Redis (another key prefix), over random traces of several keys,
// every algorithm, a lockout, costs 1 to 3 and requests of two limits. What
// may differ by design: a local denial's reset_after, and its remaining for
// a cost above 1 (docs/CONFIG.md); what may not: whether a request is
// allowed, which limits deny and their waits.
TEST_F(RedisDenyCache, DecidesAsRedisAloneOnRandomTraces) {
  RedisStoreOptions plain_options = local_options(server_.address());
  plain_options.deny_cache = false;
  plain_options.key_prefix = "plain:";
  auto plain = make_store(plain_options);
  ASSERT_NE(plain, nullptr);
  LimitSpec locked;
  locked.algorithm = Algorithm::kSlidingWindow;
  locked.limit = 4;
  locked.window = std::chrono::milliseconds(50);
  locked.block = std::chrono::milliseconds(120);
  const std::vector<Limit> limits = {
      must(Limit::token_bucket(4, 3, std::chrono::milliseconds(100))),
      must(Limit::gcra(3, 1, std::chrono::milliseconds(30))),
      must(Limit::fixed_window(5, std::chrono::milliseconds(70))),
      must(Limit::sliding_log(4, std::chrono::milliseconds(90))),
      must(Limit::sliding_window(6, std::chrono::milliseconds(80))),
      must(Limit::create(locked)),
  };
  std::mt19937_64 rng(20261202);
  int64_t now = kEpochUs;
  uint64_t local = 0;
  for (int step = 0; step < 4'000; ++step) {
    now += static_cast<int64_t>(rng() % 4'000);  // 0 to 4 ms
    const std::string key = "c" + std::to_string(rng() % 3);
    const size_t a = rng() % limits.size();
    const size_t b = (a + 1 + rng() % (limits.size() - 1)) % limits.size();
    const size_t n = rng() % 3 == 0 ? 2 : 1;
    const uint64_t cost = 1 + rng() % 3;
    const std::string ka = "a|" + key;
    const std::string kb = "b|" + key;
    const AcquireRequest r[2] = {{&limits[a], ka, cost}, {&limits[b], kb, 1}};
    Decision with[2], without[2];
    const uint64_t hits = store_->stats().deny_cache_hits;
    ASSERT_TRUE(store_->acquire({r, n}, us(now), {with, n}).ok());
    ASSERT_TRUE(plain->acquire({r, n}, us(now), {without, n}).ok());
    const bool answered_here = store_->stats().deny_cache_hits != hits;
    local += answered_here ? 1 : 0;
    ASSERT_EQ(all_allowed({with, n}), all_allowed({without, n})) << step;
    for (size_t i = 0; i < n; ++i) {
      if (!answered_here) {
        ASSERT_EQ(with[i], without[i]) << step << " limit " << i;
      } else if (!with[i].allowed) {
        ASSERT_FALSE(without[i].allowed) << step << " limit " << i;
        ASSERT_EQ(with[i].retry_after, without[i].retry_after)
            << step << " limit " << i << " algorithm " << limits[i == 0 ? a : b].describe()
            << " cost " << r[i].cost << " n " << n << " key " << key;
        if (r[i].cost == 1) {
          ASSERT_EQ(with[i].remaining, without[i].remaining) << step;
        }
      }
    }
  }
  // The traces do exercise the cache.
  EXPECT_GT(local, 300u);
}

}  // namespace
}  // namespace sluice::testing
