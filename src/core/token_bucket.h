// token_bucket: capacity tokens, refilled continuously at refill_tokens per
// refill_period, starting full; a request of cost c is allowed iff the bucket
// holds at least c tokens. The seed's Lua script, in exact integers.
//
// Tokens are counted in units: one token is limit.token_units() units and one
// nanosecond refills limit.units_per_ns() units, so refill never rounds.
//
// Queueing (max_wait > 0): a request the bucket cannot pay now is allowed
// with Decision::wait when the level may go that far below empty, down to
// max_wait's worth of refill (the debt); its wait is the time refill takes
// to bring the level back to empty. nginx's limit_req keeps the same
// quantity as `excess`.
#pragma once

#include <cstdint>

#include "sluice/decision.h"
#include "sluice/limit.h"

namespace sluice::core {

struct TokenBucketState {
  int64_t level_units;  // tokens held, in units
  int64_t last_ns;      // when level_units was computed
};

struct TokenBucketStep {
  Decision decision;
  TokenBucketState next;  // equal to the input state when denied
};

TokenBucketState token_bucket_fresh(const Limit& limit, Nanos now);
// The state refilled up to `now` (up to full), nothing charged.
TokenBucketState token_bucket_refill(const Limit& limit, const TokenBucketState& state, Nanos now);
// Writes the decision in place and returns the next state: the form stores
// call (core/step.h says why). The second form returns both.
TokenBucketState token_bucket(const Limit& limit, const TokenBucketState& state, Nanos now,
                              uint64_t cost, Nanos max_wait, Decision& decision);
inline TokenBucketStep token_bucket(const Limit& limit, const TokenBucketState& state, Nanos now,
                                    uint64_t cost, Nanos max_wait = Nanos{0}) {
  TokenBucketStep step;
  step.next = token_bucket(limit, state, now, cost, max_wait, step.decision);
  return step;
}

}  // namespace sluice::core
