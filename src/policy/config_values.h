// The scalar value syntaxes of the config file (docs/CONFIG.md): integers,
// durations, rates, sizes, listen addresses, upstream and Redis URLs, key
// specs and route matches. Pure functions of their text, no YAML.
//
// On failure each returns an Error whose message completes a sentence that
// starts with the YAML path, e.g. `must be a duration like 500ms, 1s, 1m, 1h
// or 1d, got "1.5s" (...)`; the loader adds "file:line:col: path: ".
// Thread-safety: all functions are pure and may be called from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "policy/config.h"
#include "sluice/clock.h"
#include "sluice/result.h"

namespace sluice::policy {

// `"text"` with quotes, control characters escaped: how values appear in messages.
std::string quoted(std::string_view text);

// ASCII letters lower-cased; other bytes as they are.
std::string to_lower(std::string_view s);

// "" when `host` is a host name or an IPv4 address (or, with `v6`, an IPv6
// address written without brackets); otherwise what is wrong with it.
std::string host_problem(std::string_view host, bool v6);

// A non-negative decimal integer; '_' may separate digits ("1_000_000").
// No sign, no fraction, no exponent, no hex.
Result<uint64_t> parse_uint(std::string_view text);

// A non-negative duration: an integer and one of the units ms, s, m, h, d
// ("500ms", "1s", "1m", "1h", "1d"). No fractions, no sign, the unit is required.
// `allow_zero` false makes "0s" an error.
Result<Nanos> parse_duration(std::string_view text, bool allow_zero);

// A rate "N/unit" (unit: ms s m h d, meaning 1 of it) or "N/<duration>"
// ("10/2s", "1/500ms"): N tokens every period. N >= 1, period > 0.
struct Rate {
  uint64_t tokens = 0;
  Nanos period{0};
};
Result<Rate> parse_rate(std::string_view text);

// A size in bytes: an integer, optionally followed by B, KiB, MiB or GiB
// ("16384", "16KiB", "1MiB").
Result<uint64_t> parse_size(std::string_view text);

// "host:port" or "[ipv6]:port". host is a host name, an IPv4 address or a
// bracketed IPv6 address (stored without brackets). Port 0 is accepted only
// when `allow_port_zero` (listeners: "pick a free port").
Result<HostPort> parse_host_port(std::string_view text, bool allow_port_zero);

// "http://host[:port][/base/path]": only http (the gateway does not speak TLS
// to its upstream); no user info, query or fragment. Port defaults to 80; the
// base path loses its trailing '/'. Fills url, address and base_path.
Result<Upstream> parse_upstream_url(std::string_view text);

// "redis://[[user]:password@]host[:port][/db]"; port defaults to 6379, db to 0.
struct RedisUrl {
  HostPort address;
  std::string password;
  int database = 0;
};
Result<RedisUrl> parse_redis_url(std::string_view text);

// True for an HTTP header field name / method token (RFC 9110 tchar+).
bool is_http_token(std::string_view text);

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

// Edit distance (insertions, deletions, substitutions, adjacent transpositions).
size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `word` if it is close enough to be a likely typo,
// else "".
std::string closest_match(std::string_view word, const std::vector<std::string_view>& candidates);

}  // namespace sluice::policy
