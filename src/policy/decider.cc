#include "policy/decider.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <memory>
#include <span>

namespace sluice::policy {
namespace {

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

constexpr size_t kInlineLimits = 8;

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

Verdict decide(Store& store, const Plan& plan, Nanos now, bool on_failure_allow) {
  return decide(store, plan, now, on_failure_allow, 1);
}

Verdict decide(Store& store, const Plan& plan, Nanos now, bool on_failure_allow, uint64_t cost) {
  Verdict v;
  const size_t n = plan.limits.size();
  if (n == 0) return v;
  v.limited = true;

  InlineArray<AcquireRequest, kInlineLimits> requests(n);
  InlineArray<Decision, kInlineLimits> decisions(n);
  for (size_t i = 0; i < n; ++i) {
    requests[i] = AcquireRequest{&plan.limits[i].limit->limit, plan.limits[i].store_key, cost};
  }
  const Status status = store.acquire(requests.span(), now, decisions.span());
  v.outcomes.reserve(n);

  if (!status.ok()) {
    const Error& error = status.error();
    v.error = error.message;
    Decision d;
    d.limit = plan.limits.front().limit->limit.size();
    if (error.code == ErrorCode::kInvalidArgument || error.code == ErrorCode::kCostExceedsLimit) {
      // Waiting would not help, so no retry time is invented.
      v.invalid = true;
      v.allowed = false;
    } else {
      v.store_failed = true;
      v.allowed = on_failure_allow;
      d.allowed = on_failure_allow;
      // A denial must say when to retry; one second is a polite guess while
      // the store is away.
      if (!on_failure_allow) d.retry_after = std::chrono::seconds(1);
    }
    fail(v, plan, d);
    return v;
  }

  const std::span<const Decision> out(decisions.data(), n);
  v.allowed = all_allowed(out);
  v.decision = most_restrictive(out);
  // most_restrictive returns a copy; the first equal decision names the limit
  // (equal decisions produce equal headers, so the choice is immaterial).
  for (size_t i = 0; i < n; ++i) {
    if (out[i] == v.decision) {
      v.reported = plan.limits[i].limit;
      break;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    Decision d = out[i];
    // On an overall denial nothing was charged, but a limit that would have
    // allowed reports what would be left after this request: give back the cost.
    if (!v.allowed && d.allowed) {
      d.remaining = cost >= d.limit - std::min(d.remaining, d.limit) ? d.limit : d.remaining + cost;
    }
    v.outcomes.push_back({plan.limits[i].limit, d});
  }
  return v;
}

}  // namespace sluice::policy
