// The syntax of a route: its `match` ("METHOD /path" with {param} and a
// trailing /*) and its `key` ("ip", "global", "header:NAME", joined by '+').
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "policy/config.h"
#include "sluice/result.h"

namespace sluice::policy {

// True for an HTTP header field name / method token (RFC 9110 tchar+).
bool is_http_token(std::string_view text);

// True for a request method as front doors accept it: a token without
// lower-case letters. Methods are case-sensitive (RFC 9110 9.1) and every
// registered one is upper-case, so "post" is not POST: it would match no
// POST route while an upstream that folds case ran its POST handler.
bool is_request_method(std::string_view text);

// "ip", "global", "header:NAME", or several joined by '+' ("ip+header:x-api-key").
// Header names are lower-cased; `text` is the normalised spelling.
Result<KeySpec> parse_key_spec(std::string_view text);

// A route's `match`: "METHOD /path". METHOD is an HTTP token (upper-cased) or
// "*"; the path starts with '/', may hold whole-segment {param}s and end in
// "/*"; a trailing '/' is dropped from the pattern. `name` is
// "METHOD /path" with single spacing.
struct RouteMatch {
  std::string method;
  std::string pattern;
  std::string name;
};
Result<RouteMatch> parse_route_match(std::string_view text);

// The pattern with every {param} replaced by "{}" (and lower-cased when
// `case_insensitive`): two routes with equal method and shape are duplicates.
std::string pattern_shape(std::string_view pattern, bool case_insensitive);

}  // namespace sluice::policy
