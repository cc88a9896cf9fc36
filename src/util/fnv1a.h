// FNV-1a, 64 bits: a hash that is the same in every process and on every
// machine (Redis slot spreading, hashed keys in logs rely on that). Not
// keyed: never use it where an attacker's collisions would matter.
// Header-only.
#pragma once

#include <cstdint>
#include <string_view>

namespace sluice::util {

inline constexpr uint64_t kFnv1a64Basis = 0xcbf29ce484222325ULL;

// `h`: the hash of what came before, to hash a text given in parts.
constexpr uint64_t fnv1a64(std::string_view s, uint64_t h = kFnv1a64Basis) {
  for (const char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

}  // namespace sluice::util
