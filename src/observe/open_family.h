// A counter family whose label values are only known at run time (the Envoy
// RLS descriptors of `detailed_metric`, which carry request values), with a
// bound on its series: a Prometheus family must not grow with what clients
// send. Past `max_series` label sets, counts go to one series whose values
// are all kOverflowValue, and a warning is logged once.
//
// The family keeps its own counters; attach() has a Registry read them at
// each scrape, so the family must outlive the registry it is attached to
// (it may be counted into before and after).
//
// Thread-safety: add() and series() may be called from any thread (a mutex
// guards the label-set index).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "observe/metrics.h"

namespace sluice::observe {

class OpenCounterFamily {
 public:
  static constexpr std::string_view kOverflowValue = "_other_";

  OpenCounterFamily(std::string name, std::string help, std::vector<std::string> label_names,
                    size_t max_series);

  // Renders the family in `registry`'s /metrics from now on.
  void attach(Registry& registry);

  // Adds `n` to the series labelled `values` (one per label name, in order).
  void add(std::span<const std::string_view> values, uint64_t n = 1);

  // Every series with its value, the overflow series last (when used).
  Registry::SeriesValues snapshot() const;
  // Label sets counted so far (the overflow series not included).
  size_t series() const;

 private:
  struct Series {
    Labels labels;
    uint64_t value = 0;
  };

  const std::string name_;
  const std::string help_;
  const std::vector<std::string> label_names_;
  const size_t max_series_;
  mutable std::mutex mutex_;
  // By the label values, each prefixed with its length (so no two label
  // sets share a key); sorted, so /metrics lists them in a stable order.
  std::map<std::string, Series, std::less<>> by_values_;
  std::unique_ptr<Series> overflow_;
};

}  // namespace sluice::observe
