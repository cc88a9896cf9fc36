#include "observe/route_metrics.h"

#include <algorithm>
#include <cstdint>

#include <spdlog/spdlog.h>

#include "policy/decider.h"
#include "policy/redact.h"

namespace sluice::observe {

namespace {

constexpr std::string_view kRequestsName = "sluice_requests_total";
constexpr std::string_view kRequestsHelp =
    "Requests decided, by route and result (allowed, denied, error = store failed, "
    "shadow_denied = denied on a shadow route and let through).";
constexpr std::string_view kDecisionsName = "sluice_decisions_total";
constexpr std::string_view kDecisionsHelp =
    "Limit decisions, by route, algorithm and result (one per limit of a request).";

constexpr std::string_view kLimitDenialsName = "sluice_limit_denials_total";
constexpr std::string_view kLimitDenialsHelp =
    "Requests denied, by route and the limit that fired (its name: the policy's, `name:`, or "
    "ROUTE#i; the first in the route's order when several deny). Shadow denials are not counted.";

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

// Milliseconds rounded up: a caller that waits this long is never early.
uint64_t ms_rounded_up(Nanos d) {
  if (d.count() <= 0) return 0;
  return static_cast<uint64_t>((d.count() + 999'999) / 1'000'000);
}

std::string_view limit_name(const policy::Verdict& verdict) {
  return verdict.reported != nullptr ? std::string_view(verdict.reported->name)
                                     : std::string_view();
}

}  // namespace

Counter* limit_denials_counter(Registry& registry, std::string_view route, std::string_view limit) {
  return registry.counter(kLimitDenialsName, kLimitDenialsHelp,
                          {{"route", std::string(route)}, {"limit", std::string(limit)}});
}

std::string_view shown_key(bool redact, std::string_view key, std::string& buffer) {
  // Every value part has a '='; IPs, "global" and scopes have none.
  if (!redact || key.find('=') == std::string_view::npos) return key;
  buffer = policy::redact_key(key);
  return buffer;
}

const RouteMetrics::LimitCounters& RouteMetrics::limit_at(size_t index,
                                                          const policy::RouteLimit& limit) const {
  static const LimitCounters kNone{};
  if (index < limits.size()) return limits[index];
  const auto algorithm = static_cast<size_t>(limit.limit.algorithm());
  return algorithm < plan_limits.size() ? plan_limits[algorithm] : kNone;
}

Counter* RouteMetrics::denials_of(std::string_view limit) const {
  for (const auto& entry : named_denials) {
    if (entry.first == limit) return entry.second;
  }
  return denials_registry != nullptr ? limit_denials_counter(*denials_registry, name, limit)
                                     : nullptr;
}

void RouteMetrics::count_limit_denial(const policy::Verdict& verdict) const {
  if (verdict.reported == nullptr) return;
  // The route's own limits come first in a plan, in route order.
  for (size_t i = 0; i < verdict.outcomes.size() && i < limit_denials.size(); ++i) {
    if (verdict.outcomes[i].limit == verdict.reported) return limit_denials[i]->add();
  }
  if (Counter* c = denials_of(verdict.reported->name)) c->add();
}

void RouteMetrics::decided(const policy::Decided& d) const {
  const policy::Verdict& verdict = d.verdict;
  if (!verdict.limited()) {
    allowed->add();
    if (history) history->record_at(d.now, HistoryResult::kAllowed);
    return;
  }
  sinks->store_latency->observe_ns(d.store_ns);
  if (verdict.invalid()) return;  // a bad request, answered as such by its door
  if (verdict.store_failed()) return store_failed(d);
  const bool shadow = d.shadow && shadow_denied != nullptr;
  (verdict.allowed() ? allowed : shadow ? shadow_denied : denied)->add();
  if (history) {
    history->record_at(d.now, verdict.allowed() ? HistoryResult::kAllowed : HistoryResult::kDenied);
  }
  for (size_t i = 0; i < verdict.outcomes.size(); ++i) {
    const policy::LimitOutcome& outcome = verdict.outcomes[i];
    const LimitCounters& c = limit_at(i, *outcome.limit);
    Counter* counter = outcome.decision.allowed ? c.allowed : c.denied;
    if (counter != nullptr) counter->add();
  }
  if (verdict.allowed()) return;
  if (shadow) return denied_shadow(d);
  count_limit_denial(verdict);
  denied_for_real(d);
}

void RouteMetrics::on_slots_taken() const {
  if (slots_taken != nullptr) slots_taken->add();
}

void RouteMetrics::on_slots_released() const {
  if (slots_released != nullptr) slots_released->add();
}

void RouteMetrics::on_refunded() const {
  if (refunded != nullptr) refunded->add();
}

void RouteMetrics::on_give_back_failed() const {
  sinks->store_errors->add();
}

// on_failure was applied: counted as an error of the route and of each of
// its limits, and logged at the denial log's rate.
void RouteMetrics::store_failed(const policy::Decided& d) const {
  sinks->store_errors->add();
  error->add();
  if (history) history->record_at(d.now, HistoryResult::kError);
  for (size_t i = 0; i < d.plan.limits.size(); ++i) {
    const LimitCounters& c = limit_at(i, *d.plan.limits[i].limit);
    if (c.error != nullptr) c.error->add();
  }
  const DenialLogGate::Admission a = log->gate.admit(d.now);
  if (!a.log) return;
  spdlog::error("store failed on route \"{}\": {}; on_failure={}", name, d.verdict.error,
                d.verdict.allowed() ? "allow" : "deny");
}

void RouteMetrics::denied_shadow(const policy::Decided& d) const {
  const DenialLogGate::Admission a = log->gate.admit(d.now);
  if (!a.log) return;
  std::string redacted;
  const std::string_view key = shown_key(log->redact_keys.load(std::memory_order_relaxed),
                                         policy::decision_key(d.plan, d.verdict), redacted);
  spdlog::info("shadow: route \"{}\" would deny key \"{}\" (limit \"{}\"); let through{}", name,
               key, limit_name(d.verdict), suppressed_note(a, "denials"));
}

void RouteMetrics::denied_for_real(const policy::Decided& d) const {
  std::string redacted;
  const std::string_view key = shown_key(log->redact_keys.load(std::memory_order_relaxed),
                                         policy::reported_key(d.plan, d.verdict), redacted);
  sinks->top_denied->record(key);
  const DenialLogGate::Admission a = log->gate.admit(d.now);
  if (!a.log) return;
  spdlog::info("denied: route \"{}\" key \"{}\" limit \"{}\" retry after {} ms{}", name, key,
               limit_name(d.verdict), ms_rounded_up(d.verdict.decision.retry_after),
               suppressed_note(a, "denials"));
}

RouteMetrics make_route_metrics(Registry& registry, const std::string& name,
                                const std::vector<policy::RouteLimit>& limits, bool shadow,
                                const std::vector<policy::ConsumerPlan>* plans,
                                const DecisionSinks& sinks, DecisionLog& log) {
  RouteMetrics m;
  m.name = name;
  m.sinks = &sinks;
  m.log = &log;
  if (sinks.history != nullptr) m.history = sinks.history->route(name);
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
  for (const policy::RouteLimit& limit : limits) {
    m.limits.push_back(counters(limit));
    m.limit_denials.push_back(limit_denials_counter(registry, name, limit.name));
  }
  if (plans != nullptr) {
    for (const policy::ConsumerPlan& plan : *plans) {
      for (const policy::RouteLimit& limit : plan.limits) {
        m.plan_limits[static_cast<size_t>(limit.limit.algorithm())] = counters(limit);
        const bool known = std::any_of(m.named_denials.begin(), m.named_denials.end(),
                                       [&](const auto& n) { return n.first == limit.name; });
        if (!known) {
          m.named_denials.emplace_back(limit.name,
                                       limit_denials_counter(registry, name, limit.name));
        }
      }
    }
  }
  return m;
}

}  // namespace sluice::observe
