#include "observe/cost_metrics.h"

namespace sluice::observe {

CostSeries make_cost_series(Registry& registry, const std::string& name) {
  CostSeries s;
  s.settled = registry.counter("sluice_cost_settled_total",
                               "Requests of a route with cost: settled with the figure the "
                               "response reported",
                               {{"route", name}});
  s.unreported = registry.counter(
      "sluice_cost_unreported_total",
      "Requests of a route with cost: whose response reported no usable figure (the estimate "
      "stands)",
      {{"route", name}});
  s.settle_failed = registry.counter(
      "sluice_cost_settle_failures_total",
      "Settles of a route with cost: the store failed to apply (the estimate stands)",
      {{"route", name}});
  return s;
}

}  // namespace sluice::observe
