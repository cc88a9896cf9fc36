// MemoryStore: what the embedded store adds to the Store contract (the
// contract itself is in store_conformance_test.cc): the max_keys bound with
// LRU eviction, idle expiry, memory accounting, concurrency safety.
#include "sluice/memory_store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <latch>
#include <string>
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

INSTANTIATE_TEST_SUITE_P(AllAlgorithms, EveryAlgorithmInMemory,
                         ::testing::Values(Algorithm::kTokenBucket, Algorithm::kGcra,
                                           Algorithm::kFixedWindow, Algorithm::kSlidingLog,
                                           Algorithm::kSlidingWindow),
                         [](const ::testing::TestParamInfo<Algorithm>& info) {
                           return std::string(algorithm_name(info.param));
                         });

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
