#include "sluice/clock.h"

namespace sluice {

Nanos SystemClock::now() const {
  const int64_t wall =
      std::chrono::duration_cast<Nanos>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  // Hold at the latest value if the wall clock stepped back: elapsed time seen
  // by the algorithms must never be negative.
  int64_t latest = latest_ns_.load(std::memory_order_relaxed);
  while (wall > latest) {
    if (latest_ns_.compare_exchange_weak(latest, wall, std::memory_order_relaxed))
      return Nanos{wall};
  }
  return Nanos{latest};
}

SystemClock& SystemClock::instance() {
  static SystemClock clock;
  return clock;
}

}  // namespace sluice
