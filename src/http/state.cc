#include "http/state.h"

#include "http/responses.h"
#include "http/tls_context.h"

#include <algorithm>
#include <string_view>

namespace sluice::http {

const RouteMetrics& State::metrics_for_plan(const policy::ConsumerPlan* plan) const {
  const std::vector<policy::ConsumerPlan>& all = policy.config().plans;
  if (plan == nullptr || all.empty() || plan < all.data() || plan >= all.data() + all.size()) {
    return unmatched;
  }
  return plans[static_cast<size_t>(plan - all.data())];
}

const RouteMetrics& State::metrics_for(const policy::Route* route) const {
  if (route == nullptr) return unmatched;
  const std::vector<policy::Route>& all = policy.config().routes;
  if (!all.empty() && route >= all.data() && route < all.data() + all.size()) {
    return routes[static_cast<size_t>(route - all.data())];
  }
  return default_route;
}

long State::policy_index(const policy::NamedPolicy* p) const {
  const std::vector<policy::NamedPolicy>& all = policy.config().policies;
  if (p == nullptr || all.empty() || p < all.data() || p >= all.data() + all.size()) return -1;
  return static_cast<long>(p - all.data());
}

std::shared_ptr<const State> build_state(policy::Config config, uint64_t generation,
                                         observe::Registry& registry,
                                         const observe::DecisionSinks& sinks) {
  auto state = std::make_shared<State>(std::move(config));
  state->generation = generation;
  state->decision_log =
      std::make_unique<observe::DecisionLog>(state->policy.config().logging.denial_log_per_second,
                                             state->policy.config().logging.redact_keys);
  state->handshake_log = std::make_unique<observe::DenialLogGate>(
      state->policy.config().logging.denial_log_per_second);
  const policy::Config& c = state->policy.config();
  if (c.tls) state->tls = make_tls_context(*c.tls, c.http2);
  observe::DecisionLog& log = *state->decision_log;
  auto make = [&](const std::string& name, const std::vector<policy::RouteLimit>& limits,
                  bool shadow, const std::vector<policy::ConsumerPlan>* plans = nullptr) {
    RouteMetrics m = observe::make_route_metrics(registry, name, limits, shadow, plans, sinks, log);
    m.durations = observe::make_request_durations(registry, name, shadow);
    return m;
  };
  // A gateway's routes (the default and `none` included) have upstream series.
  auto with_upstream = [&](RouteMetrics m) {
    if (c.upstream) m.upstream = observe::make_upstream_series(registry, m.name);
    return m;
  };
  auto plans_of = [&c](const policy::Route& route) { return route.plan_at ? &c.plans : nullptr; };
  for (const policy::Route& route : c.routes) {
    state->routes.push_back(
        with_upstream(make(route.name, route.limits, route.shadow, plans_of(route))));
    if (route.cost) state->routes.back().cost = observe::make_cost_series(registry, route.name);
  }
  if (c.default_route) {
    state->default_route = with_upstream(make(c.default_route->name, c.default_route->limits,
                                              c.default_route->shadow, plans_of(*c.default_route)));
  }
  state->unmatched = with_upstream(make("none", {}, false));
  for (const policy::NamedPolicy& p : c.policies) {
    policy::RouteLimit limit{p.name, true, p.limit, p.mark, p.count_status};
    state->policies.push_back(make(cat({"policy:", p.name}), {limit}, false));
    state->policy_limits.push_back(std::move(limit));
  }
  for (const policy::ConsumerPlan& p : c.plans) {
    state->plans.push_back(make(cat({"plan:", p.name}), p.limits, false));
  }
  return state;
}

}  // namespace sluice::http
