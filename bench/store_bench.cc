// MemoryStore::acquire: nanoseconds per decision for each algorithm on 1,
// 10,000 and 1,000,000 held keys, on one and two threads sharing one store;
// and one thread of new keys into a full store, each of which evicts.
//
// With UseRealTime, a two-thread run reports wall time divided by the
// decisions of both threads, so its ns/decision is the inverse of total
// throughput: half of the one-thread figure would be perfect scaling.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <string>

#include "bench_env.h"

namespace sluice::bench {
namespace {

// kShared: every thread cycles through all the keys (from different starting
// points), so a key's state moves between cores' caches, as when any thread
// may serve any client. kOwn: thread t uses only its own slice of the keys, as
// when each client's connection stays on one thread.
enum class KeyMode { kShared, kOwn };

void BM_StoreAcquire(benchmark::State& state, Algorithm algorithm, size_t key_count,
                     ClockKind clock, KeyMode mode, Nanos lease) {
  Env& e = env(algorithm, key_count, clock, lease);
  const std::vector<std::string>& all_keys = *e.keys;
  size_t begin = 0;
  size_t end = all_keys.size();
  if (mode == KeyMode::kOwn) {
    begin = first_key(state, all_keys.size());
    end = begin + all_keys.size() / static_cast<size_t>(state.threads());
  }
  const std::string* keys = all_keys.data() + begin;
  const size_t n = end - begin;
  size_t i = mode == KeyMode::kOwn ? 0 : first_key(state, n);
  SimClock sim(e.now_ns);
  int64_t allowed = 0;
  AcquireRequest request{&e.limit, {}, 1};
  Decision out[1];
  for (auto _ : state) {
    request.key = keys[i];
    if (++i == n) i = 0;
    const int64_t now =
        clock == ClockKind::kSystem ? SystemClock::instance().now().count() : sim.next();
    Status s = e.store->acquire({&request, 1}, Nanos{now}, out);
    benchmark::DoNotOptimize(s);
    allowed += out[0].allowed;
  }
  report(state, e, allowed);
}

// concurrency, a whole slot's life per iteration: acquire, then give it back
// (Store::refund at its decided_at), as the gateway does per request. Beside
// store/token_bucket's one acquire per decision on the same keys.
void BM_StoreConcurrencySlot(benchmark::State& state, size_t key_count) {
  Env& e = env(Algorithm::kConcurrency, key_count, ClockKind::kSimulated);
  const std::vector<std::string>& keys = *e.keys;
  size_t i = first_key(state, keys.size());
  SimClock sim(e.now_ns);
  int64_t allowed = 0;
  AcquireRequest request{&e.limit, {}, 1};
  RefundRequest back{&e.limit, {}, 1, Nanos{0}};
  Decision out[1];
  for (auto _ : state) {
    request.key = keys[i];
    if (++i == keys.size()) i = 0;
    const Nanos now{sim.next()};
    Status s = e.store->acquire({&request, 1}, now, out);
    benchmark::DoNotOptimize(s);
    allowed += out[0].allowed;
    back.key = request.key;
    back.charged_at = now;
    Status r = e.store->refund({&back, 1}, now);
    benchmark::DoNotOptimize(r);
  }
  report(state, e, allowed);
}

// A flood of new keys: max_keys 10,000, held from the start, and every
// decision a key the store does not hold (1,000,000 keys in turn), so every
// decision inserts and evicts. What choosing a victim costs; the rows above
// never evict.
void BM_StoreEvict(benchmark::State& state) {
  constexpr size_t kHeld = 10'000;
  const Limit limit = bench_limit(Algorithm::kTokenBucket);
  const std::vector<std::string>& all_keys = keys(1'000'000);
  MemoryStoreOptions options;
  options.max_keys = kHeld;
  MemoryStore store(options);
  int64_t now = kStartNs;
  AcquireRequest request{&limit, {}, 1};
  Decision out[1];
  size_t i = 0;
  for (; i < kHeld; ++i, now += kStepNs) {
    request.key = all_keys[i];
    if (!store.acquire({&request, 1}, Nanos{now}, out).ok()) std::abort();
  }
  int64_t allowed = 0;
  for (auto _ : state) {
    request.key = all_keys[i];
    if (++i == all_keys.size()) i = 0;
    now += kStepNs;
    Status s = store.acquire({&request, 1}, Nanos{now}, out);
    benchmark::DoNotOptimize(s);
    allowed += out[0].allowed;
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["allowed"] =
      benchmark::Counter(static_cast<double>(allowed), benchmark::Counter::kAvgIterations);
  state.counters["keys_held"] = static_cast<double>(store.size());
}

const bool kRegistered = [] {
  for (Algorithm algorithm : kAlgorithms) {
    for (size_t key_count : kKeyCounts) {
      const std::string name =
          "store/" + std::string(algorithm_name(algorithm)) + "/keys:" + std::to_string(key_count);
      configure(benchmark::RegisterBenchmark(name.c_str(), BM_StoreAcquire, algorithm, key_count,
                                             ClockKind::kSimulated, KeyMode::kShared, 60s),
                {1, 2});
    }
  }
  // concurrency, the decision alone: acquire, never given back. With a lease
  // of 1 us every slot has freed itself by the time its key comes round
  // again (1 us later on one key), so each decision finds one expired slot
  // and takes one: the acquire half of store/concurrency_slot, whose slots
  // would otherwise pile up to max.
  for (size_t key_count : kKeyCounts) {
    const std::string name = "store/concurrency/keys:" + std::to_string(key_count);
    configure(benchmark::RegisterBenchmark(name.c_str(), BM_StoreAcquire, Algorithm::kConcurrency,
                                           key_count, ClockKind::kSimulated, KeyMode::kShared,
                                           Nanos{1us}),
              {1, 2});
  }
  // Each thread on its own half of the keys: two-thread scaling when keys
  // do not move between cores.
  for (size_t key_count : {size_t{10'000}, size_t{1'000'000}}) {
    const std::string name = "store/token_bucket/keys:" + std::to_string(key_count) + "/own_keys";
    configure(benchmark::RegisterBenchmark(name.c_str(), BM_StoreAcquire, Algorithm::kTokenBucket,
                                           key_count, ClockKind::kSimulated, KeyMode::kOwn, 60s),
              {2});
  }
  // The same with SystemClock read per decision: what reading the clock costs.
  configure(benchmark::RegisterBenchmark("store/token_bucket/keys:10000/system_clock",
                                         BM_StoreAcquire, Algorithm::kTokenBucket, size_t{10'000},
                                         ClockKind::kSystem, KeyMode::kShared, 60s),
            {1, 2});
  configure(benchmark::RegisterBenchmark("store/token_bucket/evicting", BM_StoreEvict), {1});
  for (size_t key_count : kKeyCounts) {
    const std::string name = "store/concurrency_slot/keys:" + std::to_string(key_count);
    configure(benchmark::RegisterBenchmark(name.c_str(), BM_StoreConcurrencySlot, key_count),
              {1, 2});
  }
  return true;
}();

}  // namespace
}  // namespace sluice::bench
