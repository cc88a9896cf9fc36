// Small exact-integer helpers shared by the algorithms.
#pragma once

#include <cstdint>

namespace sluice::core {

using i128 = __int128;

// ceil(a / b) for a >= 0, b > 0.
inline int64_t ceil_div(i128 a, i128 b) {
  return static_cast<int64_t>((a + b - 1) / b);
}

// The same in 64 bits, for the hot path: a 128-bit division is a library
// call several times slower than the hardware's 64-bit one. Never overflows.
inline int64_t ceil_div(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return a % b != 0 ? q + 1 : q;
}

// The most debt (units below empty) a queued request may put a bucket in:
// max_wait's worth of refill, capped at 2^61 units so that a debt beside a
// full bucket of the largest exact size (2^62 units) still fits 64 bits.
// The cap is a wait of years at any real rate.
inline int64_t debt_allowed(int64_t max_wait_ns, int64_t units_per_ns) {
  if (max_wait_ns <= 0) return 0;
  const i128 units = static_cast<i128>(max_wait_ns) * units_per_ns;
  constexpr i128 kCap = i128{1} << 61;
  return static_cast<int64_t>(units < kCap ? units : kCap);
}

// floor(a / b) for any a and b > 0 (C++ division truncates towards zero).
inline int64_t floor_div(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

}  // namespace sluice::core
