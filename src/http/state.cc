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

UpstreamGroup* State::upstream_for(const policy::Route* route) const {
  const std::vector<policy::Route>& all = policy.config().routes;
  if (route != nullptr && !all.empty() && route >= all.data() && route < all.data() + all.size()) {
    return route_upstreams[static_cast<size_t>(route - all.data())];
  }
  return default_upstream;
}

long State::policy_index(const policy::NamedPolicy* p) const {
  const std::vector<policy::NamedPolicy>& all = policy.config().policies;
  if (p == nullptr || all.empty() || p < all.data() || p >= all.data() + all.size()) return -1;
  return static_cast<long>(p - all.data());
}

namespace {

// One group per upstream in use: the default, and each named upstream a
// route names (the default's group when it is the same name).
void build_upstreams(State& state, observe::Registry& registry) {
  const policy::Config& c = state.policy.config();
  if (!c.upstream) return;
  auto make = [&](const policy::Upstream& u) {
    state.upstream_groups.push_back(std::make_shared<UpstreamGroup>(u, &registry));
    return state.upstream_groups.back().get();
  };
  state.default_upstream = make(*c.upstream);
  std::vector<std::pair<std::string, UpstreamGroup*>> by_name;
  if (!c.upstream->name.empty()) by_name.emplace_back(c.upstream->name, state.default_upstream);
  for (const policy::Route& route : c.routes) {
    UpstreamGroup* group = state.default_upstream;
    if (!route.upstream.empty()) {
      const auto it = std::find_if(by_name.begin(), by_name.end(),
                                   [&](const auto& n) { return n.first == route.upstream; });
      if (it != by_name.end()) {
        group = it->second;
      } else {
        for (const policy::Upstream& u : c.upstreams) {
          if (u.name == route.upstream) group = make(u);
        }
        by_name.emplace_back(route.upstream, group);
      }
    }
    state.route_upstreams.push_back(group);
  }
}

}  // namespace

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
  build_upstreams(*state, registry);
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
