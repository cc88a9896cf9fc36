// The SplitMix64 finaliser: spreads every input bit over every output bit
// (limit fingerprints, hash-table slots). The same in every process.
// Header-only.
#pragma once

#include <cstdint>

namespace sluice::util {

constexpr uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

}  // namespace sluice::util
