#include "config/values/values.h"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <limits>

#include "util/ascii.h"

namespace sluice::config {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kSecond = 1'000 * kMs;

Error bad(std::string message) {
  return Error{ErrorCode::kInvalidArgument, std::move(message)};
}

using util::hex_value;
using util::is_alpha;
using util::is_digit;
char lower(char c) {
  return util::to_lower(c);
}

}  // namespace

std::string to_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = lower(c);
  return out;
}

namespace {

// Length of the leading run of digits and '_' separators.
size_t number_length(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && (is_digit(s[i]) || s[i] == '_')) ++i;
  return i;
}

// Why `text` is not a non-negative integer, or "" when it is one (value in *out).
std::string uint_problem(std::string_view text, uint64_t* out) {
  if (text.empty()) return "empty";
  if (text.front() == '-') return "negative";
  if (!is_digit(text.front()) || !is_digit(text.back())) return "not a number";
  uint64_t value = 0;
  for (char c : text) {
    if (c == '_') continue;
    if (!is_digit(c)) return (c == '.' || c == 'e' || c == 'E') ? "fraction" : "not a number";
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (value > (std::numeric_limits<uint64_t>::max() - digit) / 10) return "too large";
    value = value * 10 + digit;
  }
  if (text.find("__") != std::string_view::npos) return "not a number";
  *out = value;
  return "";
}

struct DurationUnit {
  std::string_view name;
  int64_t ns;
};
constexpr DurationUnit kDurationUnits[] = {
    {"ms", kMs},           {"s", kSecond},         {"m", 60 * kSecond},
    {"h", 3600 * kSecond}, {"d", 86400 * kSecond}, {"w", 7 * 86400 * kSecond}};

const DurationUnit* find_duration_unit(std::string_view name) {
  for (const DurationUnit& u : kDurationUnits)
    if (u.name == name) return &u;
  return nullptr;
}

constexpr std::string_view kDurationLike =
    "must be a duration like 500ms, 1s, 1m, 1h, 1d or 1w, got ";

// Why `text` is not a duration, or "" (value in *out). Zero is accepted here.
std::string duration_problem(std::string_view text, Nanos* out) {
  if (text.empty()) return "";  // the generic message says enough
  if (text.front() == '-') return " (a duration cannot be negative)";
  const size_t n = number_length(text);
  if (n == 0) return " (it must start with a whole number)";
  const std::string_view number = text.substr(0, n);
  const std::string_view unit = text.substr(n);
  if (!unit.empty() && (unit.front() == '.' || unit.front() == ','))
    return " (whole numbers only: write 1500ms, not 1.5s)";
  if (unit.empty()) return " (the unit is missing: add ms, s, m, h, d or w)";
  const DurationUnit* u = find_duration_unit(unit);
  if (u == nullptr) return " (unknown unit " + quoted(unit) + "; use ms, s, m, h, d or w)";
  uint64_t count = 0;
  if (!uint_problem(number, &count).empty()) return "";
  if (count > static_cast<uint64_t>(std::numeric_limits<int64_t>::max() / u->ns))
    return " (too large)";
  *out = Nanos{static_cast<int64_t>(count) * u->ns};
  return "";
}

}  // namespace

// Host names (RFC 1123 labels, '_' tolerated), IPv4 dotted quads, or an IPv6
// address (without brackets; only when `v6`). Returns why not, or "".

std::string host_problem(std::string_view host, bool v6) {
  if (host.empty()) return "the host is missing";
  const std::string text(host);
  if (v6) {
    in6_addr a6;
    if (inet_pton(AF_INET6, text.c_str(), &a6) != 1)
      return quoted(host) + " is not an IPv6 address";
    return "";
  }
  if (host.find(':') != std::string_view::npos)
    return "put an IPv6 address in brackets, like [::1]:8080";
  const bool dotted =
      std::all_of(host.begin(), host.end(), [](char c) { return is_digit(c) || c == '.'; });
  if (dotted) {
    in_addr a4;
    if (inet_pton(AF_INET, text.c_str(), &a4) != 1) return quoted(host) + " is not an IPv4 address";
    return "";
  }
  if (host.size() > 253) return "the host name is too long";
  size_t start = 0;
  while (start <= host.size()) {
    size_t end = host.find('.', start);
    if (end == std::string_view::npos) end = host.size();
    const std::string_view label = host.substr(start, end - start);
    const bool ok = !label.empty() && label.size() <= 63 && label.front() != '-' &&
                    label.back() != '-' && std::all_of(label.begin(), label.end(), [](char c) {
                      return is_alpha(c) || is_digit(c) || c == '-' || c == '_';
                    });
    if (!ok) return quoted(host) + " is not a valid host name";
    start = end + 1;
  }
  return "";
}

namespace {

// Splits "host:port" / "[v6]:port" / (with a default port) "host" / "[v6]".
// Returns why not, or "".
std::string host_port_problem(std::string_view text, int default_port, bool allow_port_zero,
                              HostPort* out) {
  std::string_view host;
  std::string_view port_text;
  bool has_port = false;
  bool v6 = false;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) return "the ']' closing the IPv6 address is missing";
    host = text.substr(1, close - 1);
    v6 = true;
    const std::string_view after = text.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return "expected ':' and a port after ']'";
      port_text = after.substr(1);
      has_port = true;
    }
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) {
      const bool digits = !text.empty() && std::all_of(text.begin(), text.end(), is_digit);
      if (digits && default_port < 0)
        return "the host is missing: write 127.0.0.1:" + std::string(text);
      host = text;
    } else if (text.find(':') != colon) {
      return "put an IPv6 address in brackets, like [::1]:8080";
    } else {
      host = text.substr(0, colon);
      port_text = text.substr(colon + 1);
      has_port = true;
    }
  }
  if (host.empty()) return "the host is missing";
  if (std::string p = host_problem(host, v6); !p.empty()) return p;
  uint64_t port = 0;
  if (!has_port) {
    if (default_port < 0) return "the port is missing";
    port = static_cast<uint64_t>(default_port);
  } else if (!uint_problem(port_text, &port).empty() || port_text.find('_') != std::string::npos ||
             port > 65535 || (port == 0 && !allow_port_zero)) {
    return allow_port_zero ? "the port must be 0 to 65535" : "the port must be 1 to 65535";
  }
  out->host = std::string(host);
  out->port = static_cast<uint16_t>(port);
  return "";
}

}  // namespace

std::string quoted(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

Result<uint64_t> parse_uint(std::string_view text) {
  uint64_t value = 0;
  const std::string problem = uint_problem(text, &value);
  if (problem.empty()) return value;
  if (problem == "too large") return bad("is too large, got " + quoted(text));
  return bad("must be a whole number, got " + quoted(text));
}

Result<double> parse_ratio(std::string_view text) {
  const std::string like =
      "must be a number greater than 0 and at most 1, like 0.8, got " + quoted(text);
  const bool decimal = !text.empty() && text.find_first_not_of("0123456789.") == text.npos &&
                       text.find('.') == text.rfind('.') && text != ".";
  double value = 0;
  if (!decimal ||
      std::from_chars(text.data(), text.data() + text.size(), value).ec != std::errc{}) {
    return bad(like);
  }
  if (!(value > 0 && value <= 1)) return bad(like);
  return value;
}

Result<Nanos> parse_duration(std::string_view text, bool allow_zero) {
  Nanos value{-1};
  const std::string problem = duration_problem(text, &value);
  if (value.count() < 0) return bad(std::string(kDurationLike) + quoted(text) + problem);
  if (value.count() == 0 && !allow_zero) return bad("must be greater than 0, got " + quoted(text));
  return value;
}

Result<Rate> parse_rate(std::string_view text) {
  const std::string like =
      "must be a rate like 10/s, 100/m, 1000/h, 5/d or 10/2s, got " + quoted(text);
  const size_t slash = text.find('/');
  if (slash == std::string_view::npos)
    return bad(like + " (write a count, '/', and a unit or a duration)");
  const std::string_view count_text = text.substr(0, slash);
  const std::string_view period_text = text.substr(slash + 1);
  Rate rate;
  const std::string count_problem = uint_problem(count_text, &rate.tokens);
  if (count_problem == "fraction")
    return bad(like + " (whole numbers only: write 3/2s, not 1.5/s)");
  if (count_problem == "negative") return bad(like + " (a rate cannot be negative)");
  // nginx writes rate=10r/s.
  if (!count_problem.empty() && count_text.size() > 1 &&
      (count_text.back() == 'r' || count_text.back() == 'R')) {
    const std::string_view digits = count_text.substr(0, count_text.size() - 1);
    uint64_t ignored = 0;
    if (uint_problem(digits, &ignored).empty())
      return bad(like + "; did you mean " +
                 quoted(std::string(digits) + "/" + std::string(period_text)) +
                 "? (nginx's r/s is /s here)");
  }
  if (!count_problem.empty()) return bad(like);
  if (rate.tokens == 0) return bad(like + " (the count must be at least 1)");
  if (const DurationUnit* u = find_duration_unit(period_text)) {
    rate.period = Nanos{u->ns};
    return rate;
  }
  if (!period_text.empty() && !is_digit(period_text.front()) && period_text.front() != '-')
    return bad(like + " (unknown unit " + quoted(period_text) + "; use ms, s, m, h, d or w)");
  Nanos period{-1};
  std::string problem = duration_problem(period_text, &period);
  if (period.count() < 0) {
    if (problem.empty()) problem = " (after '/' comes a unit (ms, s, m, h, d, w) or a duration)";
    return bad(like + problem);
  }
  if (period.count() == 0) return bad(like + " (the period must be greater than 0)");
  rate.period = period;
  return rate;
}

Result<uint64_t> parse_size(std::string_view text) {
  const std::string like = "must be a size in bytes like 16384, 16KiB or 1MiB, got " + quoted(text);
  const size_t n = number_length(text);
  uint64_t count = 0;
  if (n == 0 || !uint_problem(text.substr(0, n), &count).empty()) return bad(like);
  const std::string_view unit = text.substr(n);
  uint64_t multiplier = 1;
  if (unit.empty() || unit == "B") {
    multiplier = 1;
  } else if (unit == "KiB") {
    multiplier = uint64_t{1} << 10;
  } else if (unit == "MiB") {
    multiplier = uint64_t{1} << 20;
  } else if (unit == "GiB") {
    multiplier = uint64_t{1} << 30;
  } else {
    return bad(like + " (units: B, KiB, MiB, GiB)");
  }
  if (count > std::numeric_limits<uint64_t>::max() / multiplier) return bad(like + " (too large)");
  return count * multiplier;
}

Result<HostPort> parse_host_port(std::string_view text, bool allow_port_zero) {
  HostPort hp;
  const std::string problem = host_port_problem(text, -1, allow_port_zero, &hp);
  if (problem.empty()) return hp;
  return bad("must be host:port like 127.0.0.1:8080 or [::1]:8080, got " + quoted(text) + " (" +
             problem + ")");
}

std::string HostPort::text() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Result<HttpUrl> parse_http_url(std::string_view text) {
  const std::string like = "must be an http:// URL like http://127.0.0.1:3000, got " + quoted(text);
  const size_t scheme_end = text.find("://");
  if (scheme_end == std::string_view::npos)
    return bad(like + " (the scheme is missing: write http://" + std::string(text) + ")");
  const std::string scheme = to_lower(text.substr(0, scheme_end));
  if (scheme == "https")
    return bad(like + " (https is not supported: the gateway speaks plain HTTP to its upstream)");
  if (scheme != "http") return bad(like + " (only http:// is supported)");
  const std::string_view rest = text.substr(scheme_end + 3);
  const size_t authority_end = rest.find_first_of("/?#");
  const std::string_view authority = rest.substr(0, authority_end);
  const std::string_view path =
      authority_end == std::string_view::npos ? std::string_view{} : rest.substr(authority_end);
  if (authority.find('@') != std::string_view::npos)
    return bad(like + " (user info is not supported)");
  if (path.find_first_of("?#") != std::string_view::npos)
    return bad(like + " (a query string or fragment is not allowed)");
  if (path.find_first_of(" \t\r\n") != std::string_view::npos)
    return bad(like + " (the path contains white space)");
  HttpUrl url;
  if (std::string p = host_port_problem(authority, 80, false, &url.address); !p.empty())
    return bad(like + " (" + p + ")");
  url.url = std::string(text);
  std::string_view base = path;
  while (!base.empty() && base.back() == '/') base.remove_suffix(1);
  url.base_path = std::string(base);
  return url;
}

Result<ServerUrl> parse_server_url(std::string_view text) {
  const std::string like =
      "must be a server URL like http://10.0.0.5:3000 or https://auth.internal:8443, got " +
      quoted(text);
  const size_t scheme_end = text.find("://");
  if (scheme_end == std::string_view::npos)
    return bad(like + " (the scheme is missing: write http://" + std::string(text) + ")");
  const std::string scheme = to_lower(text.substr(0, scheme_end));
  ServerUrl url;
  if (scheme == "https") {
    url.tls = true;
  } else if (scheme != "http") {
    return bad(like + " (only http:// and https:// are supported)");
  }
  const std::string_view rest = text.substr(scheme_end + 3);
  const size_t authority_end = rest.find_first_of("/?#");
  const std::string_view authority = rest.substr(0, authority_end);
  const std::string_view after =
      authority_end == std::string_view::npos ? std::string_view{} : rest.substr(authority_end);
  if (authority.find('@') != std::string_view::npos)
    return bad(like + " (user info is not supported)");
  // One base path per upstream would have to hold for every server: a
  // server is an address, the path is the request's.
  if (!after.empty() && after != "/")
    return bad(like + " (a server URL has no path, query or fragment)");
  if (std::string p = host_port_problem(authority, url.tls ? 443 : 80, false, &url.address);
      !p.empty())
    return bad(like + " (" + p + ")");
  url.url = std::string(text);
  return url;
}

namespace {

// %XX escapes decoded; false on a malformed one.
bool percent_decode(std::string_view in, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out->push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size() || hex_value(in[i + 1]) < 0 || hex_value(in[i + 2]) < 0) return false;
    out->push_back(static_cast<char>(hex_value(in[i + 1]) * 16 + hex_value(in[i + 2])));
    i += 2;
  }
  return true;
}

}  // namespace

Result<RedisUrl> parse_redis_url(std::string_view text, bool url_only) {
  const std::string like =
      std::string(url_only ? "must be a Redis URL like redis://127.0.0.1:6379/0 or "
                             "redis://user:password@host:6379"
                           : "must be host:port like 127.0.0.1:6379 or a Redis URL like "
                             "redis://user:password@host:6379/0") +
      ", got " + quoted(text);
  const size_t scheme_end = text.find("://");
  RedisUrl url;
  if (scheme_end == std::string_view::npos && !url_only) {
    if (std::string p = host_port_problem(text, -1, false, &url.address); !p.empty())
      return bad(like + " (" + p + ")");
    return url;
  }
  const std::string scheme =
      scheme_end == std::string_view::npos ? std::string() : to_lower(text.substr(0, scheme_end));
  if (scheme != "redis" && scheme != "rediss")
    return bad(like + " (it must start with redis:// or rediss://)");
  url.tls = scheme == "rediss";
  std::string_view rest = text.substr(scheme_end + 3);
  const size_t at = rest.rfind('@');
  if (at != std::string_view::npos) {
    const std::string_view userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
    // "user:password", ":password" (the default user) or "password" alone.
    const size_t colon = userinfo.find(':');
    const std::string_view user =
        colon == std::string_view::npos ? std::string_view() : userinfo.substr(0, colon);
    const std::string_view password =
        colon == std::string_view::npos ? userinfo : userinfo.substr(colon + 1);
    if (!percent_decode(user, &url.username) || !percent_decode(password, &url.password))
      return bad(like + " (bad %-escape in the user info)");
    url.has_credentials = true;
  }
  const size_t slash = rest.find('/');
  const std::string_view authority = rest.substr(0, slash);
  if (authority.find('?') != std::string_view::npos || rest.find('?') != std::string_view::npos)
    return bad(like + " (query options are not supported)");
  if (std::string p = host_port_problem(authority, 6379, false, &url.address); !p.empty())
    return bad(like + " (" + p + ")");
  if (slash != std::string_view::npos) {
    const std::string_view db = rest.substr(slash + 1);
    uint64_t n = 0;
    if (!db.empty()) {
      if (!uint_problem(db, &n).empty() || n > 1'000'000)
        return bad(like + " (the database after '/' must be a number)");
      url.database = static_cast<int>(n);
    }
  }
  return url;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  // Optimal string alignment distance over three rows.
  std::vector<size_t> prev2(b.size() + 1), prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        cur[j] = std::min(cur[j], prev2[j - 2] + 1);
    }
    prev2.swap(prev);
    prev.swap(cur);
  }
  return prev[b.size()];
}

namespace {

// Words people bring from other rate limiters, and what Sluice calls them.
struct Synonym {
  std::string_view word;
  std::string_view ours;
};
constexpr Synonym kSynonyms[] = {
    {"burst", "capacity"},       // nginx limit_req, Envoy's local rate limit
    {"max_tokens", "capacity"},  // Envoy's local rate limit token bucket
    {"leaky_bucket", "gcra"},    // nginx limit_req is a leaky bucket as a meter
    {"leakybucket", "gcra"},     //
    {"rate", "refill_rate"},     // nginx limit_req_zone rate=
    {"max", "limit"},            // express-rate-limit
    {"windowms", "window"},      // express-rate-limit
    {"fill_interval", "refill_rate"},
};

}  // namespace

std::string closest_match(std::string_view word, const std::vector<std::string_view>& candidates) {
  const std::string w = to_lower(word);
  for (const Synonym& s : kSynonyms) {
    if (w != s.word) continue;
    for (std::string_view c : candidates) {
      if (c == s.ours) return std::string(c);
    }
  }
  std::string best;
  size_t best_distance = std::numeric_limits<size_t>::max();
  for (std::string_view c : candidates) {
    const size_t d = edit_distance(w, to_lower(c));
    if (d < best_distance) {
      best_distance = d;
      best = std::string(c);
    }
  }
  // A typo, not a different word: at most 2 edits, or a third of the word.
  const size_t allowed = best.size() <= 3 ? 1 : std::max<size_t>(2, best.size() / 3);
  return best_distance <= allowed ? best : std::string();
}

}  // namespace sluice::config
