// Shared set-up for the core benchmarks: pre-generated keys, and one
// pre-filled MemoryStore per configuration, shared by the benchmark's threads.
//
// Time is simulated (SimClock): every decision, of any thread, moves time on by
// kStepNs, so the benchmarks measure the store, not clock_gettime (one variant
// uses SystemClock to show what it costs).
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "sluice/sluice.h"

namespace sluice::bench {

using namespace std::chrono_literals;

// Simulated time per decision: 1,000,000 decisions per simulated second. With limits of 1000 per
// second, one key is mostly denied (a hot key), while 10,000 and 1,000,000 keys are allowed (many
// ordinary clients).
inline constexpr int64_t kStepNs = 1'000;
// 2023-11-14: a realistic epoch time, so window and expiry arithmetic see
// real magnitudes.
inline constexpr int64_t kStartNs = 1'700'000'000'000'000'000;

// `lease`: concurrency's (60 s unless a row asks for another).
inline Limit bench_limit(Algorithm algorithm, Nanos lease = 60s) {
  LimitSpec spec;
  spec.algorithm = algorithm;
  if (algorithm == Algorithm::kTokenBucket || algorithm == Algorithm::kGcra) {
    spec.capacity = 1000;
    spec.refill_tokens = 1000;
    spec.refill_period = 1s;
  } else if (algorithm == Algorithm::kConcurrency) {
    spec.limit = 1000;  // max 1000 in flight
    spec.window = lease;
  } else {
    spec.limit = 1000;
    spec.window = 1s;
  }
  Result<Limit> limit = Limit::create(spec);
  if (!limit.ok()) {
    std::fprintf(stderr, "bench limit: %s\n", limit.error().message.c_str());
    std::abort();
  }
  return *limit;
}

// n distinct keys "user:0000042", shuffled with a fixed seed. Cached: the
// million-key set is built once per process.
inline const std::vector<std::string>& keys(size_t n) {
  static std::mutex mu;
  static std::vector<std::pair<size_t, std::unique_ptr<std::vector<std::string>>>> cache;
  std::lock_guard<std::mutex> guard(mu);
  for (auto& [size, set] : cache) {
    if (size == n) return *set;
  }
  auto set = std::make_unique<std::vector<std::string>>();
  set->reserve(n);
  char buf[32];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof buf, "user:%07zu", i);
    set->emplace_back(buf);
  }
  std::mt19937_64 rng(42);
  std::shuffle(set->begin(), set->end(), rng);
  cache.emplace_back(n, std::move(set));
  return *cache.back().second;
}

enum class ClockKind { kSimulated, kSystem };

struct Env {
  Algorithm algorithm;
  size_t key_count;
  ClockKind clock;
  Nanos lease;
  Limit limit;
  std::shared_ptr<MemoryStore> store;
  const std::vector<std::string>* keys;
  // The simulated clock (SimClock), on a line of its own: threads add to it
  // once per block while the fields above are read on every decision.
  alignas(64) std::atomic<int64_t> now_ns{kStartNs};

  Env(Algorithm a, size_t n, ClockKind c, Nanos l)
      : algorithm(a), key_count(n), clock(c), lease(l), limit(bench_limit(a, l)) {
    keys = &bench::keys(n);
    MemoryStoreOptions options;
    // Room for every key with a margin for uneven shards, so nothing is
    // evicted during the run (eviction is not what is measured here).
    options.max_keys = std::max<size_t>(options.max_keys, n + n / 4);
    store = std::make_shared<MemoryStore>(options);
    // Every key is held before timing starts. On the system clock all at one
    // instant, so that no state lies ahead of the clock when timing starts.
    const bool system = c == ClockKind::kSystem;
    int64_t now = system ? SystemClock::instance().now().count() : kStartNs;
    Decision out[1];
    for (const std::string& key : *keys) {
      AcquireRequest request{&limit, key, 1};
      if (!store->acquire({&request, 1}, Nanos{now}, out).ok()) std::abort();
      if (!system) now += kStepNs;
    }
    now_ns.store(now);
  }
};

// A thread's view of an environment's simulated clock. Each thread takes
// blocks of kBlockSteps steps from the shared clock (one atomic add per
// block, not per decision: the shared line moves between cores once per
// 4,096 decisions, so the benchmark shares nothing else between threads
// than the store) and steps through its block locally. So time only
// moves forward for each thread, no two decisions share an instant, all
// threads together advance time by kStepNs per decision, and two threads are
// never more than about a block apart (4 ms of simulated time, small beside
// the limits' 1 s: algorithms see no large backward jumps).
class SimClock {
 public:
  static constexpr int64_t kBlockSteps = 4096;

  explicit SimClock(std::atomic<int64_t>& shared) : shared_(shared) {}

  int64_t next() {
    if (now_ == end_) {
      now_ = shared_.fetch_add(kBlockSteps * kStepNs, std::memory_order_relaxed);
      end_ = now_ + kBlockSteps * kStepNs;
    }
    now_ += kStepNs;
    return now_;
  }

 private:
  std::atomic<int64_t>& shared_;
  int64_t now_ = 0;
  int64_t end_ = 0;
};

// The environment of (algorithm, keys, clock). Only the most recent one is
// kept: benchmarks of one configuration run one after the other, and the
// previous environment's runs are over by the time another is asked for.
inline Env& env(Algorithm algorithm, size_t key_count, ClockKind clock, Nanos lease = 60s) {
  static std::mutex mu;
  static std::unique_ptr<Env> current;
  std::lock_guard<std::mutex> guard(mu);
  if (!current || current->algorithm != algorithm || current->key_count != key_count ||
      current->clock != clock || current->lease != lease) {
    current.reset();
    current = std::make_unique<Env>(algorithm, key_count, clock, lease);
  }
  return *current;
}

// The first key of thread t: threads start far apart in the key sequence, so
// two threads contend on one key only in the one-key runs.
inline size_t first_key(const benchmark::State& state, size_t key_count) {
  return static_cast<size_t>(state.thread_index()) * key_count /
         static_cast<size_t>(state.threads());
}

// Counters every store benchmark reports. `allowed` is the fraction of
// decisions that allowed (summed over threads, divided by all iterations).
inline void report(benchmark::State& state, Env& e, int64_t allowed) {
  state.SetItemsProcessed(state.iterations());
  state.counters["allowed"] =
      benchmark::Counter(static_cast<double>(allowed), benchmark::Counter::kAvgIterations);
  if (state.thread_index() == 0) {
    const size_t held = e.store->size();
    state.counters["keys_held"] = static_cast<double>(held);
    state.counters["bytes_per_key"] =
        held == 0 ? 0.0 : static_cast<double>(e.store->memory_bytes()) / static_cast<double>(held);
  }
}

// The fastest of the repetitions, reported beside the median: on a machine
// shared with other work, the minimum is the least disturbed run.
inline double min_of(const std::vector<double>& v) {
  return v.empty() ? 0.0 : *std::min_element(v.begin(), v.end());
}

// Wall time (so that a two-thread run reports time per decision of both
// threads together), the given thread counts, and the min statistic.
inline void configure(benchmark::internal::Benchmark* b, std::initializer_list<int> threads) {
  for (int t : threads) b->Threads(t);
  b->UseRealTime()->ComputeStatistics("min", min_of);
}

inline constexpr Algorithm kAlgorithms[] = {Algorithm::kTokenBucket, Algorithm::kGcra,
                                            Algorithm::kFixedWindow, Algorithm::kSlidingLog,
                                            Algorithm::kSlidingWindow};
inline constexpr size_t kKeyCounts[] = {1, 10'000, 1'000'000};

}  // namespace sluice::bench
