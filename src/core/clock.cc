#include "sluice/clock.h"

namespace sluice {

Nanos SystemClock::now() const {
  const int64_t wall =
      wall_ == nullptr
          ? std::chrono::duration_cast<Nanos>(std::chrono::system_clock::now().time_since_epoch())
                .count()
          : wall_().count();
  // Hold at the latest value this thread saw if the wall clock stepped back:
  // elapsed time seen by the algorithms must never be negative. Per thread,
  // not one shared atomic: a shared one is written by every call and its
  // cache line bounces between cores. Across threads, two calls may still
  // reach a store out of order; the algorithms treat time that runs back as
  // no time passing.
  thread_local int64_t latest = 0;
  if (wall > latest) latest = wall;
  return Nanos{latest};
}

SystemClock& SystemClock::instance() {
  static SystemClock clock;
  return clock;
}

}  // namespace sluice
