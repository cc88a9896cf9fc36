// The body of POST /v1/check: {"policy":"login","key":"user:42","cost":1},
// or {"consumer":"key-4f1c9a","cost":1} for a consumer's plan; and of POST
// /v1/release: {"lease":"..."}.
// Its own header so that the front door and the fuzz target (fuzz/) parse
// with the same function: a body comes straight from the network.
//
// Thread-safety: a pure function.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace sluice::http {

// The parsed body, or the message saying what is wrong with it.
struct CheckRequest {
  std::string policy;    // non-empty when error is empty and consumer is empty
  std::string consumer;  // non-empty when error is empty and policy is empty
  // Non-empty with a policy; with a consumer, optional: the key its
  // `unknown` plan is counted under when the consumer is unknown.
  std::string key;
  uint64_t cost = 1;  // at least 1 when error is empty
  std::string error;  // empty when the body is valid
};

// A JSON object with "policy" and "key" (non-empty strings), or "consumer"
// (a non-empty string) and an optional "key"; and an optional "cost" (a
// whole number >= 1). Any other member is refused.
CheckRequest parse_check(std::string_view body);

// The body of POST /v1/release: {"lease":"<id from /v1/check>"}.
struct ReleaseRequest {
  std::string lease;  // non-empty when error is empty
  std::string error;  // empty when the body is valid
};

// A JSON object with "lease" (a non-empty string) and nothing else.
ReleaseRequest parse_release(std::string_view body);

}  // namespace sluice::http
