// A fast keyed 64-bit hash for store keys.
//
// The seed is random per process, so a client cannot precompute keys that
// land in one shard or one probe chain (hash flooding), nor keys whose
// fingerprints collide with someone else's. Each step multiplies 64x64 -> 128
// bits and folds the halves, which mixes every input bit into every output bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace sluice::store {

inline uint64_t fold_multiply(uint64_t a, uint64_t b) {
  const unsigned __int128 product = static_cast<unsigned __int128>(a) * b;
  return static_cast<uint64_t>(product) ^ static_cast<uint64_t>(product >> 64);
}

inline uint64_t load_u64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline uint64_t load_tail(const char* p, size_t n) {  // n in [1, 7]
  uint64_t v = 0;
  std::memcpy(&v, p, n);
  return v;
}

inline constexpr uint64_t kHashK0 = 0xa0761d6478bd642fULL;
inline constexpr uint64_t kHashK1 = 0xe7037ed1a0b428dbULL;
inline constexpr uint64_t kHashK2 = 0x8ebc6af09c88c6e3ULL;
inline constexpr uint64_t kHashK3 = 0x589965cc75374cc3ULL;

inline uint64_t keyed_hash(std::string_view key, uint64_t seed) {
  const char* p = key.data();
  size_t n = key.size();
  uint64_t h = fold_multiply(seed ^ kHashK0, static_cast<uint64_t>(n) ^ kHashK1);
  while (n >= 16) {
    h = fold_multiply(load_u64(p) ^ h ^ kHashK2, load_u64(p + 8) ^ kHashK3);
    p += 16;
    n -= 16;
  }
  uint64_t a = 0;
  uint64_t b = 0;
  if (n >= 8) {
    a = load_u64(p);
    b = n > 8 ? load_tail(p + 8, n - 8) : 0;
  } else if (n > 0) {
    a = load_tail(p, n);
  }
  h = fold_multiply(a ^ h ^ kHashK2, b ^ kHashK3 ^ seed);
  return fold_multiply(h ^ kHashK0, kHashK1 ^ (h >> 29));
}

}  // namespace sluice::store
