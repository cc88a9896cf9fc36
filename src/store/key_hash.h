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

inline uint64_t load_u32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline constexpr uint64_t kHashK0 = 0xa0761d6478bd642fULL;
inline constexpr uint64_t kHashK1 = 0xe7037ed1a0b428dbULL;
inline constexpr uint64_t kHashK2 = 0x8ebc6af09c88c6e3ULL;
inline constexpr uint64_t kHashK3 = 0x589965cc75374cc3ULL;

inline uint64_t keyed_hash(std::string_view key, uint64_t seed) {
  const char* p = key.data();
  const size_t n = key.size();
  // Depends only on the seed and the length: computed while the key loads.
  uint64_t h = fold_multiply(seed ^ kHashK0, static_cast<uint64_t>(n) ^ kHashK1);
  // The last (or only) 16 bytes go in as two words a, b. Short keys are read
  // as two overlapping loads that together cover every byte, so no
  // variable-length copy (a call to memcpy) is on the path; with the length
  // mixed in above, distinct keys still give distinct inputs.
  uint64_t a = 0;
  uint64_t b = 0;
  if (n > 16) {
    // Whole 16-byte blocks, then the last 16 bytes (overlapping the last
    // block when n is not a multiple of 16).
    for (size_t left = n; left > 16; left -= 16, p += 16) {
      h = fold_multiply(load_u64(p) ^ h ^ kHashK2, load_u64(p + 8) ^ kHashK3);
    }
    a = load_u64(key.data() + n - 16);
    b = load_u64(key.data() + n - 8);
  } else if (n >= 8) {
    a = load_u64(p);
    b = load_u64(p + n - 8);
  } else if (n >= 4) {
    a = load_u32(p);
    b = load_u32(p + n - 4);
  } else if (n > 0) {
    a = static_cast<uint64_t>(static_cast<uint8_t>(p[0])) << 16 |
        static_cast<uint64_t>(static_cast<uint8_t>(p[n >> 1])) << 8 |
        static_cast<uint64_t>(static_cast<uint8_t>(p[n - 1]));
  }
  h = fold_multiply(a ^ h ^ kHashK2, b ^ kHashK3 ^ seed);
  return fold_multiply(h ^ kHashK0, kHashK1 ^ (h >> 29));
}

}  // namespace sluice::store
