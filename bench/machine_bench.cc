// What this machine charges for a second thread when nothing of Sluice is
// involved, beside the store's and the floor's two-thread rows
// (bench/results/2026-core.md, "Two threads: the machine or the store").
//
// machine/private_rmw/kib:N: each thread updates 16 bytes of a random entry
// of its own N KiB array of 64-byte entries (a shuffled walk, like a
// decision's state update), nothing shared: two threads cost the same CPU
// per update as one while N fits in a core's L2, and more once the two
// arrays together spill the L3 they share. (Moving a written line between
// the two cores, what a lock both threads take pays, is not a row here: a
// ping-pong waits out the scheduler whenever one of its threads is off its
// vCPU, so on a loaded machine it runs for minutes.)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench_env.h"

namespace sluice::bench {
namespace {

struct alignas(64) Entry {
  int64_t tokens;
  int64_t last;
};

void BM_PrivateRmw(benchmark::State& state, size_t kib) {
  const size_t n = kib * 1024 / sizeof(Entry);
  std::vector<Entry> entries(n, Entry{0, 0});
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::mt19937_64 rng(42 + static_cast<uint64_t>(state.thread_index()));
  std::shuffle(order.begin(), order.end(), rng);
  for (uint32_t k : order) entries[k].last = 1;  // resident before timing
  size_t i = 0;
  int64_t now = 1;
  for (auto _ : state) {
    Entry& e = entries[order[i]];
    if (++i == n) i = 0;
    ++now;
    const int64_t tokens = std::min<int64_t>(e.tokens + (now - e.last), 1000);
    e.tokens = tokens - 1;
    e.last = now;
  }
  benchmark::DoNotOptimize(entries.data());
  state.SetItemsProcessed(state.iterations());
}

const bool kRegistered = [] {
  for (size_t kib : {size_t{256}, size_t{1024}, size_t{4096}, size_t{16384}}) {
    const std::string name = "machine/private_rmw/kib:" + std::to_string(kib);
    configure(benchmark::RegisterBenchmark(name.c_str(), BM_PrivateRmw, kib), {1, 2});
  }
  return true;
}();

}  // namespace
}  // namespace sluice::bench
