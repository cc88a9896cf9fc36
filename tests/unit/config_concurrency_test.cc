// Concurrency limits in the server config: {algorithm: concurrency, max, lease},
// where they may appear and the errors at file:line:col.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "policy/config_loader.h"
#include "policy/config_yaml.h"

namespace sluice::policy {
namespace {

using namespace std::chrono_literals;
using Errors = std::vector<std::string>;

Errors errors_of(std::string_view yaml) {
  const LoadResult r = load_config_string(yaml, "t.yaml");
  Errors out;
  for (const config::ConfigError& e : r.errors) out.push_back(e.text());
  EXPECT_EQ(r.config.has_value(), r.errors.empty());
  return out;
}

TEST(ConfigConcurrency, ARouteAndAPolicyTakeMaxAndLease) {
  const LoadResult r = load_config_string(R"(upstream: http://127.0.0.1:3000
policies:
  exports: {algorithm: concurrency, max: 2, lease: 5m}
routes:
  - match: POST /api/reports
    limits:
      - {algorithm: concurrency, max: 4, lease: 60s}
      - exports
)",
                                          "t.yaml");
  ASSERT_TRUE(r.config.has_value());
  const std::vector<RouteLimit>& limits = r.config->routes.at(0).limits;
  ASSERT_EQ(limits.size(), 2u);
  EXPECT_EQ(limits[0].limit, Limit::concurrency(4, 60s).value());
  EXPECT_EQ(limits[1].limit, Limit::concurrency(2, 5min).value());
  // Written back as read.
  const std::string yaml = to_yaml(*r.config);
  EXPECT_NE(yaml.find("{algorithm: concurrency, max: 4, lease: 1m}"), std::string::npos) << yaml;
}

TEST(ConfigConcurrency, APolicyNeedsNoUpstream) {
  EXPECT_EQ(errors_of(R"(policies:
  exports: {algorithm: concurrency, max: 2, lease: 5m}
)"),
            Errors{});
}

TEST(ConfigConcurrency, FieldErrorsPointAtTheField) {
  EXPECT_EQ(
      errors_of(R"(upstream: http://127.0.0.1:3000
routes:
  - match: POST /a
    limits: [{algorithm: concurrency, max: 4}]
  - match: POST /b
    limits: [{algorithm: concurrency, max: 4, lease: 60s, window: 1m}]
  - match: POST /c
    limits: [{algorithm: concurrency, max: 0, lease: 60s}]
  - match: POST /d
    limits: [{algorithm: concurrency, max: 10001, lease: 60s}]
  - match: POST /e
    limits: [{capacity: 5, refill_rate: 1/s, max: 4}]
  - match: POST /f
    limits: [{algorithm: concurrency, max: 4, lease: 60s, count_status: [500]}]
)"),
      (Errors{"t.yaml:4:14: routes[0].limits[0]: concurrency needs `lease`",
              "t.yaml:6:67: routes[1].limits[0].window: concurrency takes max and lease, not "
              "window (limit and window are for fixed_window, sliding_log and sliding_window)",
              "t.yaml:8:44: routes[2].limits[0].max: must be a positive integer, got \"0\"",
              "t.yaml:10:14: routes[3].limits[0]: concurrency: max must be at most 10000 (got "
              "10001)",
              "t.yaml:12:51: routes[4].limits[0].max: token_bucket takes capacity and "
              "refill_rate, not max (max and lease are for concurrency)",
              "t.yaml:14:73: routes[5].limits[0].count_status: a concurrency slot is given back "
              "when the response has been sent, whatever its status: count_status does not "
              "apply"}));
}

TEST(ConfigConcurrency, ARouteNeedsTheGateway) {
  EXPECT_EQ(errors_of(R"(policies:
  exports: {algorithm: concurrency, max: 2, lease: 5m}
routes:
  - match: POST /a
    limits: [exports]
default:
  limits: [{algorithm: concurrency, max: 4, lease: 60s}]
)"),
            (Errors{"t.yaml:5:14: routes[0].limits[0]: a concurrency limit on a route needs "
                    "`upstream:`: only the gateway sees when a response has been sent (/v1/check "
                    "takes one from a policy and answers a lease to release)",
                    "t.yaml:7:12: default.limits[0]: a concurrency limit on a route needs "
                    "`upstream:`: only the gateway sees when a response has been sent (/v1/check "
                    "takes one from a policy and answers a lease to release)"}));
}

TEST(ConfigConcurrency, APlanCannotHoldOne) {
  EXPECT_EQ(errors_of(R"(upstream: http://127.0.0.1:3000
plans:
  free: [{algorithm: concurrency, max: 2, lease: 1m}]
consumers: {key: "header:x-api-key", file: /nonexistent/c.yaml, unknown: free}
)"),
            (Errors{"t.yaml:3:10: plans.free[0]: a plan cannot hold a concurrency limit: "
                    "/v1/check applies plans too, and gives back only a policy's slot; put it on "
                    "the route",
                    "t.yaml:4:44: consumers.file: cannot open the consumers file "
                    "/nonexistent/c.yaml: No such file or directory"}));
}

}  // namespace
}  // namespace sluice::policy
