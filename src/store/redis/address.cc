#include "store/redis/address.h"

#include <charconv>

namespace sluice::redis {
namespace {

Error bad(std::string_view text, std::string why) {
  return Error{ErrorCode::kInvalidArgument,
               "redis address '" + std::string(text) + "': " + std::move(why)};
}

bool parse_int(std::string_view s, int min, int max, int* out) {
  if (s.empty()) return false;
  int v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < min || v > max) return false;
  *out = v;
  return true;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool percent_decode(std::string_view in, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out->push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size()) return false;
    const int hi = hex_value(in[i + 1]);
    const int lo = hex_value(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return true;
}

}  // namespace

std::string Endpoint::name() const {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

bool split_host_port(std::string_view text, std::string* host, int* port) {
  std::string_view h;
  std::string_view p;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return false;
    h = text.substr(1, close - 1);
    p = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) return false;
    h = text.substr(0, colon);
    p = text.substr(colon + 1);
  }
  if (!parse_int(p, 1, 65535, port)) return false;
  host->assign(h);
  return true;
}

Result<Endpoint> parse_address(std::string_view text) {
  Endpoint ep;
  std::string_view rest = text;
  const bool url = rest.starts_with("redis://");
  if (rest.starts_with("rediss://") || rest.starts_with("unix://"))
    return bad(text, "only redis:// (TCP without TLS) is supported");
  if (url) {
    rest.remove_prefix(8);
    const size_t at = rest.rfind('@');
    if (at != std::string_view::npos) {
      const std::string_view userinfo = rest.substr(0, at);
      rest = rest.substr(at + 1);
      const size_t colon = userinfo.find(':');
      ep.has_credentials = true;
      std::string_view user =
          colon == std::string_view::npos ? std::string_view() : userinfo.substr(0, colon);
      std::string_view pass =
          colon == std::string_view::npos ? userinfo : userinfo.substr(colon + 1);
      if (!percent_decode(user, &ep.username) || !percent_decode(pass, &ep.password))
        return bad(text, "bad percent-encoding in the user info");
    }
    const size_t slash = rest.find('/');
    if (slash != std::string_view::npos) {
      std::string_view db = rest.substr(slash + 1);
      rest = rest.substr(0, slash);
      if (!db.empty() && !parse_int(db, 0, 1'000'000, &ep.database))
        return bad(text, "the database must be a number");
    }
    if (rest.find('?') != std::string_view::npos)
      return bad(text, "query options are not supported");
  }
  // host[:port] (the port is optional in a URL).
  std::string_view host = rest;
  std::string_view port;
  bool has_port = false;
  if (!rest.empty() && rest.front() == '[') {
    const size_t close = rest.find(']');
    if (close == std::string_view::npos) return bad(text, "unclosed '[' in the host");
    host = rest.substr(1, close - 1);
    std::string_view after = rest.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return bad(text, "expected ':' after ']'");
      port = after.substr(1);
      has_port = true;
    } else if (!url) {
      return bad(text, "a port is needed (host:port)");
    }
  } else {
    const size_t colon = rest.rfind(':');
    if (colon != std::string_view::npos) {
      host = rest.substr(0, colon);
      port = rest.substr(colon + 1);
      has_port = true;
      if (host.find(':') != std::string_view::npos)
        return bad(text, "put an IPv6 address in brackets: [::1]:6379");
    } else if (!url) {
      return bad(text, "a port is needed (host:port)");
    }
  }
  if (host.empty()) return bad(text, "the host is empty");
  ep.host.assign(host);
  if (has_port && !parse_int(port, 1, 65535, &ep.port))
    return bad(text, "the port must be 1..65535");
  return ep;
}

}  // namespace sluice::redis
