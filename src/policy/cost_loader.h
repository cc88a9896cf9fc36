// Loads a route's `cost: {header: NAME | json: PATH, estimate: N}`
// (policy/route_cost.h) for the config loader, errors at their line.
#pragma once

#include <optional>

#include "config/walker.h"
#include "policy/config.h"

namespace sluice::policy {

// The cost of `route` (its limits already read) from `item`, or nullopt
// with the errors reported through `walker`. `config` is the config so far
// (its upstream and plans are read before routes).
std::optional<RouteCost> load_route_cost(config::Walker& walker, const config::Item& item,
                                         const Config& config, const Route& route);

}  // namespace sluice::policy
