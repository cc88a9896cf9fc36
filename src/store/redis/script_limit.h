// How a Limit is passed to the Lua scripts, and where its state lives.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/limit.h"
#include "sluice/result.h"

namespace sluice::redis {

// Integers in Redis Lua are doubles: exact below 2^53.
inline constexpr uint64_t kExactLimit = uint64_t{1} << 53;

// The script arguments of one limit: (capacity, unit, rate) for the bucket
// algorithms, where one token is `unit` units and one microsecond refills
// `rate` units (refill_tokens / refill_period_us reduced by their gcd);
// (limit, window_us, 0) for the window algorithms; block_us the lockout.
struct ScriptLimit {
  std::string_view algorithm;  // the name the scripts register it under
  uint64_t p1 = 0;
  uint64_t p2 = 0;
  uint64_t p3 = 0;
  uint64_t block_us = 0;  // Limit::block() in microseconds, 0 for none
  // A concurrency limit, sent as sliding_log: its denial's retry is capped
  // (core::concurrency_retry_after) when the answer comes back.
  bool concurrency = false;
  // A lockout that grows (LimitSpec::block_factor above 1): its factor, max
  // and forget_after in microseconds; factor 1 and the others 0 otherwise.
  uint64_t block_factor = 1;
  uint64_t block_max_us = 0;
  uint64_t block_forget_us = 0;
  friend bool operator==(const ScriptLimit&, const ScriptLimit&) = default;
};

// kInvalidArgument when the limit's arithmetic would not stay exact below
// 2^53 in the scripts (bucket algorithms only: 2 * capacity * unit + rate).
// A block always fits: Limit::create() takes only whole microseconds up to
// 10 years (below 2^49 us), and the scripts form now + block, below 2^53 us
// until the year 2245.
Result<ScriptLimit> script_limit(const Limit& limit);

// The block argument of a limit definition (entry.lua) whose lockout
// grows: "<first_us> <factor> <max_us> <forget_after_us>" (lockout.lua).
// A lockout that does not grow is sent as its block_us alone.
std::string growing_block_arg(const ScriptLimit& limit);

// A refund's cost as sent to the scripts: at most 2^53, which Lua holds
// exactly. A refund's cost is not bounded by the limit's size (acquire's
// is); above 2^53 it gives back everything anyway, and a product
// cost * unit of 2^53 or more, rounded or not, still compares as more than
// any state the scripts hold exactly.
uint64_t refund_cost(uint64_t cost);

// <prefix>{<hash of the client key, 16 hex>}<limit fingerprint, 16 hex>:<key>
// The client key is the part of `key` after its first '|', or all of it.
std::string state_key(std::string_view prefix, const Limit& limit, std::string_view key);

// The key of the lockout (Limit::block) of `state_key`, a key made by
// state_key() with `prefix`: "!b" after the limit's fingerprint, so the
// hash tag (and cluster slot) stays the state key's, and no state key can
// be a lockout key (a state key has ':' there).
std::string lockout_key(std::string_view state_key, std::string_view prefix);

// The key of a fixed window's counter for the window of index `index`
// (floor(time_us / window_us)), `state_key` a key made by state_key() with
// `prefix`: "#<index>" after the limit's fingerprint, so the slot stays the
// state key's and no state, lockout or other window's key is the same
// (the index's digits end at the first ':').
std::string window_key(std::string_view state_key, std::string_view prefix, int64_t index);

// window_key() appended to `out` as a RESP bulk string, with no string of its
// own in between (a request's keys are written so).
void append_window_key_bulk(std::string& out, std::string_view state_key, std::string_view prefix,
                            int64_t index);

// The index of the window of `time_us` for a window of `window_us` (>= 1).
inline int64_t window_index(int64_t time_us, uint64_t window_us) {
  return time_us / static_cast<int64_t>(window_us);
}

// CRC16/XMODEM, as Redis Cluster hashes keys.
uint16_t crc16(std::string_view data);

// The cluster slot of a key: CRC16 of its hash tag (the text between the
// first '{' and the next '}', if non-empty) or of the whole key, mod 16384.
uint16_t key_slot(std::string_view key);

// Per cluster slot, the smallest number whose decimal text, as a hash tag
// ("{<number>}"), puts a key in that slot (every slot has one below 200,000):
// a key of one's own in a chosen slot. A few milliseconds: compute it once.
std::vector<uint32_t> slot_tags();

}  // namespace sluice::redis
