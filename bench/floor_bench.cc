// The floor under MemoryStore: a plain std::unordered_map<std::string,
// TokenBucketState> doing the same token_bucket arithmetic (core::token_bucket)
// on the same keys, walked in the same shuffled order with a simulated clock,
// without a lock. What a decision costs with nothing of the store around it
// (no shards, no lock, no bounded memory, no eviction, no lockouts):
// store/token_bucket against floor/token_bucket, same run, is what the store
// adds (docs/BENCHMARKS.md).
//
// floor/token_bucket/keys:N/own_keys, on two threads, splits the N keys as
// store/token_bucket/keys:N/own_keys does (thread t walks its own N/2), but
// each thread has its own map and its own clock: nothing at all is shared or
// written in common, so its cost per decision against the one-thread row is
// what this machine charges for running two threads, with no store involved.
#include <benchmark/benchmark.h>

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "bench_env.h"
#include "core/token_bucket.h"

namespace sluice::bench {
namespace {

// One thread's keys, states and clock. Aligned so that the clock, written
// once per block of decisions, shares no line with another thread's.
struct alignas(64) FloorThread {
  FloorThread(const std::string* first, size_t n, const Limit& limit) : keys(first), count(n) {
    states.reserve(n);
    // Every key held before timing starts, as in Env: one decision each.
    int64_t now = kStartNs;
    for (size_t i = 0; i < n; ++i) {
      const core::TokenBucketState fresh = core::token_bucket_fresh(limit, Nanos{now});
      states.emplace(keys[i], core::token_bucket(limit, fresh, Nanos{now}, 1).next);
      now += kStepNs;
    }
    now_ns.store(now);
  }

  const std::string* keys;
  size_t count;
  std::unordered_map<std::string, core::TokenBucketState> states;
  std::atomic<int64_t> now_ns{kStartNs};
};

// The keys split into `threads` slices, one FloorThread each (built one
// after the other, so that each map's nodes lie together, not interleaved
// with another thread's on shared lines).
struct FloorEnv {
  FloorEnv(size_t n, int threads)
      : key_count(n), thread_count(threads), limit(bench_limit(Algorithm::kTokenBucket)) {
    const std::vector<std::string>& all = bench::keys(n);
    const size_t per_thread = n / static_cast<size_t>(threads);
    for (int t = 0; t < threads; ++t) {
      per.push_back(std::make_unique<FloorThread>(all.data() + static_cast<size_t>(t) * per_thread,
                                                  per_thread, limit));
    }
  }

  size_t key_count;
  int thread_count;
  Limit limit;
  std::vector<std::unique_ptr<FloorThread>> per;
};

FloorEnv& floor_env(size_t key_count, int threads) {
  static std::mutex mu;
  static std::unique_ptr<FloorEnv> current;
  std::lock_guard<std::mutex> guard(mu);
  if (!current || current->key_count != key_count || current->thread_count != threads) {
    current.reset();
    current = std::make_unique<FloorEnv>(key_count, threads);
  }
  return *current;
}

void BM_FloorTokenBucket(benchmark::State& state, size_t key_count) {
  FloorEnv& e = floor_env(key_count, state.threads());
  FloorThread& mine = *e.per[static_cast<size_t>(state.thread_index())];
  const Limit& limit = e.limit;
  size_t i = 0;
  SimClock sim(mine.now_ns);
  int64_t allowed = 0;
  for (auto _ : state) {
    const std::string& key = mine.keys[i];
    if (++i == mine.count) i = 0;
    const Nanos now{sim.next()};
    auto it = mine.states.find(key);
    if (it == mine.states.end())
      it = mine.states.emplace(key, core::token_bucket_fresh(limit, now)).first;
    const core::TokenBucketStep step = core::token_bucket(limit, it->second, now, 1);
    if (step.decision.allowed) it->second = step.next;
    benchmark::DoNotOptimize(step.decision);
    allowed += step.decision.allowed;
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["allowed"] =
      benchmark::Counter(static_cast<double>(allowed), benchmark::Counter::kAvgIterations);
}

const bool kRegistered = [] {
  for (size_t key_count : kKeyCounts) {
    const std::string name = "floor/token_bucket/keys:" + std::to_string(key_count);
    configure(benchmark::RegisterBenchmark(name.c_str(), BM_FloorTokenBucket, key_count), {1});
  }
  // Two threads, each on its own half of the keys in its own map: beside
  // store/token_bucket/keys:N/own_keys, the same split with nothing shared.
  // keys:20000 gives each thread 10,000, the one-thread 10,000-key row's
  // working set: the same work per thread on one thread and on two.
  for (size_t key_count : {size_t{10'000}, size_t{20'000}, size_t{1'000'000}}) {
    const std::string name = "floor/token_bucket/keys:" + std::to_string(key_count) + "/own_keys";
    configure(benchmark::RegisterBenchmark(name.c_str(), BM_FloorTokenBucket, key_count), {2});
  }
  return true;
}();

}  // namespace
}  // namespace sluice::bench
