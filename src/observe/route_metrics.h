// RouteMetrics: the series of one route (or named policy, consumer plan, the
// Envoy RLS descriptors), resolved once at load so the hot path increments
// counters through pointers and never looks a series up by its labels, and
// the policy::DecisionObserver that counts every decision of every front
// door into them: sluice_requests_total, sluice_decisions_total,
// sluice_limit_denials_total, the server-wide store latency, store errors,
// top denied keys and decisions per second (DecisionSinks), and the
// rate-limited log lines of denials, shadow
// denials and store failures (DecisionLog).
//
// Thread-safety: immutable once made; decided() may run on any thread.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "observe/cost_metrics.h"
#include "observe/decision_history.h"
#include "observe/denial_log.h"
#include "observe/metrics.h"
#include "observe/request_duration.h"
#include "observe/top_keys.h"
#include "observe/upstream_metrics.h"
#include "policy/config.h"
#include "policy/observer.h"

namespace sluice::observe {

// What every decision also counts in, whatever its door and route: one set
// per server. The pointers outlive every RouteMetrics made with them.
struct DecisionSinks {
  Histogram* store_latency = nullptr;  // sluice_store_latency_seconds
  Counter* store_errors = nullptr;     // sluice_store_errors_total
  TopKeys* top_denied = nullptr;       // /admin/stats top_denied_keys
  DecisionHistory* history = nullptr;  // /admin/history; null: none kept
};

// How decisions are logged: at most logging.denial_log_per_second lines
// (denials, shadow denials and store failures share one gate), keys shown
// as logging.redact_keys says.
struct DecisionLog {
  DecisionLog(double per_second, bool redact) : gate(per_second), redact_keys(redact) {}
  DenialLogGate gate;
  std::atomic<bool> redact_keys;
};

struct RouteMetrics final : policy::DecisionObserver, policy::ChargeObserver {
  std::string name;            // the `route` label, and the route named in log lines
  Counter* allowed = nullptr;  // sluice_requests_total{result="allowed"}
  Counter* denied = nullptr;   // {result="denied"}
  Counter* error = nullptr;    // {result="error"}: the store failed (on_failure applied)
  // {result="shadow_denied"}: a denial let through (a shadow route); null
  // where there is none.
  Counter* shadow_denied = nullptr;
  // sluice_refunds_total{route}: requests whose charge count_status gave
  // back; null for a route without count_status.
  Counter* refunded = nullptr;
  // sluice_concurrency_slots_{taken,released}_total{route} (and the gauge
  // sluice_concurrency_slots_held{route}, their difference): slots of the
  // route's concurrency limits taken and given back; null for a route (or
  // policy) without one.
  Counter* slots_taken = nullptr;
  Counter* slots_released = nullptr;
  // sluice_decisions_total{route,algorithm,result}, one entry per limit of the
  // route in route order (limits sharing an algorithm share the series).
  struct LimitCounters {
    Counter* allowed = nullptr;
    Counter* denied = nullptr;
    Counter* error = nullptr;
  };
  std::vector<LimitCounters> limits;
  // A route that lists `plan`: the series of its plan limits (which follow
  // the route's own in a Plan), by algorithm (plans differ per consumer).
  // Null for algorithms no plan uses.
  std::array<LimitCounters, 6> plan_limits{};
  // sluice_limit_denials_total{route,limit}: the limit that fired (the
  // verdict's `reported`) of each denial that was not let through. One per
  // limit of the route in route order, then the plan limits by name (a
  // route that lists `plan`), made at load so every series shows from the
  // first scrape.
  std::vector<Counter*> limit_denials;
  std::vector<std::pair<std::string, Counter*>> named_denials;
  // Where a limit named in neither gets its series (the Envoy RLS
  // descriptors, whose rules change with reloads); null: not counted.
  Registry* denials_registry = nullptr;
  const DecisionSinks* sinks = nullptr;
  DecisionLog* log = nullptr;
  // This route's decisions per second (/admin/history); null without one.
  std::shared_ptr<RouteHistory> history;
  // sluice_http_request_duration_seconds{route,result} (request_duration.h).
  RequestDurations durations;
  // The gateway's upstream series (upstream_metrics.h); registered for the
  // routes of a config with `upstream`, null pointers otherwise.
  UpstreamSeries upstream;
  // A route with `cost:` (cost_metrics.h); null pointers otherwise.
  CostSeries cost;

  // The series of the limit at `index` of a Plan of this route; null
  // counters when there is none.
  const LimitCounters& limit_at(size_t index, const policy::RouteLimit& limit) const;
  // sluice_limit_denials_total of the limit named `limit` (registered in
  // denials_registry if it is not yet, null without one).
  Counter* denials_of(std::string_view limit) const;

  // policy::DecisionObserver
  void decided(const policy::Decided& decided) const override;
  // policy::ChargeObserver
  void on_slots_taken() const override;
  void on_slots_released() const override;
  void on_refunded() const override;
  void on_give_back_failed() const override;

 private:
  void store_failed(const policy::Decided& decided) const;
  void denied_shadow(const policy::Decided& decided) const;
  void denied_for_real(const policy::Decided& decided) const;
  void count_limit_denial(const policy::Verdict& verdict) const;
};

// Registers sluice_limit_denials_total{route, limit} in `registry` (zero
// until counted) and returns it.
Counter* limit_denials_counter(Registry& registry, std::string_view route, std::string_view limit);

// The series of one route with `limits` (`plans`: the config's plans when
// the route lists `plan`, else null), registered in `registry`; counted
// also in `sinks` and logged through `log`, which must outlive it.
RouteMetrics make_route_metrics(Registry& registry, const std::string& name,
                                const std::vector<policy::RouteLimit>& limits, bool shadow,
                                const std::vector<policy::ConsumerPlan>* plans,
                                const DecisionSinks& sinks, DecisionLog& log);

// A key as logs and /admin/stats show it: header-derived values hashed
// (into `buffer`) when `redact`. No copy for the others: this runs for every
// denied request.
std::string_view shown_key(bool redact, std::string_view key, std::string& buffer);

}  // namespace sluice::observe
