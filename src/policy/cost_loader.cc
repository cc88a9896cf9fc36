#include "policy/cost_loader.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "config/values/values.h"
#include "core/debit.h"
#include "util/ascii.h"

namespace sluice::policy {

using config::Item;
using config::Mapping;
using config::quoted;

namespace {
const config::Keys kCostKeys = {"header", "json", "estimate"};
}  // namespace

std::optional<RouteCost> load_route_cost(config::Walker& walker, const Item& item,
                                         const Config& config, const Route& route) {
  const std::optional<Mapping> m =
      walker.mapping(item, &kCostKeys, "a mapping with header: or json:, and estimate:");
  if (!m) return std::nullopt;
  RouteCost cost;
  cost.line = item.line();
  const Item* header = m->get("header");
  const Item* json = m->get("json");
  const auto refuse = [&](const Item& where, const std::string& message) {
    walker.error(where, message);
    return std::nullopt;
  };
  if (!config.upstream) {
    return refuse(item,
                  "needs `upstream:`: only the gateway sees the response the cost is read from");
  }
  if (config.store.backend == StoreConfig::Backend::kRedis && config.store.redis.mode_cached) {
    return refuse(item,
                  "needs store.redis.mode: exact: a cached store decides locally and syncs "
                  "hits later, so it cannot settle a cost once and exactly");
  }
  if (header != nullptr && json != nullptr) {
    return refuse(*json, "give one of `header` and `json`, not both");
  }
  if (header == nullptr && json == nullptr) {
    return refuse(item,
                  "needs `header:` (a response header or trailer) or `json:` (a field of the "
                  "JSON body), like json: usage.total_tokens");
  }
  if (header != nullptr) {
    const std::optional<std::string> name = walker.scalar(*header, "a header name");
    if (!name) return std::nullopt;
    if (name->empty() || !std::all_of(name->begin(), name->end(), util::is_tchar)) {
      return refuse(*header, "must be a header name, like x-usage-total-tokens");
    }
    cost.header = config::to_lower(*name);
  }
  if (json != nullptr) {
    const std::optional<std::string> text = walker.scalar(*json, "a JSON path");
    if (!text) return std::nullopt;
    std::optional<std::vector<std::string>> path = parse_json_path(*text);
    if (!path) {
      return refuse(*json,
                    "must be member names separated by dots (letters, digits, '_' and '-'), "
                    "like usage.total_tokens");
    }
    cost.json_path = std::move(*path);
  }
  const Item* estimate = m->get("estimate");
  if (estimate != nullptr) {
    const std::optional<uint64_t> n =
        walker.integer(*estimate, 1, kMaxReportedCost,
                       "a positive whole number (the cost charged before proxying)");
    if (!n) return std::nullopt;
    cost.estimate = *n;
  }
  // Each limit must take a settle's debit, and admit the estimate at all.
  const auto fits = [&](const RouteLimit& limit, const std::string& whose) {
    if (!core::takes_debit(limit.limit.algorithm())) {
      walker.error(item,
                   "needs every limit of the route to be token_bucket, gcra or fixed_window "
                   "(they can go into debt when a response costs more than its estimate): " +
                       whose + "limit " + quoted(limit.name) + " at " + limit.mark.text() + " is " +
                       std::string(algorithm_name(limit.limit.algorithm())));
      return false;
    }
    if (cost.estimate > limit.limit.size()) {
      walker.error(estimate != nullptr ? *estimate : item,
                   "the estimate " + std::to_string(cost.estimate) + " is above the size of " +
                       whose + "limit " + quoted(limit.name) + " (" +
                       std::to_string(limit.limit.size()) + "): no request could ever be admitted");
      return false;
    }
    return true;
  };
  for (const RouteLimit& limit : route.limits) {
    if (!fits(limit, "")) return std::nullopt;
  }
  if (route.plan_at) {
    for (const ConsumerPlan& plan : config.plans) {
      for (const RouteLimit& limit : plan.limits) {
        if (!fits(limit, "plan " + quoted(plan.name) + "'s ")) return std::nullopt;
      }
    }
  }
  return cost;
}

}  // namespace sluice::policy
