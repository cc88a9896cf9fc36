// Clock: the one source of time for limiters and stores.
//
// Time is integer nanoseconds since the Unix epoch, so fixed windows align to
// wall-clock minutes and X-RateLimit-Reset can be computed from it. Algorithms
// never read a clock: the limiter reads it once per request and passes `now`.
//
// Thread-safety: SystemClock and ManualClock may be read from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace sluice {

using Nanos = std::chrono::nanoseconds;

class Clock {
 public:
  virtual ~Clock() = default;
  // Nanoseconds since the Unix epoch. Never decreases between calls made on
  // one thread.
  virtual Nanos now() const = 0;
};

// The system's real-time clock, made monotonic per thread: if the wall clock
// steps back (NTP), now() holds at the latest value it returned on the
// calling thread rather than going backwards. Calls from several threads may
// reach a store slightly out of order (as any two racing threads can); the
// algorithms count time that runs backwards as no time passing.
class SystemClock final : public Clock {
 public:
  // The raw wall time in nanoseconds since the Unix epoch, before the hold.
  using WallSource = Nanos (*)();

  // Reads std::chrono::system_clock.
  SystemClock() = default;
  // Reads `wall` instead (a test's wall clock that steps back). The latest
  // value is held per thread for every SystemClock of that thread, as they
  // all read one wall clock: a test reads an injected one on a thread of its
  // own.
  explicit SystemClock(WallSource wall) : wall_(wall) {}

  Nanos now() const override;

  // A process-wide instance on std::chrono::system_clock.
  static SystemClock& instance();

 private:
  WallSource wall_ = nullptr;  // null: std::chrono::system_clock
};

// A clock that only moves when told to. For tests and simulations.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(Nanos start = Nanos{0}) : now_ns_(start.count()) {}

  Nanos now() const override { return Nanos{now_ns_.load(std::memory_order_acquire)}; }
  void advance(Nanos by) { now_ns_.fetch_add(by.count(), std::memory_order_acq_rel); }
  void set(Nanos to) { now_ns_.store(to.count(), std::memory_order_release); }

 private:
  std::atomic<int64_t> now_ns_;
};

}  // namespace sluice
