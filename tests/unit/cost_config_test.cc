// A route's `cost:` in the config (src/policy/config_loader.cc,
// policy/route_cost.h): what loads, and each mistake at its line.
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "policy/config_loader.h"

namespace sluice::policy {
namespace {

using Errors = std::vector<std::string>;

Errors errors_of(std::string_view yaml) {
  const LoadResult r = load_config_string(yaml, "t.yaml");
  Errors out;
  for (const ConfigError& e : r.errors) out.push_back(e.text());
  EXPECT_EQ(r.config.has_value(), r.errors.empty());
  return out;
}

constexpr std::string_view kHead = "upstream: http://127.0.0.1:9\nroutes:\n";

std::string route(std::string_view cost,
                  std::string_view limits = "[{capacity: 1000, refill_rate: 1000/m}]") {
  return std::string(kHead) +
         "  - match: POST /v1/chat/completions\n    limits: " + std::string(limits) +
         "\n    cost: " + std::string(cost) + "\n";
}

TEST(CostConfig, LoadsAJsonPathAndAnEstimate) {
  const LoadResult r =
      load_config_string(route("{json: usage.total_tokens, estimate: 500}"), "t.yaml");
  ASSERT_TRUE(r.config) << (r.errors.empty() ? "" : r.errors.front().text());
  const RouteCost& cost = *r.config->routes.at(0).cost;
  EXPECT_EQ(cost.json_path, (std::vector<std::string>{"usage", "total_tokens"}));
  EXPECT_EQ(cost.header, "");
  EXPECT_EQ(cost.estimate, 500u);
}

TEST(CostConfig, AHeaderNameIsKeptLowerCaseAndTheEstimateIsOneByDefault) {
  const LoadResult r = load_config_string(route("{header: X-Usage-Total-Tokens}"), "t.yaml");
  ASSERT_TRUE(r.config);
  const RouteCost& cost = *r.config->routes.at(0).cost;
  EXPECT_EQ(cost.header, "x-usage-total-tokens");
  EXPECT_EQ(cost.estimate, 1u);
}

TEST(CostConfig, ARouteWithoutAnUpstreamIsRefused) {
  EXPECT_EQ(errors_of("routes:\n  - match: POST /a\n    limits: [{algorithm: fixed_window, limit: "
                      "5, window: 1m}]\n"
                      "    cost: {header: x-cost}\n"),
            Errors{"t.yaml:4:11: routes[0].cost: needs `upstream:`: only the gateway sees the "
                   "response the cost is read from"});
}

TEST(CostConfig, AJsonPathThatDoesNotParseIsRefused) {
  EXPECT_EQ(errors_of(route("{json: \"choices[0].usage\"}")),
            Errors{"t.yaml:5:18: routes[0].cost.json: must be member names separated by dots "
                   "(letters, digits, '_' and '-'), like usage.total_tokens"});
}

TEST(CostConfig, BothHeaderAndJsonAreRefused) {
  EXPECT_EQ(errors_of(route("{header: x-cost, json: usage.total_tokens}")),
            Errors{"t.yaml:5:34: routes[0].cost.json: give one of `header` and `json`, not both"});
}

TEST(CostConfig, NeitherHeaderNorJsonIsRefused) {
  EXPECT_EQ(errors_of(route("{estimate: 5}")),
            Errors{"t.yaml:5:11: routes[0].cost: needs `header:` (a response header or "
                   "trailer) or `json:` (a field of the JSON body), like json: "
                   "usage.total_tokens"});
}

TEST(CostConfig, AnEstimateThatIsNotAPositiveWholeNumberIsRefused) {
  for (const char* estimate : {"0", "-5", "1.5", "lots"}) {
    const Errors e = errors_of(route(std::string("{header: x-cost, estimate: ") + estimate + "}"));
    ASSERT_EQ(e.size(), 1u) << estimate;
    EXPECT_EQ(e[0].substr(0, 41), "t.yaml:5:38: routes[0].cost.estimate: mus") << e[0];
  }
}

TEST(CostConfig, AnEstimateAboveALimitsSizeIsRefused) {
  EXPECT_EQ(errors_of(route("{header: x-cost, estimate: 2000}")),
            Errors{"t.yaml:5:38: routes[0].cost.estimate: the estimate 2000 is above the size "
                   "of limit \"POST /v1/chat/completions\" (1000): no request could ever be "
                   "admitted"});
}

TEST(CostConfig, ALimitThatCannotGoIntoDebtIsRefusedWithItsName) {
  EXPECT_EQ(
      errors_of(route("{header: x-cost}", "[{algorithm: sliding_window, limit: 5, window: 1m}]")),
      Errors{"t.yaml:5:11: routes[0].cost: needs every limit of the route to be "
             "token_bucket, gcra or fixed_window (they can go into debt when a response "
             "costs more than its estimate): limit \"POST /v1/chat/completions\" at "
             "t.yaml:4:14 is sliding_window"});
}

TEST(CostConfig, TheCachedRedisModeIsRefused) {
  EXPECT_EQ(
      errors_of("store: {backend: redis, redis: {mode: cached}}\n" + route("{header: x-cost}")),
      Errors{"t.yaml:6:11: routes[0].cost: needs store.redis.mode: exact: a cached store "
             "decides locally and syncs hits later, so it cannot settle a cost once and "
             "exactly"});
}

TEST(CostConfig, AnUnknownKeyIsRefused) {
  const Errors e = errors_of(route("{header: x-cost, estimat: 5}"));
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].substr(0, 30), "t.yaml:5:28: routes[0].cost.es") << e[0];
}

}  // namespace
}  // namespace sluice::policy
