// How a Limit is passed to the Lua scripts, and where its state lives.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "sluice/limit.h"
#include "sluice/result.h"

namespace sluice::redis {

// Integers in Redis Lua are doubles: exact below 2^53.
inline constexpr uint64_t kExactLimit = uint64_t{1} << 53;

// The script arguments of one limit: (capacity, unit, rate) for the bucket
// algorithms, where one token is `unit` units and one microsecond refills
// `rate` units (refill_tokens / refill_period_us reduced by their gcd);
// (limit, window_us, 0) for the window algorithms.
struct ScriptLimit {
  std::string_view algorithm;  // the name the scripts register it under
  uint64_t p1 = 0;
  uint64_t p2 = 0;
  uint64_t p3 = 0;
};

// kInvalidArgument when the limit's arithmetic would not stay exact below
// 2^53 in the scripts (bucket algorithms only: 2 * capacity * unit + rate).
Result<ScriptLimit> script_limit(const Limit& limit);

// <prefix>{<hash of the client key, 16 hex>}<limit fingerprint, 16 hex>:<key>
// The client key is the part of `key` after its first '|', or all of it.
std::string state_key(std::string_view prefix, const Limit& limit, std::string_view key);

// CRC16/XMODEM, as Redis Cluster hashes keys.
uint16_t crc16(std::string_view data);

// The cluster slot of a key: CRC16 of its hash tag (the text between the
// first '{' and the next '}', if non-empty) or of the whole key, mod 16384.
uint16_t key_slot(std::string_view key);

}  // namespace sluice::redis
