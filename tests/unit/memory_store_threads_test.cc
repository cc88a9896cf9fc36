// MemoryStore under threads: what its locking must keep exact, whatever the
// lock's granularity (a lock per shard; the design measured in
// bench/results/2026-core.md, "A lock in the slots' own line", would lock per
// cache line of slots). Each
// test fixes `now`, so no state refills: every count is exact, not a bound.
// Run on the sanitizer build, they also watch for data races' damage (ASan)
// while tables grow and evict under deciding threads.
#include <gtest/gtest.h>

#include <atomic>
#include <latch>
#include <string>
#include <thread>
#include <vector>

#include "sluice/memory_store.h"
#include "test_util.h"

namespace sluice {
namespace {

using testing::bucket;
using testing::Days;
using testing::kNoon;
using testing::must;
using testing::window;

constexpr uint64_t kSize = 25;

// The limit of size kSize under algorithm a, not refilling within a test.
Limit limit_of(Algorithm a) {
  if (a == Algorithm::kTokenBucket || a == Algorithm::kGcra)
    return must(Limit::create(bucket(a, kSize, 1, testing::kNoRefillPeriod)));
  return must(Limit::create(window(a, kSize, Days(1))));
}

std::vector<std::string> keys(const std::string& prefix, size_t n) {
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) out.push_back(prefix + std::to_string(i));
  return out;
}

bool allows(MemoryStore& store, const Limit& limit, const std::string& key) {
  const AcquireRequest r{&limit, key, 1};
  Decision out;
  if (!store.acquire({&r, 1}, kNoon, {&out, 1}).ok()) throw std::runtime_error("acquire failed");
  return out.allowed;
}

// Runs body(t) on `threads` threads started together.
template <class Body>
void on_threads(int threads, Body body) {
  std::latch start(threads);
  std::vector<std::thread> running;
  for (int t = 0; t < threads; ++t) {
    running.emplace_back([&, t] {
      start.arrive_and_wait();
      body(t);
    });
  }
  for (std::thread& th : running) th.join();
}

// Each thread sweeps every key `rounds` times from its own starting point:
// the threads meet on every key. Returns how many decisions allowed, per key.
std::vector<int> admitted_by_threads(MemoryStore& store, const Limit& limit,
                                     const std::vector<std::string>& ks, int threads, int rounds) {
  std::vector<std::atomic<int>> admitted(ks.size());
  on_threads(threads, [&](int t) {
    const size_t n = ks.size();
    for (size_t step = 0; step < n * static_cast<size_t>(rounds); ++step) {
      const size_t k = (step + static_cast<size_t>(t) * n / static_cast<size_t>(threads)) % n;
      if (allows(store, limit, ks[k])) admitted[k].fetch_add(1, std::memory_order_relaxed);
    }
  });
  std::vector<int> out;
  for (const std::atomic<int>& a : admitted) out.push_back(a.load());
  return out;
}

class MemoryStoreThreads : public ::testing::TestWithParam<Algorithm> {};

// 4 threads, 10 attempts each per key: 40 against a size of 25. Exactly 25
// allowed per key, whichever thread asked.
TEST_P(MemoryStoreThreads, ThreadsOnSharedKeysAdmitExactlyTheSize) {
  MemoryStore store(testing::store_options(10'000));
  const Limit limit = limit_of(GetParam());
  const std::vector<std::string> ks = keys("shared:", 300);
  const std::vector<int> admitted = admitted_by_threads(store, limit, ks, 4, 10);
  for (size_t k = 0; k < ks.size(); ++k) EXPECT_EQ(admitted[k], int{kSize}) << ks[k];
  EXPECT_EQ(store.size(), ks.size());
}

// Tables start at 16 slots and grow (every shard several times) while other
// threads decide on keys already held: the keys held before keep their
// counts exactly, every new key is allowed once, and nothing is lost (the
// bound leaves room for every key: no eviction).
TEST_P(MemoryStoreThreads, TablesGrowWhileOtherThreadsDecide) {
  MemoryStore store(testing::store_options(200'000, 16));
  const Limit limit = limit_of(GetParam());
  const std::vector<std::string> hot = keys("hot:", 64);
  for (const std::string& k : hot) ASSERT_TRUE(allows(store, limit, k));
  constexpr int kNewPerThread = 8'000;
  std::vector<std::atomic<int>> admitted(hot.size());
  std::atomic<int> new_denied{0};
  on_threads(4, [&](int t) {
    if (t < 2) {
      for (int round = 0; round < 20; ++round) {
        for (size_t k = 0; k < hot.size(); ++k) {
          if (allows(store, limit, hot[k])) admitted[k].fetch_add(1, std::memory_order_relaxed);
        }
      }
      return;
    }
    for (int i = 0; i < kNewPerThread; ++i) {
      if (!allows(store, limit, "new:" + std::to_string(t) + ":" + std::to_string(i)))
        new_denied.fetch_add(1);
    }
  });
  for (size_t k = 0; k < hot.size(); ++k) EXPECT_EQ(admitted[k].load(), int{kSize} - 1) << hot[k];
  EXPECT_EQ(new_denied.load(), 0);
  EXPECT_EQ(store.size(), hot.size() + 2 * kNewPerThread);
}

// A full store evicts on every new key while other threads keep asking for
// keys that already used their size: those deny, so eviction keeps them
// (a denying state goes only when a sample of 8 holds nothing else: here 4
// such keys among 256 per shard), and no thread ever sees one allow again.
TEST_P(MemoryStoreThreads, EvictionWhileOtherThreadsDecideKeepsEveryDenial) {
  MemoryStore store(testing::store_options(1024, 4));
  const Limit limit = limit_of(GetParam());
  const std::vector<std::string> hot = keys("hot:", 16);
  // Two threads race to use up the hot keys: exactly kSize each.
  const std::vector<int> used = admitted_by_threads(store, limit, hot, 2, int{kSize});
  for (size_t k = 0; k < hot.size(); ++k) ASSERT_EQ(used[k], int{kSize}) << hot[k];
  std::atomic<int> allowed_again{0};
  std::atomic<int> new_denied{0};
  on_threads(4, [&](int t) {
    if (t < 2) {
      for (int round = 0; round < 200; ++round) {
        for (const std::string& k : hot) {
          if (allows(store, limit, k)) allowed_again.fetch_add(1);
        }
      }
      return;
    }
    for (int i = 0; i < 10'000; ++i) {
      if (!allows(store, limit, "flood:" + std::to_string(t) + ":" + std::to_string(i)))
        new_denied.fetch_add(1);
    }
  });
  EXPECT_EQ(allowed_again.load(), 0);
  EXPECT_EQ(new_denied.load(), 0);
  EXPECT_EQ(store.size(), 1024u);
}

// Requests of two limits on one key (a batch: locks taken in shard order,
// charged all or none) from 4 threads: the smaller limit admits exactly its
// size, and the larger one was charged exactly as often, no more.
TEST(MemoryStoreThreadsBatch, AllOrNothingHoldsAcrossThreads) {
  MemoryStore store(testing::store_options(10'000));
  const Limit small = limit_of(Algorithm::kTokenBucket);
  const Limit large = must(Limit::token_bucket(40, 1, testing::kNoRefillPeriod));
  const std::vector<std::string> ks = keys("batch:", 100);
  std::vector<std::atomic<int>> admitted(ks.size());
  on_threads(4, [&](int t) {
    for (int round = 0; round < 10; ++round) {
      for (size_t i = 0; i < ks.size(); ++i) {
        const size_t k = (i + static_cast<size_t>(t) * 25) % ks.size();
        const AcquireRequest rs[] = {{&large, ks[k], 1}, {&small, ks[k], 1}};
        Decision out[2];
        if (!store.acquire(rs, kNoon, out).ok()) throw std::runtime_error("acquire failed");
        if (out[0].allowed && out[1].allowed) admitted[k].fetch_add(1);
      }
    }
  });
  for (size_t k = 0; k < ks.size(); ++k) {
    EXPECT_EQ(admitted[k].load(), int{kSize}) << ks[k];
    // 40 - 25 left in the larger limit: exactly 15 more, alone.
    int more = 0;
    while (allows(store, large, ks[k])) ++more;
    EXPECT_EQ(more, 15) << ks[k];
  }
}

INSTANTIATE_TEST_SUITE_P(AllAlgorithms, MemoryStoreThreads, testing::rate_algorithms(),
                         testing::algorithm_test_name);

}  // namespace
}  // namespace sluice
