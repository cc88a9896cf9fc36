// Debits: charging what a request turned out to cost beyond what it was
// admitted with (a route's `cost`, settled after the response). Unlike an
// acquire, a debit is never refused: the cost was spent already, so the
// state may go below empty (a debt), and later requests wait until refill
// has paid the debt and their own cost. Stores call it under the lock that
// guards the state, exactly as they call refund().
//
// Buckets (token_bucket, gcra) take the debt as a level below empty (the
// same quantity queueing keeps), capped at 2^61 units below empty so that
// the arithmetic stays in 64 bits. fixed_window adds to the count of the
// window the request was admitted in (named by its charge time), while that
// window still counts; a debt in a window that has ended is gone with it.
// The other algorithms take no debit (routes with `cost` refuse them).
#pragma once

#include <optional>

#include "core/step.h"

namespace sluice::core {

struct Debited {
  PackedState state;
  Nanos reset_after{0};  // from `now` until the state is full again
};

// Whether `algorithm` can take a debit.
bool takes_debit(Algorithm algorithm);

// The state after charging `cost` more at `now` for a request charged at
// `charged_at`, from `state` (nullopt: no live state, a full one), or
// nullopt when nothing is to be written (the charge's window has ended, or
// the algorithm takes no debit).
std::optional<Debited> debit(const Limit& limit, std::optional<PackedState> state, Nanos charged_at,
                             Nanos now, uint64_t cost);

}  // namespace sluice::core
