// DecisionObserver: what sees every decision of every front door (gateway,
// /v1/check, /v1/auth, Envoy RLS), once each; ChargeObserver: what sees a
// charge given back. The decision step (step.h)
// calls it; policy declares it and never knows how decisions are counted or logged:
// observe::RouteMetrics (observe/route_metrics.h) implements it, one per
// route, named policy, plan and for the RLS descriptors.
//
// Thread-safety: called on the thread that completes a decision (a worker
// loop, a gRPC thread), so an implementation is thread-safe.
#pragma once

#include <cstdint>

#include "sluice/clock.h"

namespace sluice::policy {

struct Plan;
struct Verdict;

// One decision, as the step reports it. Valid only during the call.
struct Decided {
  const Plan& plan;
  const Verdict& verdict;
  Nanos now;              // the time it was decided at (the door's clock)
  uint64_t store_ns = 0;  // how long the store took to answer; 0 when it was not asked
  // A denial is let through and counted as such (a shadow route, the RLS's
  // shadow_mode).
  bool shadow = false;
};

class DecisionObserver {
 public:
  // One decision, before the door sees its verdict.
  virtual void decided(const Decided& decided) const = 0;

 protected:
  ~DecisionObserver() = default;
};

// What sees a charge given back (charge.h): the gateway's count_status
// refunds and concurrency slots.
class ChargeObserver {
 public:
  // A request took slots of concurrency limits.
  virtual void on_slots_taken() const = 0;
  // It gives them back (counted when asked, before the store has applied it).
  virtual void on_slots_released() const = 0;
  // count_status gave a charge back (the store has applied it).
  virtual void on_refunded() const = 0;
  // The store failed to give a charge back (a slot then frees itself when
  // its lease ends; a refund is lost).
  virtual void on_give_back_failed() const = 0;

 protected:
  ~ChargeObserver() = default;
};

}  // namespace sluice::policy
