// Limiter::try_acquire with one token_bucket limit: the public API's cost per
// decision, with a cheap simulated clock and with SystemClock.
#include <benchmark/benchmark.h>

#include <string>

#include "bench_env.h"

namespace sluice::bench {
namespace {

// The Clock interface over this thread's SimClock: reading it costs a
// thread-local step (and one shared atomic add per block of steps).
thread_local SimClock* tl_sim = nullptr;

class CounterClock final : public Clock {
 public:
  Nanos now() const override { return Nanos{tl_sim->next()}; }
};

void BM_LimiterTryAcquire(benchmark::State& state, size_t key_count, ClockKind clock) {
  static const CounterClock counter_clock;
  Env& e = env(Algorithm::kTokenBucket, key_count, clock);
  const Clock& c = clock == ClockKind::kSystem ? static_cast<const Clock&>(SystemClock::instance())
                                               : counter_clock;
  Limiter limiter(e.store, {e.limit}, c);
  const std::vector<std::string>& keys = *e.keys;
  const size_t n = keys.size();
  size_t i = first_key(state, n);
  SimClock sim(e.now_ns);
  tl_sim = &sim;
  int64_t allowed = 0;
  for (auto _ : state) {
    Result<Decision> d = limiter.try_acquire(keys[i]);
    if (++i == n) i = 0;
    allowed += d.ok() && d->allowed;
  }
  tl_sim = nullptr;
  report(state, e, allowed);
}

const bool kRegistered = [] {
  for (size_t key_count : kKeyCounts) {
    const std::string name = "limiter/token_bucket/keys:" + std::to_string(key_count);
    configure(benchmark::RegisterBenchmark(name.c_str(), BM_LimiterTryAcquire, key_count,
                                           ClockKind::kSimulated),
              {1, 2});
  }
  configure(benchmark::RegisterBenchmark("limiter/token_bucket/keys:10000/system_clock",
                                         BM_LimiterTryAcquire, size_t{10'000}, ClockKind::kSystem),
            {1, 2});
  return true;
}();

}  // namespace
}  // namespace sluice::bench
