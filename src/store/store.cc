#include "sluice/store.h"

namespace sluice {

void Store::acquire_async(std::span<const AcquireRequest> requests, Nanos now,
                          std::span<Decision> out, Done done) {
  Status status = acquire(requests, now, out);
  done(std::move(status));
}

Status Store::refund(std::span<const RefundRequest> requests, Nanos now) {
  (void)requests;
  (void)now;
  return Error{ErrorCode::kInvalidArgument, "this store cannot give back a charge (refund)"};
}

void Store::refund_async(std::span<const RefundRequest> requests, Nanos now, Done done) {
  Status status = refund(requests, now);
  done(std::move(status));
}

bool all_allowed(std::span<const Decision> decisions) {
  for (const Decision& d : decisions) {
    if (!d.allowed) return false;
  }
  return true;
}

Decision most_restrictive(std::span<const Decision> decisions) {
  if (decisions.empty()) return Decision{};
  const bool allowed = all_allowed(decisions);
  const Decision* pick = nullptr;
  for (const Decision& d : decisions) {
    if (!allowed) {
      if (d.allowed) continue;
      if (pick == nullptr || d.retry_after > pick->retry_after) pick = &d;
    } else if (pick == nullptr || d.remaining < pick->remaining ||
               (d.remaining == pick->remaining && d.reset_after > pick->reset_after)) {
      pick = &d;
    }
  }
  return *pick;
}

}  // namespace sluice
