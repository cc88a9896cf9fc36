// Decides one planned request against a store: every limit of the route,
// all-or-nothing, and the configured on_failure when the store cannot answer.
// The one place where front doors (gateway, /v1/check, /v1/auth, gRPC) turn a
// Plan into a Verdict; none has limiting logic of its own.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "policy/policy.h"
#include "sluice/clock.h"
#include "sluice/decision.h"
#include "sluice/store.h"

namespace sluice::policy {

struct LimitOutcome {
  const RouteLimit* limit = nullptr;
  Decision decision;
};

struct Verdict {
  // What the request came to: one of these, never a mix.
  enum class Result : uint8_t {
    kUnlimited,      // no route or limit applied: allowed, no rate-limit headers
    kAllowed,        // every limit allowed (and charged) it
    kDenied,         // a limit denied it (nothing was charged)
    kFailedAllowed,  // the store could not decide; on_failure: allow
    kFailedDenied,   // the store could not decide; on_failure: deny
    // The request itself can never be allowed (a cost of 0, or above a
    // limit's size), `error` says why. Not a rate-limit denial: front doors
    // answer it as a bad request.
    kInvalid,
  };
  Result result = Result::kUnlimited;

  // Views of `result`.
  bool limited() const { return result != Result::kUnlimited; }
  bool allowed() const {
    return result == Result::kUnlimited || result == Result::kAllowed ||
           result == Result::kFailedAllowed;
  }
  bool store_failed() const {  // on_failure was applied
    return result == Result::kFailedAllowed || result == Result::kFailedDenied;
  }
  bool invalid() const { return result == Result::kInvalid; }

  Decision decision;  // the most restrictive (see sluice::most_restrictive)
  // The limit the verdict names: on a denial the first in the plan's order
  // that denied (the limit that fired; `decision` may be another's, the most
  // restrictive), else the one `decision` belongs to.
  const RouteLimit* reported = nullptr;
  // One per planned limit, in route order. On an overall denial, a limit that
  // would have allowed has allowed == true and `remaining` as it is now
  // (nothing was charged).
  std::vector<LimitOutcome> outcomes;
  // Queueing (the route's `delay`): allowed, and to be held this long
  // before it goes on (the longest of its limits' Decision::wait); 0 for a
  // request that goes on now. Its charge is made: a caller that gives up on
  // a held request gives it back with give_back_all().
  Nanos wait{0};
  std::string error;  // the store's error message when it failed (or kInvalid's reason)
};

// store.redis.on_failure: the verdict of a request the store could not
// decide (Redis down, late or overloaded).
enum class OnFailure : uint8_t { kAllow, kDeny };

// `on_failure`: the verdict when the store fails. A failure gives
// kFailedAllowed or kFailedDenied as on_failure says, and decision
// {allowed, limit of the first limit, remaining 0, reset_after 0,
// retry_after 1s when denying}; `reported` is the first limit and each
// outcome carries that same decision.
// A plan without limits gives kUnlimited.
Verdict decide(Store& store, const Plan& plan, Nanos now, OnFailure on_failure);
// The same with a weighted cost (/v1/check's "cost"; >= 1).
Verdict decide(Store& store, const Plan& plan, Nanos now, OnFailure on_failure, uint64_t cost);

// The asynchronous form, for servers, built on Store::acquire_async: the same
// verdict as decide(), handed to `done(Verdict)` exactly once. With a store
// that completes at once (the memory store) `done` runs before decide_async
// returns; with Redis it runs later on the event loop of the calling thread
// (see RedisStore::attach), or inline when the call fails at once.
// `plan` must stay alive until `done` runs (the verdict is built from it);
// the requests sent to the store do not outlive this call, and the decisions
// the store fills live in one heap block that also holds `done` (so a
// callback of a few pointers costs one allocation per decision, not three).
template <class Done>
void decide_async(Store& store, const Plan& plan, Nanos now, OnFailure on_failure, uint64_t cost,
                  Done&& done);
// The same with the longest a request may be held given by the caller
// instead of the route's `delay` (server.max_held reached: 0, no holding).
template <class Done>
void decide_async(Store& store, const Plan& plan, Nanos now, OnFailure on_failure, uint64_t cost,
                  Nanos max_wait, Done&& done);

// The route's `delay`: the longest a request of `plan` may be held (0: none).
Nanos route_delay(const Plan& plan);

// The store key of the limit `verdict` reports (the first limit's when none).
std::string_view reported_key(const Plan& plan, const Verdict& verdict);
// The key a decision is known by in logs: the client key, else (a policy's
// or the RLS's plan) the reported limit's store key.
std::string_view decision_key(const Plan& plan, const Verdict& verdict);

// count_status: after the gateway has proxied a request it charged, gives
// back each limit whose count_status does not list the response's `status`
// (nullopt: the upstream never received the request, so nothing was tried).
// Returns how many limits it gives back; `done` runs (exactly once, perhaps
// before this returns) only when that is more than 0. Nothing is given back
// for a verdict that charged nothing (denied, store failed, invalid) or for
// limits without count_status. `plan` and `verdict` need to live only for
// this call.
size_t give_back_uncounted(Store& store, const Plan& plan, const Verdict& verdict,
                           std::optional<int> status, Nanos now, Store::Done done);

// concurrency: whether `verdict` took slots (it charged a concurrency limit),
// which the request must give back, once, with give_back_slots() when it ends.
bool holds_slots(const Verdict& verdict);

// Gives back the slots `verdict` took: each concurrency limit's charge, as
// give_back_uncounted() does (same return value and `done`). A slot is a log
// entry stamped with the decision's time, so the refund finds exactly it;
// calling this twice for one verdict would give back another request's
// slot, so callers guard it (http/forwarder.h).
size_t give_back_slots(Store& store, const Plan& plan, const Verdict& verdict, Nanos now,
                       Store::Done done);

// Gives back every charge of an allowed verdict: a held request (wait > 0)
// whose client left before its turn frees its place. Returns how many
// limits it gives back (0 for a verdict that charged nothing); `done` runs
// as for give_back_uncounted.
size_t give_back_all(Store& store, const Plan& plan, const Verdict& verdict, Nanos now,
                     Store::Done done);

// ---- implementation -------------------------------------------------------

namespace detail {

// Requests and decisions for one store call: inline for the usual handful of
// limits per route, on the heap only for longer lists.
template <class T, size_t N>
class InlineArray {
 public:
  explicit InlineArray(size_t n) : size_(n) {
    if (n > N) heap_ = std::make_unique<T[]>(n);
  }
  T* data() { return heap_ ? heap_.get() : inline_.data(); }
  std::span<T> span() { return {data(), size_}; }
  T& operator[](size_t i) { return data()[i]; }

 private:
  std::array<T, N> inline_{};
  std::unique_ptr<T[]> heap_;
  size_t size_;
};

inline constexpr size_t kInlineLimits = 8;
using RequestArray = InlineArray<AcquireRequest, kInlineLimits>;
using DecisionArray = InlineArray<Decision, kInlineLimits>;

// One store request per planned limit, in plan order (the keys point into
// `plan`), each with `max_wait`.
void fill_requests(const Plan& plan, uint64_t cost, Nanos max_wait, std::span<AcquireRequest> out);

// The verdict of a store call that answered `status` and filled `decisions`
// (one per planned limit): what decide() and decide_async() both return.
Verdict make_verdict(const Plan& plan, uint64_t cost, OnFailure on_failure, const Status& status,
                     std::span<const Decision> decisions);

}  // namespace detail

template <class Done>
void decide_async(Store& store, const Plan& plan, Nanos now, OnFailure on_failure, uint64_t cost,
                  Done&& done) {
  decide_async(store, plan, now, on_failure, cost, route_delay(plan), std::forward<Done>(done));
}

template <class Done>
void decide_async(Store& store, const Plan& plan, Nanos now, OnFailure on_failure, uint64_t cost,
                  Nanos max_wait, Done&& done) {
  const size_t n = plan.limits.size();
  if (n == 0) {
    done(Verdict{});
    return;
  }
  struct Pending {
    Pending(const Plan& p, size_t size, uint64_t c, OnFailure f, Done&& d)
        : plan(p), decisions(size), cost(c), on_failure(f), done(std::forward<Done>(d)) {}
    const Plan& plan;
    detail::DecisionArray decisions;
    uint64_t cost;
    OnFailure on_failure;
    std::decay_t<Done> done;
  };
  auto* pending = new Pending(plan, n, cost, on_failure, std::forward<Done>(done));
  detail::RequestArray requests(n);
  detail::fill_requests(plan, cost, max_wait, requests.span());
  // The store's callback holds one raw pointer: it fits std::function's inline
  // storage (no allocation), and the store calls it exactly once.
  store.acquire_async(requests.span(), now, pending->decisions.span(), [pending](Status status) {
    const std::unique_ptr<Pending> owned(pending);
    owned->done(detail::make_verdict(owned->plan, owned->cost, owned->on_failure, status,
                                     owned->decisions.span()));
  });
}

}  // namespace sluice::policy
