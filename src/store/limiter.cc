#include "sluice/limiter.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace sluice {

Limiter::Limiter(std::shared_ptr<Store> store, std::vector<Limit> limits, const Clock& clock)
    : store_(std::move(store)), limits_(std::move(limits)), clock_(clock) {}

Result<Decision> Limiter::try_acquire(std::string_view key, uint64_t cost) {
  if (limits_.empty()) return Error{ErrorCode::kInvalidArgument, "limiter has no limits"};
  if (limits_.size() == 1) {
    // One limit, the common case: its decision is the answer, which the
    // store writes straight into the result (one named result: returned in
    // place). Copying a Decision the store just wrote reloads its narrow
    // stores with wide loads, a store-forwarding stall per call (perf).
    const AcquireRequest request{&limits_[0], key, cost};
    Result<Decision> result{Decision{}};
    if (Status s = store_->acquire({&request, 1}, clock_.now(), {&result.value(), 1}); !s.ok())
      result = s.error();
    return result;
  }
  constexpr size_t kInline = 4;
  AcquireRequest inline_requests[kInline];
  Decision inline_out[kInline];
  std::vector<AcquireRequest> heap_requests;
  std::vector<Decision> heap_out;
  std::span<AcquireRequest> requests(inline_requests,
                                     limits_.size() <= kInline ? limits_.size() : 0);
  std::span<Decision> out(inline_out, requests.size());
  if (limits_.size() > kInline) {
    heap_requests.resize(limits_.size());
    heap_out.resize(limits_.size());
    requests = heap_requests;
    out = heap_out;
  }
  for (size_t i = 0; i < limits_.size(); ++i) requests[i] = {&limits_[i], key, cost};
  if (Status s = store_->acquire(requests, clock_.now(), out); !s.ok()) return s.error();
  return most_restrictive(out);
}

Result<Permit> Limiter::acquire(std::string_view key, uint64_t cost) {
  Result<Decision> d = try_acquire(key, cost);
  if (!d.ok()) return d.error();
  Permit permit;
  permit.decision_ = *d;
  const bool concurrency = std::any_of(limits_.begin(), limits_.end(), [](const Limit& l) {
    return l.algorithm() == Algorithm::kConcurrency;
  });
  if (d->allowed && concurrency) {
    permit.limiter_ = this;
    permit.key_ = std::string(key);
    permit.cost_ = cost;
  }
  return permit;
}

Status Limiter::give_back(const Permit& permit) {
  constexpr size_t kInline = 4;
  RefundRequest inline_refunds[kInline];
  std::vector<RefundRequest> heap_refunds;
  size_t n = 0;
  for (const Limit& limit : limits_) {
    if (limit.algorithm() != Algorithm::kConcurrency) continue;
    // Every limit of one store call is decided at the same time (decided_at).
    const RefundRequest r{&limit, permit.key_, permit.cost_, permit.decision_.decided_at};
    if (n < kInline) {
      inline_refunds[n] = r;
    } else {
      if (heap_refunds.empty()) heap_refunds.assign(inline_refunds, inline_refunds + kInline);
      heap_refunds.push_back(r);
    }
    ++n;
  }
  const std::span<const RefundRequest> refunds =
      n <= kInline ? std::span<const RefundRequest>(inline_refunds, n) : heap_refunds;
  return store_->refund(refunds, clock_.now());
}

Permit::Permit(Permit&& other) noexcept
    : limiter_(std::exchange(other.limiter_, nullptr)),
      key_(std::move(other.key_)),
      cost_(other.cost_),
      decision_(other.decision_) {}

Permit& Permit::operator=(Permit&& other) noexcept {
  if (this != &other) {
    (void)release();
    limiter_ = std::exchange(other.limiter_, nullptr);
    key_ = std::move(other.key_);
    cost_ = other.cost_;
    decision_ = other.decision_;
  }
  return *this;
}

Permit::~Permit() {
  (void)release();
}

Status Permit::release() {
  Limiter* limiter = std::exchange(limiter_, nullptr);  // once, whatever the store says
  if (limiter == nullptr) return {};
  return limiter->give_back(*this);
}

Status Limiter::reset(std::string_view key) {
  for (const Limit& limit : limits_) {
    Result<bool> r = store_->reset(limit, key);
    if (!r.ok()) return r.error();
  }
  return {};
}

}  // namespace sluice
