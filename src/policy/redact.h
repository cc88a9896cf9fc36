// Key redaction for what operators read (logs, /admin/stats, the dashboard):
// a key part taken from a request header, cookie or query parameter
// ("h:x-api-key=s3cr3t", "c:session=...", "q:api_key=...") is often a
// credential, so its value is shown as a short hash ("h:x-api-key=~1f0c9a7d2e4b").
// The same value always gives the same hash, so lines about one client can
// still be matched, and an operator who holds the value can compute it.
// IP parts, "global" and the policy/route prefixes of a store key are kept.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

namespace sluice::policy {

// `key` (a client key or a store key) with every request-derived value hashed.
std::string redact_key(std::string_view key);

}  // namespace sluice::policy
