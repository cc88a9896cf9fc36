#include "policy/charge.h"

#include <algorithm>

namespace sluice::policy {

Charge::Charge(Store& store, const Clock& clock, const Plan& plan, const Verdict& verdict,
               const ChargeObserver& observer)
    : store_(&store), clock_(&clock), plan_(&plan), verdict_(&verdict), observer_(&observer) {
  slots_held_ = policy::holds_slots(verdict);
  if (slots_held_) observer.on_slots_taken();
  // Nothing to settle without count_status: no store call, no allocation.
  settled_ = !verdict.allowed() ||
             std::none_of(verdict.outcomes.begin(), verdict.outcomes.end(),
                          [](const LimitOutcome& o) { return !o.limit->count_status.empty(); });
}

Charge& Charge::operator=(Charge&& other) noexcept {
  if (this == &other) return *this;
  release();
  store_ = other.store_;
  clock_ = other.clock_;
  plan_ = other.plan_;
  verdict_ = other.verdict_;
  observer_ = other.observer_;
  settled_ = other.settled_;
  slots_held_ = std::exchange(other.slots_held_, false);
  partly_given_back_ = std::exchange(other.partly_given_back_, true);
  other.settled_ = true;
  return *this;
}

}  // namespace sluice::policy
