#include "observe/metrics.h"

#include <cinttypes>
#include <cstdio>
#include <initializer_list>
#include <stdexcept>

namespace sluice::observe {

size_t this_thread_shard() {
  // Threads take cells round robin in the order they first count something, so
  // the first kCounterShards threads (the workers) each get a cell of their own.
  static std::atomic<size_t> next{0};
  thread_local const size_t shard = next.fetch_add(1, std::memory_order_relaxed) % kCounterShards;
  return shard;
}

uint64_t Counter::value() const {
  uint64_t total = 0;
  for (const Cell& cell : cells_) total += cell.value.load(std::memory_order_relaxed);
  return total;
}

Histogram::Histogram(std::vector<uint64_t> upper_bounds_ns) : bounds_(std::move(upper_bounds_ns)) {
  if (bounds_.size() > kMaxBuckets) throw std::invalid_argument("histogram: too many buckets");
}

void Histogram::observe_ns(uint64_t ns) {
  size_t bucket = 0;
  while (bucket < bounds_.size() && ns > bounds_[bucket]) ++bucket;
  Shard& shard = shards_[this_thread_shard()];
  shard.buckets[bucket].fetch_add(1, std::memory_order_relaxed);
  shard.sum_ns.fetch_add(ns, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  s.upper_bounds_ns = bounds_;
  std::vector<uint64_t> per_bucket(bounds_.size() + 1, 0);
  for (const Shard& shard : shards_) {
    for (size_t i = 0; i < per_bucket.size(); ++i) {
      per_bucket[i] += shard.buckets[i].load(std::memory_order_relaxed);
    }
    s.sum_ns += shard.sum_ns.load(std::memory_order_relaxed);
  }
  uint64_t running = 0;
  for (uint64_t n : per_bucket) {
    running += n;
    s.cumulative.push_back(running);
  }
  s.count = running;
  return s;
}

namespace {

void append_escaped(std::string& out, std::string_view value) {
  for (char c : value) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
}

std::string format_double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// Nanoseconds as seconds, exactly (integer part and nine decimals, trailing zeros trimmed).
std::string ns_as_seconds(uint64_t ns) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%" PRIu64 ".%09" PRIu64, ns / 1'000'000'000, ns % 1'000'000'000);
  std::string s = buf;
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

// Appends every part (and avoids "literal" + temporary,
// which trips GCC 12's false -Wrestrict in optimised builds).
void append(std::string& out, std::initializer_list<std::string_view> parts) {
  for (std::string_view p : parts) out.append(p);
}

Labels with_label(const Labels& labels, std::string name, std::string value) {
  Labels out = labels;
  out.emplace_back(std::move(name), std::move(value));
  return out;
}

}  // namespace

std::string render_labels(const Labels& labels) {
  if (labels.empty()) return {};
  std::string out = "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i > 0) out += ',';
    out += labels[i].first;
    out += "=\"";
    append_escaped(out, labels[i].second);
    out += '"';
  }
  out += '}';
  return out;
}

Registry::Series& Registry::series_locked(std::string_view name, std::string_view help, Type type,
                                          const Labels& labels) {
  auto it = families_.find(name);
  if (it == families_.end()) {
    it = families_.emplace(std::string(name), Family{}).first;
    it->second.help = std::string(help);
    it->second.type = type;
  } else if (it->second.type != type || it->second.read_series) {
    throw std::logic_error(std::string("metric family registered with two types: ").append(name));
  }
  Series& series = it->second.series[render_labels(labels)];
  if (series.labels.empty()) series.labels = labels;
  return series;
}

Counter* Registry::counter(std::string_view name, std::string_view help, const Labels& labels) {
  std::lock_guard lock(mutex_);
  Series& s = series_locked(name, help, Type::kCounter, labels);
  if (!s.counter) s.counter = std::make_unique<Counter>();
  return s.counter.get();
}

Histogram* Registry::histogram(std::string_view name, std::string_view help, const Labels& labels,
                               const std::vector<uint64_t>& upper_bounds_ns) {
  std::lock_guard lock(mutex_);
  Series& s = series_locked(name, help, Type::kHistogram, labels);
  if (!s.histogram) s.histogram = std::make_unique<Histogram>(upper_bounds_ns);
  return s.histogram.get();
}

void Registry::gauge(std::string_view name, std::string_view help, const Labels& labels,
                     std::function<double()> read) {
  std::lock_guard lock(mutex_);
  series_locked(name, help, Type::kGauge, labels).gauge = std::move(read);
}

void Registry::counter_function(std::string_view name, std::string_view help, const Labels& labels,
                                std::function<uint64_t()> read) {
  std::lock_guard lock(mutex_);
  series_locked(name, help, Type::kCounter, labels).counter_read = std::move(read);
}

void Registry::counter_function_seconds(std::string_view name, std::string_view help,
                                        const Labels& labels, std::function<double()> read) {
  std::lock_guard lock(mutex_);
  series_locked(name, help, Type::kCounter, labels).counter_seconds = std::move(read);
}

void Registry::counter_family_function(std::string_view name, std::string_view help,
                                       std::function<SeriesValues()> read) {
  std::lock_guard lock(mutex_);
  auto it = families_.find(name);
  if (it != families_.end()) {
    throw std::logic_error(std::string("metric family registered twice: ").append(name));
  }
  Family& family = families_.emplace(std::string(name), Family{}).first->second;
  family.help = std::string(help);
  family.type = Type::kCounter;
  family.read_series = std::move(read);
}

std::string Registry::render() const {
  std::lock_guard lock(mutex_);
  std::string out;
  out.reserve(4096);
  for (const auto& [name, family] : families_) {
    append(out, {"# HELP ", name, " ", family.help, "\n# TYPE ", name, " "});
    out += family.type == Type::kCounter ? "counter"
           : family.type == Type::kGauge ? "gauge"
                                         : "histogram";
    out += '\n';
    if (family.read_series) {
      for (const auto& [labels, value] : family.read_series()) {
        append(out, {name, render_labels(labels), " ", std::to_string(value), "\n"});
      }
      continue;
    }
    for (const auto& [label_text, series] : family.series) {
      switch (family.type) {
        case Type::kCounter: {
          if (series.counter_seconds) {
            append(out, {name, label_text, " ", format_double(series.counter_seconds()), "\n"});
            break;
          }
          const uint64_t value = series.counter        ? series.counter->value()
                                 : series.counter_read ? series.counter_read()
                                                       : 0;
          append(out, {name, label_text, " ", std::to_string(value), "\n"});
          break;
        }
        case Type::kGauge:
          append(out,
                 {name, label_text, " ", format_double(series.gauge ? series.gauge() : 0), "\n"});
          break;
        case Type::kHistogram: {
          const Histogram::Snapshot snap = series.histogram->snapshot();
          for (size_t i = 0; i <= snap.upper_bounds_ns.size(); ++i) {
            const std::string le = i < snap.upper_bounds_ns.size()
                                       ? ns_as_seconds(snap.upper_bounds_ns[i])
                                       : std::string("+Inf");
            append(out, {name, "_bucket", render_labels(with_label(series.labels, "le", le)), " ",
                         std::to_string(snap.cumulative[i]), "\n"});
          }
          append(out, {name, "_sum", label_text, " ", ns_as_seconds(snap.sum_ns), "\n"});
          append(out, {name, "_count", label_text, " ", std::to_string(snap.count), "\n"});
          break;
        }
      }
    }
  }
  return out;
}

}  // namespace sluice::observe
