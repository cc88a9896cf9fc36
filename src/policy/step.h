// DecisionStep: the one decision step every front door calls (the gateway,
// /v1/check, /v1/auth, the Envoy RLS). A planned request is decided against
// the store (decider.h: every limit in one call, all-or-nothing), a store
// that cannot answer gets the configured on_failure (decider.h's
// make_verdict, the one place that says what a failed store's verdict is),
// the decision is reported once to the caller's observer (observer.h:
// metrics, store latency, the denial log, top denied keys), and then the
// door gets the verdict. What stays in a door is its answer's shape.
//
// Thread-safety: one step per thread or shared, as its store allows; `done`
// and the observer run on the thread that completes the store call.
#pragma once

#include <chrono>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "policy/decider.h"
#include "policy/observer.h"
#include "policy/policy.h"
#include "sluice/clock.h"
#include "sluice/store.h"

namespace sluice::policy {

// store.redis.on_failure of `config`.
OnFailure on_failure(const Config& config);

// What a door asks the step to decide.
struct Ask {
  const Plan& plan;  // must stay alive until `done` runs
  Nanos now;
  uint64_t cost = 1;  // >= 1 (/v1/check's "cost", the RLS's hits)
  // The longest the request may be held for its turn: the route's `delay`
  // (route_delay()), or 0 when it may not be held.
  Nanos max_wait{0};
  OnFailure on_failure = OnFailure::kAllow;
  // A denial is let through (a shadow route, the RLS's shadow_mode): the
  // observer counts and logs it as such.
  bool shadow = false;
};

class DecisionStep {
 public:
  // `store` and `clock` must outlive the step and whatever it hands out.
  DecisionStep(Store& store, const Clock& clock) : store_(store), clock_(clock) {}

  Store& store() const { return store_; }
  const Clock& clock() const { return clock_; }

  // Decides `ask`, reports it to `observer`, then done(Verdict): exactly
  // once, before this returns with a store that answers at once (memory),
  // later on the calling thread's event loop with Redis. `observer` must
  // stay alive until `done` runs. One allocation per decision, the one
  // decide_async() makes (none for a plan without limits).
  template <class Done>
  void decide(const Ask& ask, const DecisionObserver& observer, Done&& done) const;

 private:
  Store& store_;
  const Clock& clock_;
};

// ---- implementation -------------------------------------------------------

template <class Done>
void DecisionStep::decide(const Ask& ask, const DecisionObserver& observer, Done&& done) const {
  if (ask.plan.limits.empty()) {
    Verdict verdict;
    observer.decided(Decided{ask.plan, verdict, ask.now, 0, ask.shadow});
    return done(std::move(verdict));
  }
  const auto start = std::chrono::steady_clock::now();
  decide_async(store_, ask.plan, ask.now, ask.on_failure, ask.cost, ask.max_wait,
               [&observer, &plan = ask.plan, now = ask.now, shadow = ask.shadow, start,
                done = std::forward<Done>(done)](Verdict verdict) mutable {
                 const auto elapsed = std::chrono::steady_clock::now() - start;
                 observer.decided(Decided{
                     plan, verdict, now,
                     static_cast<uint64_t>(
                         std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count()),
                     shadow});
                 done(std::move(verdict));
               });
}

}  // namespace sluice::policy
