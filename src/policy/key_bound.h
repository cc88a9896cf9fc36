// What a client sends never sizes what the store keeps.
//
// A value taken from a request becomes part of a store key (a header,
// cookie, query or JWT claim value, a consumer id, a /v1/check key, an RLS
// descriptor). Kept as it came, a client that sends a fresh 15 KB value
// with every request fills the store (a Redis under `maxmemory` then fails
// every decision, or evicts the state of keys that are over their limit).
// So a value longer than kMaxKeyPartBytes is kept as a fixed-size digest
// instead: kHashedPartPrefix and the first 128 bits of its SHA-256 in hex,
// 40 bytes whatever its length. The same value always gives the same
// digest, in every instance and across restarts (no secret: instances that
// share one Redis must agree), so a long key over its limit stays denied;
// two values share a digest only by a SHA-256 collision.
//
// The prefix holds "%s", which the escaping of request values never writes
// ('%' is always followed by two hex digits), and a raw value (a /v1/check
// key) that starts with it is hashed too: no value sent can spell another
// value's digest.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace sluice::policy {

inline constexpr size_t kMaxKeyPartBytes = 256;
inline constexpr std::string_view kHashedPartPrefix = "%sha256:";
// The length of a hashed part: the prefix and 32 hex digits.
inline constexpr size_t kHashedPartBytes = kHashedPartPrefix.size() + 32;

// `value` as a store key holds it: itself, or its digest when it is longer
// than kMaxKeyPartBytes or starts with kHashedPartPrefix.
std::string bounded_key_part(std::string_view value);

// The same in place: key[from, end) is the part, replaced by its digest
// when it must be (no allocation when it is kept).
void bound_key_part(std::string& key, size_t from);

// `value`'s digest: kHashedPartPrefix and 32 hex digits.
std::string hashed_key_part(std::string_view value);

}  // namespace sluice::policy
