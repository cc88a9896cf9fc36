// A gate that lets denial log lines through at a bounded rate, so an attack
// that is denied a million times a second writes a handful of lines, each
// saying how many were suppressed since the previous one.
//
// Thread-safety: admit() may be called from any thread; it never blocks (one
// compare-and-swap when a line is due, one relaxed increment otherwise).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "sluice/clock.h"

namespace sluice::observe {

class DenialLogGate {
 public:
  // At most `per_second` lines per second (fractions allowed: 0.1 = one per
  // 10 s). 0 or less: never log, count everything as suppressed.
  explicit DenialLogGate(double per_second);

  struct Admission {
    bool log = false;
    uint64_t suppressed_before = 0;  // denials not logged since the previous logged one
  };
  Admission admit(Nanos now);

  uint64_t logged() const { return logged_.load(std::memory_order_relaxed); }
  uint64_t suppressed_total() const { return suppressed_total_.load(std::memory_order_relaxed); }

 private:
  int64_t interval_ns_;  // 0: never log
  std::atomic<int64_t> next_ns_{0};
  std::atomic<uint64_t> suppressed_since_{0};
  std::atomic<uint64_t> suppressed_total_{0};
  std::atomic<uint64_t> logged_{0};
};

// What a logged line adds after suppressed ones: " (N <what> not logged
// before this one)", or "" when none was suppressed.
std::string suppressed_note(const DenialLogGate::Admission& a, std::string_view what);

}  // namespace sluice::observe
