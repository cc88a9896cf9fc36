// Decides one planned request against a store: every limit of the route,
// all-or-nothing, and the configured on_failure when the store cannot answer.
// The one place where front doors (gateway, /v1/check, /v1/auth, gRPC) turn a
// Plan into a Verdict; none has limiting logic of its own.
#pragma once

#include <cstdint>
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
  bool limited = false;  // false: no route/limit applied (no rate-limit headers)
  bool allowed = true;
  Decision decision;                     // the most restrictive (see sluice::most_restrictive)
  const RouteLimit* reported = nullptr;  // the limit `decision` belongs to
  // One per planned limit, in route order. On an overall denial, a limit that
  // would have allowed has allowed == true and `remaining` as it is now
  // (nothing was charged).
  std::vector<LimitOutcome> outcomes;
  bool store_failed = false;  // on_failure was applied
  // The request itself can never be allowed (a cost of 0, or above a limit's
  // size): allowed == false, store_failed == false, `error` says why. Not a
  // rate-limit denial: front doors answer it as a bad request.
  bool invalid = false;
  std::string error;  // the store's error message when it failed
};

// `on_failure_allow`: the verdict when the store fails (allow or deny). A
// failure gives limited == true, store_failed == true, allowed ==
// on_failure_allow, and decision {allowed, limit of the first limit,
// remaining 0, reset_after 0, retry_after 1s when denying}; `reported` is the
// first limit and each outcome carries that same decision.
// A plan without limits gives limited == false, allowed == true.
Verdict decide(Store& store, const Plan& plan, Nanos now, bool on_failure_allow);
// The same with a weighted cost (/v1/check's "cost"; >= 1).
Verdict decide(Store& store, const Plan& plan, Nanos now, bool on_failure_allow, uint64_t cost);

}  // namespace sluice::policy
