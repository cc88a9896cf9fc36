// Settling a route's `cost:` (policy/route_cost.h): a request was charged
// its estimate on every limit of the route; once the response has told
// what it cost, the difference goes to every limit: actual − estimate more
// (a debit, never refused, so a limit may go into debt) or estimate −
// actual back (a refund, at most the estimate). One store call
// (Store::refund with RefundRequest::debit), so it is applied once.
#pragma once

#include <cstddef>
#include <cstdint>

#include "policy/decider.h"
#include "policy/policy.h"
#include "sluice/store.h"

namespace sluice::policy {

// What a request of `plan` is charged before proxying: its route's
// estimate, 1 without `cost:`.
uint64_t route_estimate(const Plan& plan);

// Charges `actual` − `estimate` to every limit `verdict` charged (nothing
// for a verdict that charged nothing, or when they are equal). Returns how
// many limits the store call covers; `done` runs (exactly once, perhaps
// before this returns) only when that is more than 0. `plan` and `verdict`
// need to live only for this call.
size_t settle_cost(Store& store, const Plan& plan, const Verdict& verdict, uint64_t estimate,
                   uint64_t actual, Nanos now, Store::Done done);

}  // namespace sluice::policy
