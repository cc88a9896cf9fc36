#include "store/redis/address.h"

#include <charconv>

#include "config/values/values.h"

namespace sluice::redis {
namespace {

bool parse_int(std::string_view s, int min, int max, int* out) {
  if (s.empty()) return false;
  int v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < min || v > max) return false;
  *out = v;
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
  Result<config::RedisUrl> url = config::parse_redis_url(text, /*url_only=*/false);
  if (!url.ok()) {
    return Error{ErrorCode::kInvalidArgument, "redis address: " + url.error().message};
  }
  Endpoint ep;
  ep.host = std::move(url->address.host);
  ep.port = url->address.port;
  ep.tls = url->tls;
  ep.has_credentials = url->has_credentials;
  ep.username = std::move(url->username);
  ep.password = std::move(url->password);
  ep.database = url->database;
  return ep;
}

}  // namespace sluice::redis
