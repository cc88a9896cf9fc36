// Refunds: giving back a charge whose request turned out not to count
// (count_status), for every algorithm. Stores call these under the lock that
// guards the state, exactly as they call step().
//
// A refund makes the state what it would be now had the charge never been
// made. Buckets (token_bucket, gcra) get the tokens back, up to full: a full
// bucket has absorbed the charge already. Windows take the charge out of the
// window it was counted in (named by the charge's time), if that window
// still counts; once it has left, the charge costs nothing any more.
#pragma once

#include <optional>

#include "core/sliding_log.h"
#include "core/step.h"

namespace sluice::core {

// The state after giving back `cost` charged at `charged_at`, or nullopt when
// there is nothing to give back. `state` is the live state (not for
// sliding_log).
std::optional<PackedState> refund(const Limit& limit, PackedState state, Nanos charged_at,
                                  Nanos now, uint64_t cost);

// Takes `cost` units recorded at `charged_at` out of `log`: from the entry
// at that time, or (time ran backwards, so the charge joined a later entry)
// from the first entry after it. Nothing when the charge has left the
// window. Returns whether anything changed. `Log`: SlidingLog or InlineLog.
template <class Log>
bool sliding_log_refund(Log& log, const Limit& limit, Nanos charged_at, Nanos now, uint64_t cost) {
  // Entries at or before the horizon have left the window.
  if (charged_at.count() <= now.count() - limit.period().count()) return false;
  return log.take_back(charged_at.count(), cost);
}

}  // namespace sluice::core
