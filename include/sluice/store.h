// Store: where limit state lives. One interface for the embedded memory store
// and (later) Redis.
//
// Thread-safety: every Store implementation may be called from any number of
// threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "sluice/clock.h"
#include "sluice/decision.h"
#include "sluice/limit.h"
#include "sluice/result.h"

namespace sluice {

// One limit applied to one key. `limit` must outlive the call.
struct AcquireRequest {
  const Limit* limit = nullptr;
  std::string_view key;
  uint64_t cost = 1;
};

class Store {
 public:
  virtual ~Store() = default;

  // Applies all `requests` atomically: if every limit allows, all are charged;
  // if any denies, none is charged (all-or-nothing). out[i] receives the
  // decision of requests[i]; on an overall denial a limit that would have
  // allowed reports allowed == true with nothing consumed, so the caller can
  // tell which limits denied. `out.size()` must equal `requests.size()`.
  //
  // Errors: kInvalidArgument (cost 0, size mismatch, null limit),
  // kCostExceedsLimit (a cost above a limit's size: no wait would help),
  // kStoreUnavailable (a remote store did not answer). On error nothing is charged.
  virtual Status acquire(std::span<const AcquireRequest> requests, Nanos now,
                         std::span<Decision> out) = 0;

  // Forgets the state of `key` under `limit` (it starts full again).
  // Returns true if there was state to forget.
  virtual Result<bool> reset(const Limit& limit, std::string_view key) = 0;

  // Number of (limit, key) states currently held.
  virtual size_t size() const = 0;
};

// True if every decision allowed.
bool all_allowed(std::span<const Decision> decisions);

// The decision to report for a request with several limits: when allowed, the
// limit with the least remaining (then the longest reset); when denied, the
// denying limit with the longest retry_after.
Decision most_restrictive(std::span<const Decision> decisions);

}  // namespace sluice
