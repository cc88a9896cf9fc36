// Decision: the answer of a limit to one request.
//
// Being over the limit is a Decision with allowed == false, not an error.
#pragma once

#include <cstdint>

#include "sluice/clock.h"

namespace sluice {

struct Decision {
  bool allowed = false;
  // The limit's size: capacity (token_bucket, gcra) or limit (window algorithms).
  uint64_t limit = 0;
  // What is left after this request (>= 0). For a denial: what is left now.
  uint64_t remaining = 0;
  // Until the limit is fully restored (buckets) or the current window ends
  // (windows); 0 when nothing is consumed.
  Nanos reset_after{0};
  // 0 when allowed. When denied: the shortest wait after which the same request
  // would be allowed if nothing else consumed meanwhile; never 0, never too short.
  Nanos retry_after{0};
  // How long the request waits before it may proceed: 0 for a request allowed
  // now; above 0 only when it was asked for (AcquireRequest::max_wait) and
  // the request was allowed against refill still to come, its place
  // reserved (charged now, as if at its turn; see AcquireRequest::max_wait).
  Nanos wait{0};
  // When the store decided: the `now` it was given, or the Redis server's
  // clock with time_source: redis. A refund names the charge by it (see
  // Store::refund). Not compared: two decisions are equal when they decide
  // the same.
  Nanos decided_at{0};

  friend bool operator==(const Decision& a, const Decision& b) {
    return a.allowed == b.allowed && a.limit == b.limit && a.remaining == b.remaining &&
           a.reset_after == b.reset_after && a.retry_after == b.retry_after && a.wait == b.wait;
  }
};

}  // namespace sluice
