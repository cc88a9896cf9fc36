#include "http/state.h"

#include "http/responses.h"

#include <algorithm>
#include <string_view>

namespace sluice::http {

namespace {

constexpr std::string_view kRequestsName = "sluice_requests_total";
constexpr std::string_view kRequestsHelp =
    "Requests decided, by route and result (allowed, denied, error = store failed, "
    "shadow_denied = denied on a shadow route and let through).";
constexpr std::string_view kDecisionsName = "sluice_decisions_total";
constexpr std::string_view kDecisionsHelp =
    "Limit decisions, by route, algorithm and result (one per limit of a request).";

constexpr std::string_view kRefundsName = "sluice_refunds_total";
constexpr std::string_view kRefundsHelp =
    "Requests whose charge was given back because the upstream answered with a status their "
    "limits' count_status does not list, by route.";

RouteMetrics make_metrics(observe::Registry& registry, const std::string& name,
                          const std::vector<policy::RouteLimit>& limits, bool shadow) {
  RouteMetrics m;
  m.name = name;
  m.allowed =
      registry.counter(kRequestsName, kRequestsHelp, {{"route", name}, {"result", "allowed"}});
  m.denied =
      registry.counter(kRequestsName, kRequestsHelp, {{"route", name}, {"result", "denied"}});
  m.error = registry.counter(kRequestsName, kRequestsHelp, {{"route", name}, {"result", "error"}});
  if (shadow) {
    m.shadow_denied = registry.counter(kRequestsName, kRequestsHelp,
                                       {{"route", name}, {"result", "shadow_denied"}});
  }
  if (std::any_of(limits.begin(), limits.end(),
                  [](const policy::RouteLimit& l) { return !l.count_status.empty(); })) {
    m.refunded = registry.counter(kRefundsName, kRefundsHelp, {{"route", name}});
  }
  for (const policy::RouteLimit& limit : limits) {
    const std::string algorithm(algorithm_name(limit.limit.algorithm()));
    auto series = [&](const char* result) {
      return registry.counter(kDecisionsName, kDecisionsHelp,
                              {{"route", name}, {"algorithm", algorithm}, {"result", result}});
    };
    m.limits.push_back({series("allowed"), series("denied"), series("error")});
  }
  return m;
}

}  // namespace

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
                                         observe::Registry& registry) {
  auto state = std::make_shared<State>(std::move(config));
  state->generation = generation;
  state->denial_log = std::make_unique<observe::DenialLogGate>(
      state->policy.config().logging.denial_log_per_second);
  const policy::Config& c = state->policy.config();
  for (const policy::Route& route : c.routes) {
    state->routes.push_back(make_metrics(registry, route.name, route.limits, route.shadow));
  }
  if (c.default_route) {
    state->default_route = make_metrics(registry, c.default_route->name, c.default_route->limits,
                                        c.default_route->shadow);
  }
  state->unmatched = make_metrics(registry, "none", {}, false);
  for (const policy::NamedPolicy& p : c.policies) {
    policy::RouteLimit limit{p.name, true, p.limit, p.mark, p.count_status};
    state->policies.push_back(make_metrics(registry, cat({"policy:", p.name}), {limit}, false));
    state->policy_limits.push_back(std::move(limit));
  }
  return state;
}

}  // namespace sluice::http
