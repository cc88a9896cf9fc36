#include "observe/denial_log.h"

#include <cmath>

namespace sluice::observe {

DenialLogGate::DenialLogGate(double per_second) {
  if (!(per_second > 0)) {
    interval_ns_ = 0;
  } else {
    const double ns = std::ceil(1e9 / per_second);
    interval_ns_ = ns < 1 ? 1 : ns > 1e18 ? static_cast<int64_t>(1e18) : static_cast<int64_t>(ns);
  }
}

DenialLogGate::Admission DenialLogGate::admit(Nanos now) {
  Admission a;
  int64_t next = next_ns_.load(std::memory_order_relaxed);
  // Whoever moves `next_ns_` forward owns the line; everyone else counts as
  // suppressed. At most one line per interval, whatever the thread count.
  if (interval_ns_ == 0 || now.count() < next ||
      !next_ns_.compare_exchange_strong(next, now.count() + interval_ns_,
                                        std::memory_order_relaxed)) {
    suppressed_since_.fetch_add(1, std::memory_order_relaxed);
    suppressed_total_.fetch_add(1, std::memory_order_relaxed);
    return a;
  }
  a.log = true;
  a.suppressed_before = suppressed_since_.exchange(0, std::memory_order_relaxed);
  logged_.fetch_add(1, std::memory_order_relaxed);
  return a;
}

std::string suppressed_note(const DenialLogGate::Admission& a, std::string_view what) {
  if (a.suppressed_before == 0) return {};
  std::string note = " (" + std::to_string(a.suppressed_before) + " ";
  note += what;
  note += " not logged before this one)";
  return note;
}

}  // namespace sluice::observe
