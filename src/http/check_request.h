// The body of POST /v1/check: {"policy":"login","key":"user:42","cost":1}.
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
  std::string policy;  // non-empty when error is empty
  std::string key;     // non-empty when error is empty
  uint64_t cost = 1;   // at least 1 when error is empty
  std::string error;   // empty when the body is valid
};

// A JSON object with "policy" and "key" (non-empty strings) and an optional
// "cost" (a whole number >= 1); any other member is refused.
CheckRequest parse_check(std::string_view body);

}  // namespace sluice::http
