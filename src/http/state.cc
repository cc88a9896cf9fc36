#include "http/state.h"

#include "http/responses.h"
#include "http/tls_context.h"

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

constexpr std::string_view kSlotsTakenName = "sluice_concurrency_slots_taken_total";
constexpr std::string_view kSlotsTakenHelp =
    "Requests that took slots of their route's concurrency limits, by route.";
constexpr std::string_view kSlotsReleasedName = "sluice_concurrency_slots_released_total";
constexpr std::string_view kSlotsReleasedHelp =
    "Requests that gave their concurrency slots back (response sent, connection gone, upstream "
    "failed, lease released), by route.";
constexpr std::string_view kSlotsHeldName = "sluice_concurrency_slots_held";
constexpr std::string_view kSlotsHeldHelp =
    "Requests of this instance holding concurrency slots now (taken - released), by route.";

bool has_concurrency(const std::vector<policy::RouteLimit>& limits) {
  return std::any_of(limits.begin(), limits.end(), [](const policy::RouteLimit& l) {
    return l.limit.algorithm() == Algorithm::kConcurrency;
  });
}

bool counts_status(const std::vector<policy::RouteLimit>& limits) {
  return std::any_of(limits.begin(), limits.end(),
                     [](const policy::RouteLimit& l) { return !l.count_status.empty(); });
}

// `plans`: the config's plans when the route lists `plan`, else null.
RouteMetrics make_metrics(observe::Registry& registry, const std::string& name,
                          const std::vector<policy::RouteLimit>& limits, bool shadow,
                          const std::vector<policy::ConsumerPlan>* plans = nullptr) {
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
  const bool plan_counts_status =
      plans != nullptr && std::any_of(plans->begin(), plans->end(),
                                      [](const auto& p) { return counts_status(p.limits); });
  if (counts_status(limits) || plan_counts_status) {
    m.refunded = registry.counter(kRefundsName, kRefundsHelp, {{"route", name}});
  }
  if (has_concurrency(limits)) {
    m.slots_taken = registry.counter(kSlotsTakenName, kSlotsTakenHelp, {{"route", name}});
    m.slots_released = registry.counter(kSlotsReleasedName, kSlotsReleasedHelp, {{"route", name}});
    // Both counters live as long as the registry. Read released first: a
    // release always follows its take, so the difference is never negative.
    registry.gauge(kSlotsHeldName, kSlotsHeldHelp, {{"route", name}},
                   [taken = m.slots_taken, released = m.slots_released] {
                     const uint64_t r = released->value();
                     const uint64_t t = taken->value();
                     return static_cast<double>(t >= r ? t - r : 0);
                   });
  }
  auto counters = [&](const policy::RouteLimit& limit) {
    const std::string algorithm(algorithm_name(limit.limit.algorithm()));
    auto series = [&](const char* result) {
      return registry.counter(kDecisionsName, kDecisionsHelp,
                              {{"route", name}, {"algorithm", algorithm}, {"result", result}});
    };
    return RouteMetrics::LimitCounters{series("allowed"), series("denied"), series("error")};
  };
  for (const policy::RouteLimit& limit : limits) m.limits.push_back(counters(limit));
  if (plans != nullptr) {
    for (const policy::ConsumerPlan& plan : *plans) {
      for (const policy::RouteLimit& limit : plan.limits) {
        m.plan_limits[static_cast<size_t>(limit.limit.algorithm())] = counters(limit);
      }
    }
  }
  return m;
}

}  // namespace

const RouteMetrics::LimitCounters& RouteMetrics::limit_at(size_t index,
                                                          const policy::RouteLimit& limit) const {
  static const LimitCounters kNone{};
  if (index < limits.size()) return limits[index];
  const auto algorithm = static_cast<size_t>(limit.limit.algorithm());
  return algorithm < plan_limits.size() ? plan_limits[algorithm] : kNone;
}

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
                                         observe::Registry& registry) {
  auto state = std::make_shared<State>(std::move(config));
  state->generation = generation;
  state->denial_log = std::make_unique<observe::DenialLogGate>(
      state->policy.config().logging.denial_log_per_second);
  state->handshake_log = std::make_unique<observe::DenialLogGate>(
      state->policy.config().logging.denial_log_per_second);
  const policy::Config& c = state->policy.config();
  if (c.tls) state->tls = make_tls_context(*c.tls);
  auto plans_of = [&c](const policy::Route& route) { return route.plan_at ? &c.plans : nullptr; };
  for (const policy::Route& route : c.routes) {
    state->routes.push_back(
        make_metrics(registry, route.name, route.limits, route.shadow, plans_of(route)));
  }
  if (c.default_route) {
    state->default_route = make_metrics(registry, c.default_route->name, c.default_route->limits,
                                        c.default_route->shadow, plans_of(*c.default_route));
  }
  state->unmatched = make_metrics(registry, "none", {}, false);
  for (const policy::NamedPolicy& p : c.policies) {
    policy::RouteLimit limit{p.name, true, p.limit, p.mark, p.count_status};
    state->policies.push_back(make_metrics(registry, cat({"policy:", p.name}), {limit}, false));
    state->policy_limits.push_back(std::move(limit));
  }
  for (const policy::ConsumerPlan& p : c.plans) {
    state->plans.push_back(make_metrics(registry, cat({"plan:", p.name}), p.limits, false));
  }
  return state;
}

}  // namespace sluice::http
