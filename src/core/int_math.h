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

// floor(a / b) for any a and b > 0 (C++ division truncates towards zero).
inline int64_t floor_div(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

}  // namespace sluice::core
