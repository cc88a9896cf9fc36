// Store: where limit state lives. One interface for the embedded memory store
// and Redis; a server asks it what it is (backend()) and gives it its upkeep
// (maintain()) through this interface alone.
//
// Thread-safety: every Store implementation may be called from any number of
// threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
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
  // Queueing (a route's `delay`): a request that refill up to this far ahead
  // would allow is allowed now with Decision::wait > 0 and charged now, the
  // bucket going into debt by at most max_wait's worth of refill; the caller
  // holds it for `wait` before acting on it, and refunds it if it gives up.
  // A bucket in debt stays below full, where refill is linear, so charging
  // at arrival leaves at its turn the state charging then would leave; and
  // later requests queue behind the debt, so their turns come in arrival
  // order. Only token_bucket and gcra have such a debt: other algorithms
  // refuse a max_wait above 0 with kInvalidArgument.
  Nanos max_wait{0};
};

// Gives back what one acquire() charged, for a limit whose charge depends on
// an outcome learnt later (count_status: only failed logins count).
// `charged_at` is the Decision::decided_at of the charge, `cost` its cost.
struct RefundRequest {
  const Limit* limit = nullptr;
  std::string_view key;
  uint64_t cost = 1;
  Nanos charged_at{0};
  // Charges `cost` more instead of giving it back, never refused: the
  // request spent more than it was admitted with (a route's `cost`, settled
  // after the response), so the state may go into debt. token_bucket and
  // gcra only, and fixed_window while the charge's window counts; other
  // algorithms are left as they are.
  bool debit = false;
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
  // Errors: kInvalidArgument (cost 0, size mismatch, null limit, max_wait
  // on an algorithm without debt, or on a store that does not queue),
  // kCostExceedsLimit (a cost above a limit's size: no wait would help),
  // kStoreUnavailable (a remote store did not answer). On error nothing is charged.
  virtual Status acquire(std::span<const AcquireRequest> requests, Nanos now,
                         std::span<Decision> out) = 0;

  // The asynchronous form, for servers: `done` is called exactly once with the
  // status, after `out` is filled. A store that talks to the network (Redis)
  // issues the call on the event loop of the calling thread and returns at
  // once; `requests` may be released when this returns, `out` must stay alive
  // until `done` runs. The default implementation calls acquire() and then
  // `done` before returning.
  using Done = std::function<void(Status)>;
  virtual void acquire_async(std::span<const AcquireRequest> requests, Nanos now,
                             std::span<Decision> out, Done done);

  // Gives back each request's charge: the state becomes what it would be now
  // had that charge never been made (token_bucket, gcra: the tokens return,
  // up to full; window algorithms: the charge leaves the window it was
  // counted in, if that window still counts). A lockout a denial started
  // stays. A request with `debit` charges instead (RefundRequest). Not
  // atomic across requests on every store; each is exact on its own.
  // Errors: kInvalidArgument (cost 0, null limit), kStoreUnavailable. The
  // default refuses: a store that cannot refund says so rather than keep
  // a charge silently.
  virtual Status refund(std::span<const RefundRequest> requests, Nanos now);

  // The asynchronous form (as acquire_async): `done` is called exactly once.
  // The default calls refund() and then `done` before returning.
  virtual void refund_async(std::span<const RefundRequest> requests, Nanos now, Done done);

  // Whether the store can apply `limit` exactly; the error says why not (the
  // Redis store's Lua arithmetic is exact only below 2^53, for example). A
  // server checks every limit of a config against its store before serving
  // it. The memory store takes every valid Limit.
  virtual Status check_limit(const Limit& limit) const {
    (void)limit;
    return {};
  }

  // Whether the store can answer now (for /readyz). The memory store always can.
  virtual bool ready() const { return true; }

  // Forgets the state of `key` under `limit` (it starts full again).
  // Returns true if there was state to forget.
  virtual Result<bool> reset(const Limit& limit, std::string_view key) = 0;

  // Number of (limit, key) states currently held.
  virtual size_t size() const = 0;

  // size() as last observed, without waiting on anything remote: for
  // metrics and dashboards polled often. The memory store counts in place.
  virtual size_t observed_size() const { return size(); }

  // What kind of store this is, for a server to report (/admin/stats
  // `store.backend`): "memory", "redis". The text lives as long as the
  // program. A store of the embedding program's own that does not say is
  // "other".
  virtual std::string_view backend() const { return "other"; }

  // The store's periodic upkeep: a server calls it every second or so, from
  // one thread, with the time it decides with. Decisions never depend on it
  // (a state past its expiry already counts as full), only memory does: the
  // memory store drops the states that are full again (collect_expired). The
  // default does nothing, for a store whose upkeep runs on its own (the
  // Redis store's: its internal thread) or that has none.
  virtual void maintain(Nanos now) { (void)now; }
};

// True if every decision allowed.
bool all_allowed(std::span<const Decision> decisions);

// The decision to report for a request with several limits: when allowed, the
// limit with the least remaining (then the longest reset); when denied, the
// denying limit with the longest retry_after.
Decision most_restrictive(std::span<const Decision> decisions);

}  // namespace sluice
