// The series of a route with `cost:` (policy/route_cost.h): how its
// requests' costs were settled after the response.
//
// Thread-safety: immutable once made; the counters are atomic.
#pragma once

#include <string>

#include "observe/metrics.h"

namespace sluice::observe {

struct CostSeries {
  // sluice_cost_settled_total{route}: the response reported a usable figure
  // and the difference was charged (or given back), or there was none.
  Counter* settled = nullptr;
  // sluice_cost_unreported_total{route}: no usable figure (absent, not an
  // integer, negative, above 2^32, the response cut): the estimate stands.
  Counter* unreported = nullptr;
  // sluice_cost_settle_failures_total{route}: the store failed to apply a
  // settle (logged too): the estimate stands.
  Counter* settle_failed = nullptr;
};

// Registers the series of route `name` in `registry`.
CostSeries make_cost_series(Registry& registry, const std::string& name);

}  // namespace sluice::observe
