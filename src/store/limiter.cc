#include "sluice/limiter.h"

#include <vector>

namespace sluice {

Limiter::Limiter(std::shared_ptr<Store> store, std::vector<Limit> limits, const Clock& clock)
    : store_(std::move(store)), limits_(std::move(limits)), clock_(clock) {}

Result<Decision> Limiter::try_acquire(std::string_view key, uint64_t cost) {
  if (limits_.empty()) return Error{ErrorCode::kInvalidArgument, "limiter has no limits"};
  if (limits_.size() == 1) {
    // One limit, the common case: its decision is the answer.
    const AcquireRequest request{&limits_[0], key, cost};
    Decision out;
    if (Status s = store_->acquire({&request, 1}, clock_.now(), {&out, 1}); !s.ok()) {
      return s.error();
    }
    return out;
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

Status Limiter::reset(std::string_view key) {
  for (const Limit& limit : limits_) {
    Result<bool> r = store_->reset(limit, key);
    if (!r.ok()) return r.error();
  }
  return {};
}

}  // namespace sluice
