// Metrics: counters, gauges and histograms rendered in the Prometheus text
// exposition format (version 0.0.4).
//
// The hot path only touches Counter::add() and Histogram::observe(): relaxed
// atomic increments on a cell chosen per thread, so worker threads never share
// a cache line and never take a lock. Series are created on the control plane
// (config load) through Registry, which hands out stable pointers; a request
// keeps the pointers of its route, so no per-request lookup by label string.
//
// Thread-safety: Counter and Histogram may be updated from any thread. Registry
// methods may be called from any thread (they take a mutex); pointers it returns
// stay valid for the registry's lifetime (series are never removed, so counters
// stay monotonic across config reloads).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sluice::observe {

// Cells per counter; threads are spread over them by a per-thread index.
inline constexpr size_t kCounterShards = 8;

// The calling thread's cell index in [0, kCounterShards).
size_t this_thread_shard();

class Counter {
 public:
  void add(uint64_t n = 1) {
    cells_[this_thread_shard()].value.fetch_add(n, std::memory_order_relaxed);
  }
  uint64_t value() const;

 private:
  struct alignas(64) Cell {
    std::atomic<uint64_t> value{0};
  };
  std::array<Cell, kCounterShards> cells_;
};

// A histogram of durations. Bucket bounds are upper bounds in nanoseconds;
// rendering converts them to seconds (Prometheus base units).
class Histogram {
 public:
  static constexpr size_t kMaxBuckets = 16;
  explicit Histogram(std::vector<uint64_t> upper_bounds_ns);

  void observe_ns(uint64_t ns);

  struct Snapshot {
    std::vector<uint64_t> upper_bounds_ns;
    std::vector<uint64_t> cumulative;  // one per bound, then +Inf
    uint64_t sum_ns = 0;
    uint64_t count = 0;
  };
  Snapshot snapshot() const;

 private:
  struct alignas(64) Shard {
    std::array<std::atomic<uint64_t>, kMaxBuckets + 1> buckets{};
    std::atomic<uint64_t> sum_ns{0};
  };
  std::vector<uint64_t> bounds_;
  std::array<Shard, kCounterShards> shards_;
};

using Labels = std::vector<std::pair<std::string, std::string>>;

class Registry {
 public:
  // The counter of family `name` with `labels`; created on first use.
  Counter* counter(std::string_view name, std::string_view help, const Labels& labels);
  Histogram* histogram(std::string_view name, std::string_view help, const Labels& labels,
                       const std::vector<uint64_t>& upper_bounds_ns);
  // A gauge whose value is read at scrape time.
  void gauge(std::string_view name, std::string_view help, const Labels& labels,
             std::function<double()> read);
  // A counter kept elsewhere (a component's own atomics), read at scrape time.
  // `read` must be monotonic and callable for the registry's lifetime.
  void counter_function(std::string_view name, std::string_view help, const Labels& labels,
                        std::function<uint64_t()> read);
  // The same for a counter of fractional units (seconds of CPU).
  void counter_function_seconds(std::string_view name, std::string_view help, const Labels& labels,
                                std::function<double()> read);

  // A counter family whose series are kept elsewhere and only known at
  // scrape time (label values from requests): `read` lists them, each with
  // its value; it must be callable for the registry's lifetime.
  using SeriesValues = std::vector<std::pair<Labels, uint64_t>>;
  void counter_family_function(std::string_view name, std::string_view help,
                               std::function<SeriesValues()> read);

  // The whole registry in the Prometheus text format, families sorted by name.
  std::string render() const;

 private:
  enum class Type { kCounter, kGauge, kHistogram };
  struct Series {
    Labels labels;
    std::unique_ptr<Counter> counter;
    std::unique_ptr<Histogram> histogram;
    std::function<double()> gauge;
    std::function<uint64_t()> counter_read;   // a counter_function series
    std::function<double()> counter_seconds;  // a counter_function_seconds series
  };
  struct Family {
    std::string help;
    Type type = Type::kCounter;
    std::map<std::string, Series> series;       // by rendered label text
    std::function<SeriesValues()> read_series;  // a counter_family_function family
  };
  Series& series_locked(std::string_view name, std::string_view help, Type type,
                        const Labels& labels);

  mutable std::mutex mutex_;
  std::map<std::string, Family, std::less<>> families_;
};

// `{a="x",b="y"}` with Prometheus escaping; "" for no labels.
std::string render_labels(const Labels& labels);

}  // namespace sluice::observe
