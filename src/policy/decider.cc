#include "policy/decider.h"

#include <algorithm>
#include <chrono>

namespace sluice::policy {
namespace {

void fail(Verdict& v, const Plan& plan, Decision decision) {
  v.decision = decision;
  v.reported = plan.limits.front().limit;
  v.outcomes.clear();
  for (const PlannedLimit& planned : plan.limits) {
    Decision d = decision;
    d.limit = planned.limit->limit.size();
    v.outcomes.push_back({planned.limit, d});
  }
}

}  // namespace

namespace detail {

void fill_requests(const Plan& plan, uint64_t cost, Nanos max_wait, std::span<AcquireRequest> out) {
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = AcquireRequest{&plan.limits[i].limit->limit, plan.limits[i].store_key, cost, max_wait};
  }
}

Verdict make_verdict(const Plan& plan, uint64_t cost, OnFailure on_failure, const Status& status,
                     std::span<const Decision> out) {
  Verdict v;
  const size_t n = plan.limits.size();
  if (n == 0) return v;
  v.outcomes.reserve(n);

  if (!status.ok()) {
    const Error& error = status.error();
    v.error = error.message;
    Decision d;
    d.limit = plan.limits.front().limit->limit.size();
    if (error.code == ErrorCode::kInvalidArgument || error.code == ErrorCode::kCostExceedsLimit) {
      // Waiting would not help, so no retry time is invented.
      v.result = Verdict::Result::kInvalid;
    } else {
      const bool allow = on_failure == OnFailure::kAllow;
      v.result = allow ? Verdict::Result::kFailedAllowed : Verdict::Result::kFailedDenied;
      d.allowed = allow;
      // A denial must say when to retry; one second is a polite guess while
      // the store is away.
      if (!allow) d.retry_after = std::chrono::seconds(1);
    }
    fail(v, plan, d);
    return v;
  }

  v.result = all_allowed(out) ? Verdict::Result::kAllowed : Verdict::Result::kDenied;
  v.decision = most_restrictive(out);
  // A denial names the limit that fired: the first in the route's order that
  // denied, whichever is the most restrictive. Otherwise most_restrictive
  // returns a copy; the first equal decision names the limit.
  for (size_t i = 0; i < n; ++i) {
    if (v.allowed() ? out[i] == v.decision : !out[i].allowed) {
      v.reported = plan.limits[i].limit;
      break;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (v.allowed()) v.wait = std::max(v.wait, out[i].wait);
    Decision d = out[i];
    // On an overall denial nothing was charged, but a limit that would have
    // allowed reports what would be left after this request: give back the cost.
    if (!v.allowed() && d.allowed) {
      d.remaining = cost >= d.limit - std::min(d.remaining, d.limit) ? d.limit : d.remaining + cost;
    }
    v.outcomes.push_back({plan.limits[i].limit, d});
  }
  return v;
}

}  // namespace detail

Nanos route_delay(const Plan& plan) {
  return plan.route != nullptr ? plan.route->delay : Nanos{0};
}

std::string_view reported_key(const Plan& plan, const Verdict& verdict) {
  for (const PlannedLimit& planned : plan.limits) {
    if (planned.limit == verdict.reported) return planned.store_key;
  }
  return plan.limits.empty() ? std::string_view() : plan.limits.front().store_key;
}

std::string_view decision_key(const Plan& plan, const Verdict& verdict) {
  return plan.client_key.empty() ? reported_key(plan, verdict) : std::string_view(plan.client_key);
}

Verdict decide(Store& store, const Plan& plan, Nanos now, OnFailure on_failure) {
  return decide(store, plan, now, on_failure, 1);
}

Verdict decide(Store& store, const Plan& plan, Nanos now, OnFailure on_failure, uint64_t cost) {
  const size_t n = plan.limits.size();
  if (n == 0) return Verdict{};
  detail::RequestArray requests(n);
  detail::DecisionArray decisions(n);
  detail::fill_requests(plan, cost, route_delay(plan), requests.span());
  const Status status = store.acquire(requests.span(), now, decisions.span());
  return detail::make_verdict(plan, cost, on_failure, status, decisions.span());
}

namespace {

bool charged(const Verdict& verdict) {
  return verdict.result == Verdict::Result::kAllowed;
}

// Refunds the charge of each outcome `give_back(limit)` selects.
template <class Select>
size_t give_back(Store& store, const Plan& plan, const Verdict& verdict, Nanos now,
                 Store::Done done, Select selected) {
  if (!charged(verdict)) return 0;
  detail::InlineArray<RefundRequest, detail::kInlineLimits> refunds(verdict.outcomes.size());
  size_t n = 0;
  for (size_t i = 0; i < verdict.outcomes.size(); ++i) {
    const RouteLimit& limit = *verdict.outcomes[i].limit;
    if (!selected(limit)) continue;
    refunds[n++] = RefundRequest{&limit.limit, plan.limits[i].store_key, 1,
                                 verdict.outcomes[i].decision.decided_at};
  }
  if (n > 0) store.refund_async(refunds.span().first(n), now, std::move(done));
  return n;
}

bool is_concurrency(const RouteLimit& limit) {
  return limit.limit.algorithm() == Algorithm::kConcurrency;
}

}  // namespace

size_t give_back_uncounted(Store& store, const Plan& plan, const Verdict& verdict,
                           std::optional<int> status, Nanos now, Store::Done done) {
  return give_back(store, plan, verdict, now, std::move(done), [&](const RouteLimit& limit) {
    if (limit.count_status.empty()) return false;
    return !status ||
           !std::binary_search(limit.count_status.begin(), limit.count_status.end(), *status);
  });
}

bool holds_slots(const Verdict& verdict) {
  if (!charged(verdict)) return false;
  return std::any_of(verdict.outcomes.begin(), verdict.outcomes.end(),
                     [](const LimitOutcome& o) { return is_concurrency(*o.limit); });
}

size_t give_back_slots(Store& store, const Plan& plan, const Verdict& verdict, Nanos now,
                       Store::Done done) {
  return give_back(store, plan, verdict, now, std::move(done), is_concurrency);
}

size_t give_back_all(Store& store, const Plan& plan, const Verdict& verdict, Nanos now,
                     Store::Done done) {
  return give_back(store, plan, verdict, now, std::move(done),
                   [](const RouteLimit&) { return true; });
}

}  // namespace sluice::policy
