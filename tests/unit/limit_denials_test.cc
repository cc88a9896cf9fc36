// sluice_limit_denials_total{route,limit} (observe/route_metrics.h): every
// route × limit series registered at zero, and each real denial counted once
// under the limit that fired: a route's own limits by position, a plan's by
// name; shadow denials, store failures and allowed requests not at all.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "observe/metrics.h"
#include "observe/route_metrics.h"
#include "observe/top_keys.h"
#include "policy/decider.h"
#include "policy/observer.h"
#include "policy/policy.h"

namespace sluice::observe {
namespace {

using namespace std::chrono_literals;

struct Fixture {
  Registry registry;
  Histogram* latency = registry.histogram("lat_seconds", "l", {}, {100'000'000});
  Counter* errors = registry.counter("errors_total", "e", {});
  TopKeys top{8};
  DecisionSinks sinks{latency, errors, &top, nullptr};
  DecisionLog log{0, false};

  policy::RouteLimit a{"a", false, Limit::token_bucket(1, 1, 1h).value()};
  policy::RouteLimit b{"b", false, Limit::token_bucket(1, 1, 1h).value()};
  policy::ConsumerPlan gold{"gold", {{"gold-day", false, Limit::token_bucket(1, 1, 1h).value()}}};
  std::vector<policy::ConsumerPlan> plans{gold};

  long long value(const std::string& limit) {
    const std::string series = R"(sluice_limit_denials_total{route="r",limit=")" + limit + "\"} ";
    const std::string text = registry.render();
    const size_t at = text.find(series);
    return at == std::string::npos ? -1 : std::stoll(text.substr(at + series.size()));
  }
};

// A verdict over `plan` in which the limits at `denying` denied.
policy::Verdict denial(const policy::Plan& plan, std::vector<size_t> denying) {
  policy::Verdict v;
  v.result = denying.empty() ? policy::Verdict::Result::kAllowed : policy::Verdict::Result::kDenied;
  for (size_t i = 0; i < plan.limits.size(); ++i) {
    Decision d;
    d.allowed = std::find(denying.begin(), denying.end(), i) == denying.end();
    v.outcomes.push_back({plan.limits[i].limit, d});
  }
  if (!denying.empty()) v.reported = plan.limits[denying.front()].limit;
  return v;
}

TEST(LimitDenials, CountedOncePerDenialUnderTheLimitThatFired) {
  Fixture f;
  const RouteMetrics m =
      make_route_metrics(f.registry, "r", {f.a, f.b}, true, &f.plans, f.sinks, f.log);
  EXPECT_EQ(f.value("a"), 0);
  EXPECT_EQ(f.value("b"), 0);
  EXPECT_EQ(f.value("gold-day"), 0);

  policy::Plan plan;
  plan.limits = {{&f.a, "a|k"}, {&f.b, "b|k"}, {&f.plans[0].limits[0], "g|k"}};
  const auto decide = [&](const policy::Verdict& v, bool shadow = false) {
    m.decided(policy::Decided{plan, v, 0ns, 0, shadow});
  };
  decide(denial(plan, {}));         // allowed
  decide(denial(plan, {1, 2}));     // b fired
  decide(denial(plan, {1}));        // b
  decide(denial(plan, {2}));        // the plan's limit
  decide(denial(plan, {0}), true);  // a shadow denial: let through, not counted
  policy::Verdict failed = denial(plan, {0});
  failed.result = policy::Verdict::Result::kFailedDenied;  // no limit fired
  decide(failed);
  EXPECT_EQ(f.value("a"), 0);
  EXPECT_EQ(f.value("b"), 2);
  EXPECT_EQ(f.value("gold-day"), 1);
}

TEST(LimitDenials, ALimitNamedNowhereCountsOnlyWithARegistryForIt) {
  Fixture f;
  RouteMetrics m = make_route_metrics(f.registry, "r", {}, false, nullptr, f.sinks, f.log);
  policy::Plan plan;
  plan.limits = {{&f.a, "a|k"}};
  m.decided(policy::Decided{plan, denial(plan, {0}), 0ns, 0, false});
  EXPECT_EQ(f.value("a"), -1);
  m.denials_registry = &f.registry;  // as the RLS's, whose rules come with reloads
  m.decided(policy::Decided{plan, denial(plan, {0}), 0ns, 0, false});
  m.decided(policy::Decided{plan, denial(plan, {0}), 0ns, 0, false});
  EXPECT_EQ(f.value("a"), 2);
}

}  // namespace
}  // namespace sluice::observe
