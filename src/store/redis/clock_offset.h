// ClockOffset: a lower bound of how far one Redis node's clock (TIME) is ahead
// of this process's steady clock, so that a call's deadline can travel in the
// clock the script compares it with.
//
// Why a deadline at all: a call that Sluice gave up on (its timeout passed and
// its caller got the on_failure answer) may still reach Redis and be applied
// later (a paused Redis meeting its backlog), charging units that no caller
// was allowed. The script therefore skips a request whose deadline has passed
// by Redis TIME. Ours is the only clock that knows the deadline, so it must be
// converted, and the conversion may err only early: a deadline that lands too
// early fails a call that was nearly timed out anyway; one that lands late
// lets Redis charge a call its caller was already refused for.
//
// The bound. theta = redis_clock - steady_clock. A reply carrying Redis TIME r
// to a command sent at steady s and received at steady v brackets it:
// r - v <= theta <= r - s (TIME was read in between). A lower end observed at
// v stays a lower bound at a later t if loosened by the worst relative drift
// of the two clocks, d * (t - v). So at t the bound is
//   max_i(r_i - v_i - d * (t - v_i)) = max_i(r_i - v_i + d * v_i) - d * t,
// and one atomic integer holds max_i(r_i - v_i + d * v_i): an observation is a
// fetch-max and a conversion is one load, whichever thread does either.
//
// Why the steady clock rather than the system clock: the timeout runs on it, so
// the local deadline needs no conversion of its own, and it is never stepped.
// Redis's clock can be (or a node can be replaced by one whose clock is behind,
// at the same address): the stored bound would then sit above theta, i.e.
// deadlines land late, until the drift term wore it down. The upper end catches
// it: a bound above r - s is impossible, and the observation then replaces it.
// A Redis clock stepped forward only makes the bound low (deadlines early) until
// the next observation raises it.
//
// Before the first observation there is no bound and calls carry no deadline
// (0): they behave as before the guard existed. A store observes every health
// check (TIME, every health_interval) and every script reply.
//
// Thread-safety: all methods may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>

namespace sluice::redis {

class ClockOffset {
 public:
  // The drift is 1/kDriftDivisor of elapsed time (1,000 ppm): two clocks each
  // within NTP's 500 ppm of true time. What it costs: deadlines land early by
  // the fastest reply latency seen plus 1,000 ppm of the bound's age, at most
  // 0.5 ms with a health check every 500 ms, much less under load (every
  // script reply observes too).
  static constexpr int64_t kDriftDivisor = 1'000;

  // Steady clock readings in whole microseconds, rounded so that every derived
  // bound stays on its safe side: deadlines and send times down, receipt up.
  static int64_t floor_us(std::chrono::steady_clock::time_point t) {
    return std::chrono::floor<std::chrono::microseconds>(t.time_since_epoch()).count();
  }
  static int64_t ceil_us(std::chrono::steady_clock::time_point t) {
    return std::chrono::ceil<std::chrono::microseconds>(t.time_since_epoch()).count();
  }

  // The local deadline `deadline_us` (steady clock) on the node's clock, in
  // microseconds since the epoch, or 0 (none) before any observation. `now_us`
  // is the steady clock when the call is sent: the bound is taken at the later
  // of the two, as an observation stored after the deadline (by another thread,
  // for a call sent late) holds only from its own time on.
  int64_t to_redis(int64_t deadline_us, int64_t now_us) const {
    const int64_t anchor = anchor_.load(std::memory_order_relaxed);
    if (anchor == kNone) return 0;
    const int64_t at = deadline_us > now_us ? deadline_us : now_us;
    return deadline_us + anchor - ceil_div(at, kDriftDivisor);
  }

  // A reply carrying Redis TIME `redis_us` (microseconds since the epoch) to a
  // command sent at steady `sent_us` and received at steady `received_us`.
  void observe(int64_t redis_us, int64_t sent_us, int64_t received_us) {
    const int64_t candidate = redis_us - received_us + received_us / kDriftDivisor;
    const int64_t upper = redis_us - sent_us;
    int64_t current = anchor_.load(std::memory_order_relaxed);
    for (;;) {
      const bool tighter = current == kNone || candidate > current;
      const bool impossible = !tighter && current - ceil_div(received_us, kDriftDivisor) > upper;
      if (!tighter && !impossible) return;
      if (anchor_.compare_exchange_weak(current, candidate, std::memory_order_relaxed)) return;
    }
  }

  // The lower bound of theta at steady `t_us`, or nullopt-like kNone (tests).
  int64_t bound_at(int64_t t_us) const {
    const int64_t anchor = anchor_.load(std::memory_order_relaxed);
    return anchor == kNone ? kNone : anchor - ceil_div(t_us, kDriftDivisor);
  }

  static constexpr int64_t kNone = std::numeric_limits<int64_t>::min();

 private:
  // For a >= 0, b > 0 (steady clock readings are).
  static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

  std::atomic<int64_t> anchor_{kNone};  // max_i(r_i - v_i + v_i / kDriftDivisor)
};

}  // namespace sluice::redis
