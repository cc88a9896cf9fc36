// MemoryStore: what the embedded store adds to the Store contract (the
// contract itself is in store_conformance_test.cc): the max_keys bound and
// which state eviction gives up, idle expiry, memory accounting, concurrency
// safety.
#include "sluice/memory_store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <latch>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "test_util.h"

namespace sluice {
namespace {

using namespace std::chrono_literals;
using testing::allowed;
using testing::bucket;
using testing::Days;
using testing::kNoon;
using testing::Model;
using testing::must;
using testing::window;

Decision acquire(MemoryStore& store, const Limit& limit, std::string_view key, Nanos now,
                 uint64_t cost = 1) {
  const AcquireRequest request{&limit, key, cost};
  Decision out;
  Status s = store.acquire({&request, 1}, now, {&out, 1});
  if (!s.ok()) throw std::runtime_error(s.error().message);
  return out;
}

class EveryAlgorithmInMemory : public ::testing::TestWithParam<Algorithm> {
 protected:
  // A limit of size `size` that does not refill within the test.
  Limit limit_of_size(uint64_t size) const {
    const Algorithm a = GetParam();
    if (a == Algorithm::kTokenBucket || a == Algorithm::kGcra)
      return must(Limit::create(bucket(a, size, 1, testing::kNoRefillPeriod)));
    return must(Limit::create(window(a, size, Days(1))));
  }

  // Size 10, back to full within a second or two.
  Limit quick_limit() const {
    const Algorithm a = GetParam();
    if (a == Algorithm::kTokenBucket || a == Algorithm::kGcra)
      return must(Limit::create(bucket(a, 10, 10, 1s)));
    return must(Limit::create(window(a, 10, 1s)));
  }
};

// 10 x max_keys distinct keys: the store never holds more than max_keys, and a
// hot key touched between every two new keys keeps its state throughout.
TEST_P(EveryAlgorithmInMemory, NeverHoldsMoreThanMaxKeysWhileAHotKeyKeepsItsState) {
  MemoryStore store(testing::store_options(1000));
  const Limit limit = limit_of_size(10'000);
  for (uint64_t i = 0; i < 10'000; ++i) {
    const Nanos now = kNoon + std::chrono::microseconds(i);
    // hot: 10,000 - i -> 9,999 - i; never reset to full by an eviction.
    const Decision hot = acquire(store, limit, "hot", now);
    ASSERT_TRUE(hot.allowed) << "key " << i;
    ASSERT_EQ(hot.remaining, 9'999 - i) << "key " << i;
    const Decision cold = acquire(store, limit, "cold:" + std::to_string(i), now);
    ASSERT_TRUE(cold.allowed);
    ASSERT_EQ(cold.remaining, 9'999u);
    ASSERT_LE(store.size(), 1000u) << "after key " << i;
  }
  EXPECT_EQ(store.size(), 1000u);
  EXPECT_EQ(store.max_keys(), 1000u);
}

// The attack: exhaust a key until it denies, then flood distinct new keys
// (new IPs) so that the shard must evict. The flood's keys each take the whole
// limit too, so that they are as far from full as the denied key (windows:
// the same reset time), and the denied key is the least recently used: only
// its denying mark keeps it. It still denies afterwards, with exactly the
// decision a store that never evicted would give.
TEST_P(EveryAlgorithmInMemory, ADeniedKeyStaysDeniedThroughAFloodOfNewKeys) {
  MemoryStore store(testing::store_options(1000));
  const Limit limit = limit_of_size(10);
  Model model(limit);
  ASSERT_EQ(acquire(store, limit, "victim", kNoon, 10), model.apply(kNoon, 10));
  const Decision denied = acquire(store, limit, "victim", kNoon + 1ms);
  ASSERT_FALSE(denied.allowed);
  ASSERT_EQ(denied, model.apply(kNoon + 1ms, 1));
  for (uint64_t i = 0; i < 10'000; ++i) {
    const Nanos now = kNoon + 2ms + std::chrono::microseconds(i);
    ASSERT_TRUE(acquire(store, limit, "flood:" + std::to_string(i), now, 10).allowed) << i;
    ASSERT_LE(store.size(), 1000u) << "after key " << i;
  }
  EXPECT_EQ(store.size(), 1000u);
  const Nanos after = kNoon + 1s;
  const Decision still = acquire(store, limit, "victim", after);
  EXPECT_FALSE(still.allowed);
  EXPECT_EQ(still, model.apply(after, 1));
}

// A key back to full is dropped: not while it still holds anything, and within
// a second once it is full (expiry is kept at one-second resolution).
TEST_P(EveryAlgorithmInMemory, CollectExpiredDropsAKeyOnceItIsBackToFull) {
  MemoryStore store;
  const Limit limit = quick_limit();
  const Nanos t0 = kNoon + 200ms;
  const Decision d = acquire(store, limit, "k", t0, 3);
  ASSERT_TRUE(d.allowed);
  ASSERT_GT(d.reset_after, 0ns);
  ASSERT_EQ(store.size(), 1u);
  EXPECT_EQ(store.collect_expired(t0 + d.reset_after - 1ns), 0u);
  EXPECT_EQ(store.size(), 1u);
  EXPECT_EQ(store.collect_expired(t0 + d.reset_after + 1s), 1u);
  EXPECT_EQ(store.size(), 0u);
  // Dropped or not, the key is full.
  EXPECT_EQ(acquire(store, limit, "k", t0 + d.reset_after + 1s, 10).remaining, 0u);
}

// A key whose state is full again behaves like a new key even before it is
// collected: the state is never read past its expiry.
TEST_P(EveryAlgorithmInMemory, AnIdleKeyAnswersLikeANewOne) {
  MemoryStore store;
  MemoryStore fresh;
  const Limit limit = quick_limit();
  ASSERT_TRUE(acquire(store, limit, "k", kNoon, 10).allowed);
  const Nanos later = kNoon + 1h;
  EXPECT_EQ(acquire(store, limit, "k", later, 4), acquire(fresh, limit, "k", later, 4));
  EXPECT_EQ(acquire(store, limit, "k", later, 7), acquire(fresh, limit, "k", later, 7));
}

INSTANTIATE_TEST_SUITE_P(AllAlgorithms, EveryAlgorithmInMemory, testing::rate_algorithms(),
                         testing::algorithm_test_name);

// A server holds the store as a Store: it reads the backend's name from it
// and gives it its upkeep through maintain(), which collects what is full.
TEST(MemoryStore, ThroughTheStoreInterfaceItIsNamedAndMaintainCollects) {
  MemoryStore memory;
  Store& store = memory;
  EXPECT_EQ(store.backend(), "memory");
  const Limit fast = must(Limit::token_bucket(10, 10, 1s));
  const Limit slow = must(Limit::token_bucket(10, 1, 1h));
  ASSERT_TRUE(acquire(memory, fast, "k", kNoon).allowed);
  ASSERT_TRUE(acquire(memory, slow, "k", kNoon).allowed);
  store.maintain(kNoon);
  EXPECT_EQ(store.size(), 2u);
  store.maintain(kNoon + 2s);
  EXPECT_EQ(store.size(), 1u);
  EXPECT_EQ(acquire(memory, slow, "k", kNoon + 2s), allowed(10, 8, 2h - 2s));
}

// A store of the embedding program's own that says nothing is "other", and
// its upkeep is nothing: maintain() leaves every state where it was.
TEST(MemoryStore, AStoreThatDoesNotSayIsOtherAndKeepsItsStatesOnMaintain) {
  class Wrapped final : public Store {
   public:
    Status acquire(std::span<const AcquireRequest> requests, Nanos now,
                   std::span<Decision> out) override {
      return inner.acquire(requests, now, out);
    }
    Result<bool> reset(const Limit& limit, std::string_view key) override {
      return inner.reset(limit, key);
    }
    size_t size() const override { return inner.size(); }
    MemoryStore inner;
  };
  Wrapped wrapped;
  Store& store = wrapped;
  EXPECT_EQ(store.backend(), "other");
  const Limit fast = must(Limit::token_bucket(10, 10, 1s));
  ASSERT_TRUE(acquire(wrapped.inner, fast, "k", kNoon).allowed);
  store.maintain(kNoon + 1h);
  EXPECT_EQ(store.size(), 1u);
}

TEST(MemoryStore, CollectExpiredKeepsKeysThatStillHoldSomething) {
  MemoryStore store;
  const Limit fast = must(Limit::token_bucket(10, 10, 1s));
  const Limit slow = must(Limit::token_bucket(10, 1, 1h));
  ASSERT_TRUE(acquire(store, fast, "k", kNoon).allowed);
  ASSERT_TRUE(acquire(store, slow, "k", kNoon).allowed);
  EXPECT_EQ(store.collect_expired(kNoon + 2s), 1u);
  EXPECT_EQ(store.size(), 1u);
  EXPECT_EQ(acquire(store, slow, "k", kNoon + 2s), allowed(10, 8, 2h - 2s));
}

// Past 2106-02-07 (the last second 32 bits of expiry hold) a state is kept
// and counts: expiry seconds saturate there, and comparing saturated seconds
// once called every state expired, so the store limited nothing. Found by
// fuzz/memory_store.cc (remaining grew at one instant after collect_expired).
TEST(MemoryStore, StatesStillCountAfterTheYear2106) {
  MemoryStore store;
  const Limit limit = must(Limit::token_bucket(2, 1, 1h));
  const Nanos t = std::chrono::seconds(uint64_t{1} << 32) + 1h;  // 2106-02-07 07:28:16 UTC
  EXPECT_EQ(acquire(store, limit, "k", t, 2), allowed(2, 0, 2h));
  EXPECT_FALSE(acquire(store, limit, "k", t).allowed);
  EXPECT_EQ(store.collect_expired(t), 0u);
  EXPECT_EQ(store.size(), 1u);
  EXPECT_FALSE(acquire(store, limit, "k", t).allowed);
}

TEST(MemoryStore, FullStatesGiveWayToNewKeys) {
  // One shard of 64: fill it, let every key become full again, then 64 new keys.
  MemoryStore store(testing::store_options(64, 1));
  const Limit limit = must(Limit::token_bucket(10, 10, 1s));
  for (int i = 0; i < 64; ++i)
    ASSERT_TRUE(acquire(store, limit, "old" + std::to_string(i), kNoon).allowed);
  ASSERT_EQ(store.size(), 64u);
  for (int i = 0; i < 64; ++i) {
    ASSERT_TRUE(acquire(store, limit, "new" + std::to_string(i), kNoon + 1h).allowed);
    ASSERT_LE(store.size(), 64u);
  }
}

TEST(MemoryStore, MaxKeysIsAtLeastOne) {
  MemoryStore store(testing::store_options(0));
  const Limit limit = must(Limit::token_bucket(10, 1, 1h));
  EXPECT_EQ(store.max_keys(), 1u);
  ASSERT_TRUE(acquire(store, limit, "a", kNoon).allowed);
  ASSERT_TRUE(acquire(store, limit, "b", kNoon).allowed);
  EXPECT_EQ(store.size(), 1u);
}

TEST(MemoryStore, SlidingLogEntriesAreCountedAndReleased) {
  MemoryStore store(testing::store_options(1'000'000, 1));
  const Limit bucket_limit = must(Limit::token_bucket(10, 1, 1s));
  const Limit log_limit = must(Limit::sliding_log(1000, 1h));
  ASSERT_TRUE(acquire(store, bucket_limit, "k", kNoon).allowed);  // allocates the table
  const size_t before = store.memory_bytes();
  for (int i = 0; i < 100; ++i)
    ASSERT_TRUE(acquire(store, log_limit, "k", kNoon + 1ms * i).allowed);
  // 100 entries at distinct instants, 16 bytes each at least.
  EXPECT_GE(store.memory_bytes(), before + 100 * 16);
  EXPECT_TRUE(must(store.reset(log_limit, "k")));
  EXPECT_EQ(store.memory_bytes(), before);
}

// Which state eviction gives up, exactly: a store of one shard small enough
// to be scanned whole. In each test LRU would pick another victim, except
// where a comment says it agrees. reset() tells whether a state is held.
class Eviction : public ::testing::Test {
 protected:
  // Full again 1 s after being emptied; cost 1 is full again after 500 ms.
  const Limit short_ = must(Limit::token_bucket(2, 2, 1s));
  // One token back every 36 s.
  const Limit long_ = must(Limit::token_bucket(100, 100, 1h));
  // One token back every minute.
  const Limit minute_ = must(Limit::token_bucket(10, 1, 1min));

  static bool held(MemoryStore& store, const Limit& limit, std::string_view key) {
    return must(store.reset(limit, key));
  }
};

// Expired before anything else, even a state that was denying (an expired
// state is full: dropping it changes no decision). Not new: the sampled LRU
// took an expired slot at once too, and the sweep may drop it first.
TEST_F(Eviction, AnExpiredStateGoesFirstEvenIfItWasDenying) {
  MemoryStore store(testing::store_options(2, 1));
  ASSERT_TRUE(acquire(store, long_, "partly", kNoon).allowed);  // full at +36 s
  ASSERT_TRUE(acquire(store, short_, "spent", kNoon + 1ms, 2).allowed);
  ASSERT_FALSE(acquire(store, short_, "spent", kNoon + 2ms).allowed);  // full at +2 s
  ASSERT_TRUE(acquire(store, long_, "new", kNoon + 3s).allowed);
  EXPECT_EQ(store.size(), 2u);
  EXPECT_FALSE(held(store, short_, "spent"));
  EXPECT_TRUE(held(store, long_, "partly"));
  EXPECT_TRUE(held(store, long_, "new"));
}

// Among partly used states, the one full again soonest, though it is the most
// recently used.
TEST_F(Eviction, ThePartlyUsedStateNearestFullGoesFirst) {
  MemoryStore store(testing::store_options(3, 1));
  ASSERT_TRUE(acquire(store, minute_, "far", kNoon, 5).allowed);        // full at +5 min
  ASSERT_TRUE(acquire(store, minute_, "mid", kNoon + 1ms, 3).allowed);  // +3 min 1 s
  ASSERT_TRUE(acquire(store, minute_, "near", kNoon + 2ms).allowed);    // +1 min 1 s
  ASSERT_TRUE(acquire(store, minute_, "new", kNoon + 3ms, 2).allowed);  // +2 min 1 s
  EXPECT_EQ(store.size(), 3u);
  EXPECT_FALSE(held(store, minute_, "near"));
  EXPECT_TRUE(held(store, minute_, "far"));
  EXPECT_TRUE(held(store, minute_, "mid"));
  EXPECT_TRUE(held(store, minute_, "new"));
}

// Expiry has one-second resolution: states full again within the same second
// are equals, and the least recently used of them goes (as under LRU).
TEST_F(Eviction, AmongEqualExpiriesTheLeastRecentlyUsedGoes) {
  MemoryStore store(testing::store_options(2, 1));
  ASSERT_TRUE(acquire(store, minute_, "first", kNoon + 100ms).allowed);   // full at +61 s
  ASSERT_TRUE(acquire(store, minute_, "second", kNoon + 200ms).allowed);  // full at +61 s
  ASSERT_TRUE(acquire(store, minute_, "new", kNoon + 300ms).allowed);
  EXPECT_FALSE(held(store, minute_, "first"));
  EXPECT_TRUE(held(store, minute_, "second"));
  EXPECT_TRUE(held(store, minute_, "new"));
}

// A denying state outlasts a partly used one that is further from full and
// more recently used: by expiry or by LRU it would go first.
TEST_F(Eviction, ADenyingStateGoesLast) {
  MemoryStore store(testing::store_options(2, 1));
  Model model(short_);
  ASSERT_EQ(acquire(store, short_, "denied", kNoon, 2), model.apply(kNoon, 2));  // full at +1 s
  const Decision denied = acquire(store, short_, "denied", kNoon + 1ms);
  ASSERT_FALSE(denied.allowed);
  ASSERT_EQ(denied, model.apply(kNoon + 1ms, 1));
  ASSERT_TRUE(acquire(store, long_, "partly", kNoon + 2ms).allowed);  // full at +37 s
  ASSERT_TRUE(acquire(store, long_, "new", kNoon + 3ms).allowed);
  EXPECT_EQ(store.size(), 2u);
  EXPECT_FALSE(held(store, long_, "partly"));
  EXPECT_EQ(acquire(store, short_, "denied", kNoon + 4ms), model.apply(kNoon + 4ms, 1));
  EXPECT_TRUE(held(store, long_, "new"));
}

// When every state denies, one still gives way (the bound holds): the one full
// again soonest, though LRU would pick the other.
TEST_F(Eviction, WhenEveryStateDeniesTheOneNearestFullGoes) {
  MemoryStore store(testing::store_options(2, 1));
  const Limit hourly = must(Limit::token_bucket(2, 2, 1h));
  Model model(hourly);
  ASSERT_EQ(acquire(store, hourly, "hour", kNoon, 2), model.apply(kNoon, 2));  // full at +1 h
  ASSERT_EQ(acquire(store, hourly, "hour", kNoon + 1ms), model.apply(kNoon + 1ms, 1));
  ASSERT_TRUE(acquire(store, short_, "second", kNoon + 2ms, 2).allowed);  // full at +2 s
  ASSERT_FALSE(acquire(store, short_, "second", kNoon + 3ms).allowed);
  ASSERT_TRUE(acquire(store, long_, "new", kNoon + 4ms).allowed);
  EXPECT_EQ(store.size(), 2u);
  EXPECT_FALSE(held(store, short_, "second"));
  const Decision hour = acquire(store, hourly, "hour", kNoon + 5ms);
  EXPECT_FALSE(hour.allowed);
  EXPECT_EQ(hour, model.apply(kNoon + 5ms, 1));
}

// The mark goes when the key's limit allows again: the state is then an
// ordinary partly used one, nearest full here, and goes first.
TEST_F(Eviction, AStateThatAllowsAgainIsNoLongerKept) {
  MemoryStore store(testing::store_options(2, 1));
  ASSERT_TRUE(acquire(store, short_, "recovered", kNoon, 2).allowed);
  ASSERT_FALSE(acquire(store, short_, "recovered", kNoon + 1ms).allowed);
  ASSERT_TRUE(acquire(store, long_, "other", kNoon + 500ms).allowed);  // full at +37 s
  // 1.2 tokens back: allowed, 0.2 left, full at +2 s.
  ASSERT_TRUE(acquire(store, short_, "recovered", kNoon + 600ms).allowed);
  ASSERT_TRUE(acquire(store, long_, "new", kNoon + 700ms).allowed);
  EXPECT_FALSE(held(store, short_, "recovered"));
  EXPECT_TRUE(held(store, long_, "other"));
  EXPECT_TRUE(held(store, long_, "new"));
}

// In a request of several limits, each limit's slot is marked by its own
// answer: the limit that denied is kept, the one that allowed (though the
// request was denied, so it was not charged) is not. LRU would drop the
// denying one, touched first in the batch.
TEST_F(Eviction, InABatchTheLimitThatDeniedIsKept) {
  MemoryStore store(testing::store_options(2, 1));
  Model model(short_);
  const auto batch = [&](uint64_t cost, Nanos now) {
    const AcquireRequest requests[] = {{&short_, "k", cost}, {&long_, "k", cost}};
    Decision out[2];
    EXPECT_TRUE(store.acquire(requests, now, out).ok());
    return std::pair{out[0], out[1]};
  };
  const auto [first_short, first_long] = batch(2, kNoon);
  ASSERT_TRUE(first_short.allowed && first_long.allowed);
  model.apply(kNoon, 2);  // full at +1 s; the long one at +72 s
  const auto [second_short, second_long] = batch(1, kNoon + 1ms);
  ASSERT_FALSE(second_short.allowed);
  ASSERT_TRUE(second_long.allowed);
  model.apply(kNoon + 1ms, 1);
  ASSERT_TRUE(acquire(store, long_, "new", kNoon + 2ms).allowed);
  EXPECT_FALSE(held(store, long_, "k"));
  EXPECT_EQ(acquire(store, short_, "k", kNoon + 3ms), model.apply(kNoon + 3ms, 1));
}

// A sliding_log key that denies is kept through a flood of other keys too,
// here under another limit whose states are all further from full (+1 h)
// than it (+61 s): only its denying mark keeps it.
TEST(MemoryStore, ADeniedSlidingLogKeyStaysDeniedThroughAFlood) {
  MemoryStore store(testing::store_options(1000));
  const Limit log_limit = must(Limit::sliding_log(3, 1min));
  const Limit flood_limit = must(Limit::token_bucket(10, 1, 1h));
  Model model(log_limit);
  for (int i = 0; i < 3; ++i) {
    const Nanos now = kNoon + 1ms * i;
    ASSERT_EQ(acquire(store, log_limit, "victim", now), model.apply(now, 1));
  }
  ASSERT_FALSE(acquire(store, log_limit, "victim", kNoon + 3ms).allowed);
  model.apply(kNoon + 3ms, 1);
  for (uint64_t i = 0; i < 10'000; ++i) {
    const Nanos now = kNoon + 4ms + std::chrono::microseconds(i);
    ASSERT_TRUE(acquire(store, flood_limit, "flood:" + std::to_string(i), now).allowed) << i;
    ASSERT_LE(store.size(), 1000u) << "after key " << i;
  }
  EXPECT_EQ(store.size(), 1000u);
  const Nanos after = kNoon + 30s;
  const Decision still = acquire(store, log_limit, "victim", after);
  EXPECT_FALSE(still.allowed);
  EXPECT_EQ(still, model.apply(after, 1));
}

// Many threads, many keys, a small bound: eviction and expiry race with
// lookups. The sanitizers watch for memory errors; the bound must hold.
TEST(MemoryStore, ConcurrentInsertsAndEvictionsKeepTheBound) {
  MemoryStore store(testing::store_options(256));
  const std::vector<Limit> limits = {must(Limit::sliding_log(5, 1s)),
                                     must(Limit::token_bucket(5, 1, 1s)),
                                     must(Limit::sliding_window(5, 1s))};
  constexpr int kThreads = 4;
  constexpr int kCalls = 20'000;
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  std::atomic<int> errors{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      for (int i = 0; i < kCalls; ++i) {
        const Limit& limit = limits[static_cast<size_t>(i % 3)];
        const std::string key = "k" + std::to_string((i * 7 + t) % 1000);
        const AcquireRequest r{&limit, key, 1};
        Decision out;
        if (!store.acquire({&r, 1}, kNoon + std::chrono::milliseconds(i / 10), {&out, 1}).ok())
          errors.fetch_add(1);
        if (i % 5000 == 0) store.collect_expired(kNoon + std::chrono::milliseconds(i / 10));
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_LE(store.size(), 256u);
}

}  // namespace
}  // namespace sluice
