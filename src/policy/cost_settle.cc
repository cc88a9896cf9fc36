#include "policy/cost_settle.h"

namespace sluice::policy {

uint64_t route_estimate(const Plan& plan) {
  return plan.route != nullptr && plan.route->cost ? plan.route->cost->estimate : 1;
}

size_t settle_cost(Store& store, const Plan& plan, const Verdict& verdict, uint64_t estimate,
                   uint64_t actual, Nanos now, Store::Done done) {
  if (verdict.result != Verdict::Result::kAllowed || actual == estimate) return 0;
  const bool debit = actual > estimate;
  // A refund never exceeds the estimate: actual is at least 0.
  const uint64_t difference = debit ? actual - estimate : estimate - actual;
  detail::InlineArray<RefundRequest, detail::kInlineLimits> requests(verdict.outcomes.size());
  for (size_t i = 0; i < verdict.outcomes.size(); ++i) {
    requests[i] = RefundRequest{&verdict.outcomes[i].limit->limit, plan.limits[i].store_key,
                                difference, verdict.outcomes[i].decision.decided_at, debit};
  }
  if (verdict.outcomes.empty()) return 0;
  store.refund_async(requests.span(), now, std::move(done));
  return verdict.outcomes.size();
}

}  // namespace sluice::policy
