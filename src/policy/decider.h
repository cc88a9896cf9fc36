// Decides one planned request against a store: every limit of the route,
// all-or-nothing, and the configured on_failure when the store cannot answer.
// The one place where front doors (gateway, /v1/check, /v1/auth, gRPC) turn a
// Plan into a Verdict; none has limiting logic of its own.
#pragma once

#include <string>
#include <vector>

#include "policy/policy.h"
#include "sluice/clock.h"
#include "sluice/decision.h"
#include "sluice/store.h"

namespace sluice::policy {

struct LimitOutcome {
  const RouteLimit* limit = nullptr;
  Decision decision;
};

struct Verdict {
  bool limited = false;   // false: no route/limit applied (no rate-limit headers)
  bool allowed = true;
  Decision decision;      // the most restrictive (see sluice::most_restrictive)
  const RouteLimit* reported = nullptr;  // the limit `decision` belongs to
  std::vector<LimitOutcome> outcomes;    // one per planned limit, in route order
  bool store_failed = false;             // on_failure was applied
  std::string error;                     // the store's error message when it failed
};

// `on_failure_allow`: the verdict when the store fails (allow or deny).
Verdict decide(Store& store, const Plan& plan, Nanos now, bool on_failure_allow);

}  // namespace sluice::policy
