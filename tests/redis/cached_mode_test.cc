// Cached mode (RedisStoreOptions::mode kCached, docs/SCALING.md): local
// decisions from the last global state plus the instance's own hits, hits
// sent to Redis in one call per sync. Syncs are triggered by the tests
// (RedisStore::sync(); the timer is set to an hour) and `now` is passed in,
// so every count below is exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "sluice/memory_store.h"
#include "store/redis/cached_table.h"
#include "test_util.h"

namespace sluice::testing {
namespace {

RedisStoreOptions cached_options(const std::string& address) {
  RedisStoreOptions o = local_options(address);
  o.mode = RedisMode::kCached;
  o.sync_interval = std::chrono::hours(1);  // the tests sync when they choose
  o.early_fetch = false;                    // ... also after a key's first request
  return o;
}

RedisStoreOptions exact_options(const std::string& address) {
  RedisStoreOptions o = local_options(address);
  o.deny_cache = false;
  return o;
}

class CachedMode : public ::testing::Test {
 protected:
  void SetUp() override {
    SLUICE_REQUIRE_REDIS();
    ASSERT_TRUE(server_.start());
  }
  // A cached store and an exact one on the same Redis; `key` under limit_
  // is decided once by Redis (999 left of 1000 per hour), then fetched.
  void start_pair(const std::string& key) {
    pair_.first = make_store(cached_options(server_.address()));
    pair_.second = make_store(exact_options(server_.address()));
    ASSERT_NE(pair_.first, nullptr);
    ASSERT_NE(pair_.second, nullptr);
    ASSERT_EQ(acquire_one(*pair_.first, limit, key, t)->remaining, 999u);
    ASSERT_TRUE(pair_.first->sync().ok());
  }
  RedisServer server_;
  const Limit limit = must(Limit::token_bucket(1'000, 1, 1h));
  const Nanos t = us(kEpochUs);
  std::pair<std::shared_ptr<RedisStore>, std::shared_ptr<RedisStore>> pair_;
};

void expect_same(const Decision& cached, const Decision& memory, const std::string& at) {
  EXPECT_EQ(cached.allowed, memory.allowed) << at;
  EXPECT_EQ(cached.limit, memory.limit) << at;
  EXPECT_EQ(cached.remaining, memory.remaining) << at;
  EXPECT_EQ(cached.reset_after, memory.reset_after) << at;
  EXPECT_EQ(cached.retry_after, memory.retry_after) << at;
}

TEST_F(CachedMode, OneInstanceDecidesAsTheMemoryStoreBetweenSyncs) {
  const Limit limits[] = {must(Limit::token_bucket(10, 5, 1s)), must(Limit::fixed_window(7, 1s))};
  for (const Limit& limit : limits) {
    SCOPED_TRACE(limit.describe());
    auto store = make_store(cached_options(server_.address()));
    ASSERT_NE(store, nullptr);
    MemoryStore memory(MemoryStoreOptions{.max_keys = 1'000, .shards = 1, .seed = 1});
    const std::string key = "k-" + limit.describe();
    // The first request goes to Redis (the key is not fetched yet); the
    // sync fetches its state.
    const Nanos t0 = us(kEpochUs);
    expect_same(*acquire_one(*store, limit, key, t0), *acquire_one(memory, limit, key, t0),
                "first");
    ASSERT_TRUE(store->sync().ok());
    EXPECT_EQ(store->stats().syncs, 1u);
    const long long calls = server_.script_calls();
    size_t allowed = 0;
    for (int64_t i = 1; i <= 300; ++i) {
      const Nanos now = us(kEpochUs + i * 37'123);
      const Result<Decision> c = acquire_one(*store, limit, key, now);
      ASSERT_TRUE(c.ok()) << c.error().message;
      EXPECT_EQ(c->decided_at, now);
      expect_same(*c, *acquire_one(memory, limit, key, now), "request " + std::to_string(i));
      allowed += c->allowed ? 1 : 0;
    }
    // Decided here, with no Redis call; both allowed and denied happened.
    EXPECT_EQ(server_.script_calls(), calls);
    EXPECT_GT(allowed, 0u);
    EXPECT_LT(allowed, 300u);
  }
}

TEST_F(CachedMode, HitsReachRedisInOneCallPerSync) {
  ASSERT_NO_FATAL_FAILURE(start_pair("hot"));
  auto& [cached, exact] = pair_;
  const long long calls = server_.script_calls();
  for (int i = 0; i < 500; ++i) {
    const Result<Decision> d = acquire_one(*cached, limit, "hot", t);
    ASSERT_TRUE(d.ok());
    ASSERT_TRUE(d->allowed);
    ASSERT_EQ(d->remaining, static_cast<uint64_t>(998 - i));
  }
  EXPECT_EQ(server_.script_calls(), calls);
  ASSERT_TRUE(cached->sync().ok());
  EXPECT_EQ(server_.script_calls(), calls + 1);  // 500 hits, one call
  EXPECT_EQ(cached->stats().syncs, 2u);
  // Nothing to send: no call, not counted.
  ASSERT_TRUE(cached->sync().ok());
  EXPECT_EQ(server_.script_calls(), calls + 1);
  EXPECT_EQ(cached->stats().syncs, 2u);
  // Another instance in exact mode sees every hit: 1000 - 1 - 500, then its own.
  EXPECT_EQ(acquire_one(*exact, limit, "hot", t)->remaining, 498u);
}

// docs/SCALING.md derives the bound: with n instances, capacity C, refill
// rate R and sync interval S, over any span T the instances admit at most
// C + R*T + (n - 1) * (2*R*S + C) and, under a load that keeps asking, at
// least C + R*T.
TEST_F(CachedMode, ThreeInstancesOnOneHotKeyAdmitWithinTheBound) {
  constexpr int kInstances = 3;
  constexpr int64_t kCapacity = 100;
  constexpr int64_t kRatePerSecond = 100;
  constexpr int64_t kSyncMs = 50;
  constexpr int64_t kSpanMs = 2'000;
  constexpr int kPerInstancePerMs = 4;  // 12 per ms against a rate of 0.1 per ms
  const Limit bucket = must(Limit::token_bucket(kCapacity, kRatePerSecond, 1s));
  std::vector<std::shared_ptr<RedisStore>> stores;
  for (int i = 0; i < kInstances; ++i) {
    stores.push_back(make_store(cached_options(server_.address())));
    ASSERT_NE(stores.back(), nullptr);
  }
  const long long calls_before = server_.script_calls();
  int64_t admitted = 0;
  int64_t decisions = 0;
  const auto decide = [&](RedisStore& s, Nanos now) {
    const Result<Decision> d = acquire_one(s, bucket, "hot", now);
    ASSERT_TRUE(d.ok()) << d.error().message;
    ++decisions;
    admitted += d->allowed ? 1 : 0;
  };
  for (auto& s : stores) {
    decide(*s, us(kEpochUs));  // Redis decides; then the key is fetched
    ASSERT_TRUE(s->sync().ok());
  }
  for (int64_t ms = 1; ms <= kSpanMs; ++ms) {
    const Nanos now = us(kEpochUs + ms * 1'000);
    for (auto& s : stores) {
      for (int k = 0; k < kPerInstancePerMs; ++k) decide(*s, now);
    }
    if (ms % kSyncMs == 0) {
      for (auto& s : stores) ASSERT_TRUE(s->sync().ok());
    }
  }
  const long long calls = server_.script_calls() - calls_before;
  const int64_t refilled = kRatePerSecond * kSpanMs / 1'000;
  const int64_t bound = (kInstances - 1) * (2 * kRatePerSecond * kSyncMs / 1'000 + kCapacity);
  std::printf("admitted %lld of %lld (capacity + refill %lld, bound +%lld), %lld script calls\n",
              static_cast<long long>(admitted), static_cast<long long>(decisions),
              static_cast<long long>(kCapacity + refilled), static_cast<long long>(bound), calls);
  EXPECT_GE(admitted, kCapacity);
  // And nothing is under-admitted: every instance, asked 4 times each
  // millisecond, ends with less than a token in its view, and its view holds
  // at least what the global bucket does (it misses only others' hits). So
  // the bucket ends below one token: C + R*T - admitted < 1.
  EXPECT_GE(admitted, kCapacity + refilled);
  EXPECT_LE(admitted, kCapacity + refilled + bound);
  // Redis script calls per decision at a hot key.
  EXPECT_LE(static_cast<double>(calls) / static_cast<double>(decisions), 0.01);
  for (auto& s : stores) EXPECT_EQ(s->stats().syncs, static_cast<uint64_t>(1 + kSpanMs / kSyncMs));
}

TEST_F(CachedMode, AFailedSyncKeepsDecidingAndItsHitsReachRedisExactlyOnce) {
  ASSERT_NO_FATAL_FAILURE(start_pair("k"));
  auto& [cached, exact] = pair_;
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(acquire_one(*cached, limit, "k", t)->allowed);

  // Redis stops answering: the sync times out (Redis may still run it once
  // it is back), and decisions go on locally.
  ASSERT_TRUE(server_.pause());
  EXPECT_FALSE(cached->sync().ok());
  EXPECT_EQ(cached->stats().sync_failures, 1u);
  for (int i = 0; i < 10; ++i) {
    const Result<Decision> d = acquire_one(*cached, limit, "k", t);
    ASSERT_TRUE(d.ok());
    EXPECT_TRUE(d->allowed);
    EXPECT_EQ(d->remaining, static_cast<uint64_t>(988 - i));
  }
  ASSERT_TRUE(server_.resume());
  // The failed batch goes again under its sequence number (applied at most
  // once), then the 10 hits decided meanwhile.
  ASSERT_TRUE(wait_until([&] { return cached->sync().ok(); }, 10s));
  ASSERT_TRUE(cached->sync().ok());
  // 1000 - 1 - 10 - 10 = 979 left: no hit lost, none counted twice.
  EXPECT_EQ(acquire_one(*exact, limit, "k", t)->remaining, 978u);
  // The cached instance has not seen the exact one's hit yet (its next sync
  // brings it): 979 - 1.
  EXPECT_EQ(acquire_one(*cached, limit, "k", t)->remaining, 978u);
  ASSERT_TRUE(cached->sync().ok());
  EXPECT_EQ(acquire_one(*cached, limit, "k", t)->remaining, 976u);  // 979 - 1 - 1 - 1
}

TEST_F(CachedMode, AResetBetweenAFailedSyncAndItsResendIsNotUndoneByTheResend) {
  ASSERT_NO_FATAL_FAILURE(start_pair("k"));
  auto& [cached, exact] = pair_;
  ASSERT_EQ(acquire_one(*cached, limit, "other", t)->remaining, 999u);  // asks Redis
  ASSERT_TRUE(cached->sync().ok());                                     // fetches "other"
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(acquire_one(*cached, limit, "k", t)->allowed);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(acquire_one(*cached, limit, "other", t)->allowed);

  // Redis goes away and comes back empty (no persistence): the sync fails
  // without reaching it, and keeps its batch to send again.
  server_.kill();
  EXPECT_FALSE(cached->sync().ok());
  ASSERT_TRUE(server_.start());
  ASSERT_TRUE(wait_until([&] { return cached->reset(limit, "k").ok(); }, 10s));
  ASSERT_TRUE(wait_until([&] { return cached->sync().ok(); }, 10s));
  // The exact store reconnects on its own backoff: answered once on another key.
  ASSERT_TRUE(wait_until([&] { return acquire_one(*exact, limit, "probe", t).ok(); }, 10s));
  // "k" starts afresh after its reset: the resend did not charge its 10 hits.
  EXPECT_EQ(acquire_one(*exact, limit, "k", t)->remaining, 999u);
  // "other"'s 5 hits were sent again, on the new server's empty state.
  EXPECT_EQ(acquire_one(*exact, limit, "other", t)->remaining, 994u);
}

TEST_F(CachedMode, ResetForgetsTheLocalStateAndTheNextRequestAsksRedis) {
  auto cached = make_store(cached_options(server_.address()));
  ASSERT_NE(cached, nullptr);
  const Limit window = must(Limit::fixed_window(10, 1h));
  ASSERT_TRUE(acquire_one(*cached, window, "k", t)->allowed);
  ASSERT_TRUE(cached->sync().ok());
  for (int i = 0; i < 9; ++i) ASSERT_TRUE(acquire_one(*cached, window, "k", t)->allowed);
  EXPECT_FALSE(acquire_one(*cached, window, "k", t)->allowed);  // 10 of 10, locally
  EXPECT_EQ(*cached->reset(window, "k"), true);
  const long long calls = server_.script_calls();
  EXPECT_EQ(acquire_one(*cached, window, "k", t)->remaining, 9u);
  EXPECT_EQ(server_.script_calls(), calls + 1);  // asked Redis: not fetched any more
}

// A fixed window's state in Redis is a counter per window: a sync adds the
// instance's hits to the counter of the window they were counted in, and
// drops the hits of a window that ended before they were sent.
TEST_F(CachedMode, AFixedWindowsHitsReachItsWindowsCounterAndThoseOfAnEndedWindowAreDropped) {
  auto cached = make_store(cached_options(server_.address()));
  auto exact = make_store(exact_options(server_.address()));
  ASSERT_NE(cached, nullptr);
  ASSERT_NE(exact, nullptr);
  const Limit window = must(Limit::fixed_window(100, 1s));
  const Nanos t0 = us((kEpochUs / 1'000'000) * 1'000'000 + 100'000);
  const Nanos t1 = t0 + 1s;  // the next window
  const std::string first = cached->redis_window_key(window, "k", t0);
  const std::string second = cached->redis_window_key(window, "k", t1);
  ASSERT_NE(first, second);
  ASSERT_EQ(acquire_one(*cached, window, "k", t0)->remaining, 99u);  // asks Redis
  ASSERT_TRUE(cached->sync().ok());                                  // fetches the count
  for (uint64_t i = 0; i < 10; ++i)
    ASSERT_EQ(acquire_one(*cached, window, "k", t0)->remaining, 98u - i);
  ASSERT_TRUE(cached->sync().ok());
  EXPECT_EQ(server_.text({"GET", first}), "11");
  EXPECT_EQ(acquire_one(*exact, window, "k", t0)->remaining, 88u);
  // Three more here in the first window (the instance has not seen the exact
  // store's request yet), then one in the second: the three are dropped.
  for (uint64_t i = 0; i < 3; ++i)
    ASSERT_EQ(acquire_one(*cached, window, "k", t0)->remaining, 88u - i);
  ASSERT_EQ(acquire_one(*cached, window, "k", t1)->remaining, 99u);
  ASSERT_TRUE(cached->sync().ok());
  EXPECT_EQ(server_.text({"GET", first}), "12");
  EXPECT_EQ(server_.text({"GET", second}), "1");
  EXPECT_EQ(acquire_one(*exact, window, "k", t1)->remaining, 98u);
}

TEST_F(CachedMode, DestroyingTheStoreSendsItsUnsentHits) {
  auto exact = make_store(exact_options(server_.address()));
  ASSERT_NE(exact, nullptr);
  {
    auto cached = make_store(cached_options(server_.address()));
    ASSERT_NE(cached, nullptr);
    ASSERT_TRUE(acquire_one(*cached, limit, "k", t)->allowed);
    ASSERT_TRUE(cached->sync().ok());
    for (int i = 0; i < 7; ++i) ASSERT_TRUE(acquire_one(*cached, limit, "k", t)->allowed);
  }
  EXPECT_EQ(acquire_one(*exact, limit, "k", t)->remaining, 991u);  // 1000 - 1 - 7 - 1
}

TEST_F(CachedMode, TheTimerSyncsEveryInterval) {
  RedisStoreOptions o = cached_options(server_.address());
  o.sync_interval = 20ms;
  auto cached = make_store(o);
  auto exact = make_store(exact_options(server_.address()));
  ASSERT_NE(cached, nullptr);
  ASSERT_NE(exact, nullptr);
  ASSERT_TRUE(acquire_one(*cached, limit, "k", t)->allowed);
  // The timer's first sync fetches the key: from then on it is decided here.
  ASSERT_TRUE(wait_until([&] { return cached->stats().syncs >= 1; }, 10s));
  const long long calls = server_.script_calls();
  for (int i = 0; i < 5; ++i) {
    const Result<Decision> d = acquire_one(*cached, limit, "k", t);
    ASSERT_TRUE(d->allowed);
    EXPECT_EQ(d->remaining, static_cast<uint64_t>(998 - i));  // decided here
  }
  EXPECT_EQ(server_.script_calls(), calls);
  // The level Redis holds (token_bucket.lua's packed doubles; one token is
  // 3.6e9 units of 1 per hour in microseconds) reaches 1000 - 6 by the timer.
  const auto tokens_in_redis = [&] {
    Reply r = server_.command({"GET", cached->redis_key(limit, "k")});
    double level = -1;
    if (r && r->type == REDIS_REPLY_STRING && r->len >= 8) std::memcpy(&level, r->str, 8);
    return level / 3.6e9;
  };
  ASSERT_TRUE(wait_until([&] { return tokens_in_redis() == 994.0; }, 10s));
  EXPECT_EQ(acquire_one(*exact, limit, "k", t)->remaining, 993u);  // 1000 - 6 - 1
}

// early_fetch (the default): keys waiting for their first fetch that keep
// asking Redis (CachedTable::kAsksBeforeFetch requests again since the last
// sync) are fetched as soon as Redis has answered, not at the next interval.
TEST_F(CachedMode, AKeyAskedForAgainBeforeItsFetchIsFetchedOnceRedisHasAnswered) {
  constexpr uint64_t kAgain = redis::CachedTable::kAsksBeforeFetch;
  RedisStoreOptions o = cached_options(server_.address());
  o.early_fetch = true;
  auto cached = make_store(o);
  auto exact = make_store(exact_options(server_.address()));
  ASSERT_NE(cached, nullptr);
  ASSERT_NE(exact, nullptr);
  for (uint64_t i = 0; i <= kAgain; ++i)
    ASSERT_EQ(acquire_one(*cached, limit, "k", t)->remaining, 999u - i);  // Redis's
  // The interval is an hour: this sync is the one the last request asked for.
  ASSERT_TRUE(wait_until([&] { return cached->stats().syncs == 1; }, 10s));
  EXPECT_EQ(cached->stats().sync_rounds, 1u);
  const long long calls = server_.script_calls();
  // Decided here, from a state fetched after Redis charged every request above.
  for (uint64_t i = 0; i < 5; ++i)
    EXPECT_EQ(acquire_one(*cached, limit, "k", t)->remaining, 998u - kAgain - i);
  EXPECT_EQ(server_.script_calls(), calls);
  ASSERT_TRUE(cached->sync().ok());
  EXPECT_EQ(acquire_one(*exact, limit, "k", t)->remaining, 1000u - (kAgain + 1) - 5 - 1);
}

// Keys asked for once each (cold keys) bring no sync forward: their fetch
// would save no Redis call.
TEST_F(CachedMode, NewKeysAskedForOnceWaitForTheInterval) {
  RedisStoreOptions o = cached_options(server_.address());
  o.early_fetch = true;
  auto cached = make_store(o);
  ASSERT_NE(cached, nullptr);
  for (int i = 0; i < 100; ++i)
    ASSERT_EQ(acquire_one(*cached, limit, "cold-" + std::to_string(i), t)->remaining, 999u);
  ASSERT_TRUE(cached->sync().ok());  // runs after anything the requests posted
  EXPECT_EQ(cached->stats().sync_rounds, 0u);
  EXPECT_EQ(cached->stats().syncs, 1u);
}

// A store whose keys are not decided makes no Redis call, however many
// intervals pass (counted by INFO commandstats: EVALSHA and EVAL).
TEST_F(CachedMode, AnIdleStoreMakesNoScriptCallOverManyIntervals) {
  RedisStoreOptions o = cached_options(server_.address());
  o.early_fetch = true;
  o.sync_interval = 20ms;
  auto cached = make_store(o);
  ASSERT_NE(cached, nullptr);
  ASSERT_TRUE(acquire_one(*cached, limit, "k", t)->allowed);
  ASSERT_TRUE(wait_until([&] { return cached->stats().syncs >= 1; }, 10s));  // fetched
  for (int i = 0; i < 3; ++i) ASSERT_EQ(acquire_one(*cached, limit, "k", t)->remaining, 998u - i);
  ASSERT_TRUE(wait_until([&] { return cached->stats().syncs >= 2; }, 10s));  // the 3 hits sent
  const long long calls = server_.script_calls();
  const uint64_t syncs = cached->stats().syncs;
  const uint64_t rounds = cached->stats().sync_rounds;
  ASSERT_TRUE(wait_until([&] { return cached->stats().sync_rounds >= rounds + 10; }, 10s));
  EXPECT_EQ(server_.script_calls(), calls);
  EXPECT_EQ(cached->stats().syncs, syncs);
}

TEST_F(CachedMode, LimitsItCannotDecideLocallyAreRefused) {
  auto cached = make_store(cached_options(server_.address()));
  ASSERT_NE(cached, nullptr);
  const Limit smooth = must(Limit::sliding_window(10, 1s));
  EXPECT_FALSE(cached->check_limit(smooth).ok());
  EXPECT_TRUE(cached->check_limit(must(Limit::fixed_window(10, 1s))).ok());
  const Result<Decision> d = acquire_one(*cached, smooth, "k", us(kEpochUs));
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().code, ErrorCode::kInvalidArgument);
}

// The local table on its own: bounded, and it never drops hits not sent.
TEST(CachedTable, HoldsAtMostMaxKeysEvictingTheLeastRecentlyUsedKeyWithNothingToSend) {
  redis::CachedTable table(2);
  const Limit limit = must(Limit::fixed_window(10, 1h));
  const Nanos t = us(kEpochUs);
  Decision d;
  const auto ask = [&](std::string_view key) {
    AcquireRequest r{&limit, key, 1};
    return *table.decide({&r, 1}, "p:", t, {&d, 1});
  };
  using Outcome = redis::CachedTable::Outcome;
  EXPECT_EQ(ask("a"), Outcome::kAskRedis);
  EXPECT_EQ(ask("b"), Outcome::kAskRedis);
  EXPECT_EQ(ask("c"), Outcome::kAskRedis);  // evicts a
  EXPECT_EQ(table.size(), 2u);
  Nanos now{0};
  std::vector<redis::SyncItem> batch = table.take_batch(&now);
  ASSERT_EQ(batch.size(), 2u);  // fetches b and c
  EXPECT_EQ(now, t);
  table.settle(batch, std::vector<redis::SyncState>(2));  // neither exists in Redis
  EXPECT_EQ(ask("b"), Outcome::kDecided);
  EXPECT_EQ(ask("c"), Outcome::kDecided);
  EXPECT_EQ(d.remaining, 9u);
  // b and c have hits to send: a new key evicts neither.
  EXPECT_EQ(ask("d"), Outcome::kAskRedis);
  EXPECT_EQ(table.size(), 3u);
  batch = table.take_batch(&now);
  ASSERT_EQ(batch.size(), 3u);
  table.settle(batch, std::vector<redis::SyncState>(3));
  EXPECT_EQ(ask("e"), Outcome::kAskRedis);  // evicts b, the least recently used
  EXPECT_EQ(table.size(), 3u);
  EXPECT_EQ(ask("c"), Outcome::kDecided);
  EXPECT_EQ(ask("b"), Outcome::kAskRedis);
}

// The ask for an early fetch, counted by the table alone: once per batch,
// at the kAsksBeforeFetch-th request that asks Redis again for a key still
// to be fetched; never for keys asked for once, nor while a fetch is in flight.
TEST(CachedTable, AsksForAFetchAtTheRequestsThatAskRedisAgainForAKeyToFetch) {
  redis::CachedTable table(1'000);
  const Limit limit = must(Limit::token_bucket(100, 1, 1h));
  const Nanos t = us(kEpochUs);
  Decision d;
  const auto ask = [&](const std::string& key) {
    AcquireRequest r{&limit, key, 1};
    bool fetch_soon = false;
    EXPECT_EQ(*table.decide({&r, 1}, "p:", t, {&d, 1}, &fetch_soon),
              redis::CachedTable::Outcome::kAskRedis);
    return fetch_soon;
  };
  for (int i = 0; i < 200; ++i) EXPECT_FALSE(ask("cold-" + std::to_string(i)));
  EXPECT_FALSE(ask("hot"));  // its first request
  for (uint32_t i = 1; i < redis::CachedTable::kAsksBeforeFetch; ++i) EXPECT_FALSE(ask("hot"));
  EXPECT_TRUE(ask("hot"));
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(ask("hot"));  // asked once per batch
  Nanos now{0};
  const std::vector<redis::SyncItem> batch = table.take_batch(&now);
  EXPECT_EQ(batch.size(), 201u);
  // Its fetch is in flight: asking again brings nothing forward.
  for (uint32_t i = 0; i < 2 * redis::CachedTable::kAsksBeforeFetch; ++i) EXPECT_FALSE(ask("hot"));
  table.settle(batch, std::vector<redis::SyncState>(batch.size()));
  AcquireRequest r{&limit, "hot", 1};
  EXPECT_EQ(*table.decide({&r, 1}, "p:", t, {&d, 1}), redis::CachedTable::Outcome::kDecided);
}

}  // namespace
}  // namespace sluice::testing
