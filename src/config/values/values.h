// The one grammar of every value Sluice reads from text: integers,
// durations, rates, sizes, addresses, URLs, and "did you mean". The server
// config, the Envoy RLS descriptor files and the Redis store's addresses all
// parse with these functions, so `window: 2w` or `redis://user:pw@host`
// means the same wherever it is written and a fix lands once.
//
// Errors are kInvalidArgument with a message that completes "<what>: ", e.g.
// `must be a duration like 500ms, 1s, 1m, 1h, 1d or 1w, got "1.5s" (whole
// numbers only: write 1500ms, not 1.5s)`.
//
// Thread-safety: pure functions. No dependency beyond the standard library
// and sluice/result.h, so the Redis store can use them too.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/clock.h"
#include "sluice/result.h"

namespace sluice::config {

// `"text"` with quotes, control characters escaped: how values appear in messages.
std::string quoted(std::string_view text);

// ASCII letters lower-cased; other bytes as they are.
std::string to_lower(std::string_view s);

// A non-negative decimal integer; '_' may separate digits ("1_000_000").
// No sign, no fraction, no exponent, no hex.
Result<uint64_t> parse_uint(std::string_view text);

// A fraction in (0, 1] written in decimal ("0.8", "1", ".75"): a ratio such
// as rls.near_limit_ratio. No sign, no exponent, no percent.
Result<double> parse_ratio(std::string_view text);

// A non-negative duration: an integer and one of the units ms, s, m, h, d, w
// ("500ms", "1s", "1m", "1h", "1d", "2w"). No fractions, no sign, the unit is
// required. `allow_zero` false makes "0s" an error.
Result<Nanos> parse_duration(std::string_view text, bool allow_zero);

// A rate "N/unit" (unit: ms s m h d w, meaning 1 of it) or "N/<duration>"
// ("10/2s", "1/500ms"): N tokens every period. N >= 1, period > 0.
struct Rate {
  uint64_t tokens = 0;
  Nanos period{0};
};
Result<Rate> parse_rate(std::string_view text);

// A size in bytes: an integer, optionally followed by B, KiB, MiB or GiB
// ("16384", "16KiB", "1MiB").
Result<uint64_t> parse_size(std::string_view text);

struct HostPort {
  std::string host;  // "127.0.0.1", "::1" (no brackets), "0.0.0.0", "localhost"
  uint16_t port = 0;
  std::string text() const;  // "127.0.0.1:8080", "[::1]:8080"
  friend bool operator==(const HostPort&, const HostPort&) = default;
};

// "" when `host` is a host name or an IPv4 address (or, with `v6`, an IPv6
// address written without brackets); otherwise what is wrong with it.
std::string host_problem(std::string_view host, bool v6);

// "host:port" or "[ipv6]:port". host is a host name, an IPv4 address or a
// bracketed IPv6 address (stored without brackets). Port 0 is accepted only
// when `allow_port_zero` (listeners: "pick a free port").
Result<HostPort> parse_host_port(std::string_view text, bool allow_port_zero);

// "http://host[:port][/base/path]": only http; no user info, query or
// fragment. Port defaults to 80; the base path loses its trailing '/'.
struct HttpUrl {
  std::string url;  // as written
  HostPort address;
  std::string base_path;  // "" when none
};
Result<HttpUrl> parse_http_url(std::string_view text);

// A server of a named upstream: "http://host[:port]" (port 80) or
// "https://host[:port]" (port 443). Nothing after the authority but an
// optional "/": no path, user info, query or fragment.
struct ServerUrl {
  std::string url;  // as written
  HostPort address;
  bool tls = false;  // https://
};
Result<ServerUrl> parse_server_url(std::string_view text);

// A Redis server: "redis://[[user]:password@]host[:port][/db]" (port 6379 by
// default; user and password may hold %XX escapes, so '@' and ':' can be
// written; "rediss://" for TLS), or, when `url_only` is false, a plain
// "host:port".
struct RedisUrl {
  HostPort address;
  bool tls = false;              // rediss://
  bool has_credentials = false;  // a user info part was given
  std::string username;          // "" = the default user
  std::string password;
  int database = -1;  // -1: not given
};
Result<RedisUrl> parse_redis_url(std::string_view text, bool url_only = true);

// Edit distance (insertions, deletions, substitutions, adjacent transpositions).
size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `word` (ASCII case ignored) if it is close enough
// to be a likely typo, or the one it names in another rate limiter's words
// (burst: capacity, leaky_bucket: gcra, ...), else "".
std::string closest_match(std::string_view word, const std::vector<std::string_view>& candidates);

}  // namespace sluice::config
