// The floor under MemoryStore: a plain std::unordered_map<std::string,
// TokenBucketState> doing the same token_bucket arithmetic (core::token_bucket)
// on the same keys, walked in the same shuffled order with the same simulated
// clock, on one thread and without a lock. What a decision costs with nothing
// of the store around it (no shards, no lock, no bounded memory, no eviction,
// no lockouts): store/token_bucket against floor/token_bucket, same run, is
// what the store adds (docs/BENCHMARKS.md).
#include <benchmark/benchmark.h>

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "bench_env.h"
#include "core/token_bucket.h"

namespace sluice::bench {
namespace {

struct FloorEnv {
  explicit FloorEnv(size_t n) : key_count(n), limit(bench_limit(Algorithm::kTokenBucket)) {
    keys = &bench::keys(n);
    states.reserve(n);
    // Every key held before timing starts, as in Env: one decision each.
    int64_t now = kStartNs;
    for (const std::string& key : *keys) {
      const core::TokenBucketState fresh = core::token_bucket_fresh(limit, Nanos{now});
      states.emplace(key, core::token_bucket(limit, fresh, Nanos{now}, 1).next);
      now += kStepNs;
    }
    now_ns.store(now);
  }

  size_t key_count;
  Limit limit;
  const std::vector<std::string>* keys;
  std::unordered_map<std::string, core::TokenBucketState> states;
  std::atomic<int64_t> now_ns{kStartNs};
};

FloorEnv& floor_env(size_t key_count) {
  static std::mutex mu;
  static std::unique_ptr<FloorEnv> current;
  std::lock_guard<std::mutex> guard(mu);
  if (!current || current->key_count != key_count) {
    current.reset();
    current = std::make_unique<FloorEnv>(key_count);
  }
  return *current;
}

void BM_FloorTokenBucket(benchmark::State& state, size_t key_count) {
  FloorEnv& e = floor_env(key_count);
  const std::vector<std::string>& keys = *e.keys;
  size_t i = 0;
  SimClock sim(e.now_ns);
  int64_t allowed = 0;
  for (auto _ : state) {
    const std::string& key = keys[i];
    if (++i == keys.size()) i = 0;
    const Nanos now{sim.next()};
    auto it = e.states.find(key);
    if (it == e.states.end())
      it = e.states.emplace(key, core::token_bucket_fresh(e.limit, now)).first;
    const core::TokenBucketStep step = core::token_bucket(e.limit, it->second, now, 1);
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
  return true;
}();

}  // namespace
}  // namespace sluice::bench
