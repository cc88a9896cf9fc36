#include "http/proxy_headers.h"

#include <array>

#include <boost/beast/core/string.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/rfc7230.hpp>
#include <boost/url/parse.hpp>

namespace sluice::http::proxy {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

namespace {

beast::string_view bsv(std::string_view s) {
  return {s.data(), s.size()};
}

constexpr std::array<std::string_view, 10> kHopByHop = {"connection",
                                                        "keep-alive",
                                                        "proxy-connection",
                                                        "te",
                                                        "trailer",
                                                        "transfer-encoding",
                                                        "upgrade",
                                                        "proxy-authorization",
                                                        "proxy-authenticate",
                                                        "content-length"};

// A field a Connection header may not remove: the upstream needs Host to
// route the request, whatever the client asks.
bool is_protected(beast::string_view name) {
  return beast::iequals(name, "host");
}

}  // namespace

bool is_hop_by_hop(std::string_view name) {
  for (std::string_view h : kHopByHop) {
    if (beast::iequals(bsv(name), bsv(h))) return true;
  }
  return false;
}

void copy_end_to_end(const bhttp::fields& from, bhttp::fields& to) {
  // The names listed in Connection (usually none, or just "close"/"keep-alive").
  const auto [conn_first, conn_last] = from.equal_range(bhttp::field::connection);
  const bool has_connection = conn_first != conn_last;
  for (const auto& f : from) {
    const bhttp::field id = f.name();
    switch (id) {
      case bhttp::field::connection:
      case bhttp::field::keep_alive:
      case bhttp::field::proxy_connection:
      case bhttp::field::te:
      case bhttp::field::trailer:
      case bhttp::field::transfer_encoding:
      case bhttp::field::upgrade:
      case bhttp::field::proxy_authorization:
      case bhttp::field::proxy_authenticate:
      case bhttp::field::content_length:
        continue;
      default:
        break;
    }
    const beast::string_view name = f.name_string();
    if (has_connection && !is_protected(name)) {
      bool named = false;
      for (auto it = conn_first; it != conn_last && !named; ++it) {
        for (const auto& token : bhttp::token_list(it->value())) {
          if (beast::iequals(token, name)) {
            named = true;
            break;
          }
        }
      }
      if (named) continue;
    }
    to.insert(id, name, f.value());
  }
}

std::string upstream_target(std::string_view base_path, std::string_view target) {
  if (target == "*") return base_path.empty() ? std::string("*") : std::string(base_path);
  std::string_view origin = target;
  if (!target.empty() && target.front() != '/') {
    // Absolute form (RFC 9112 §3.2.2): keep the path and query only; the
    // upstream is Sluice's to choose, not the client's.
    auto url = boost::urls::parse_absolute_uri(bsv(target));
    if (url) {
      std::string out(base_path);
      const auto path = url->encoded_path();
      if (path.empty() || path.front() != '/') out += '/';
      out.append(path.data(), path.size());
      if (url->has_query()) {
        const auto query = url->encoded_query();
        out += '?';
        out.append(query.data(), query.size());
      }
      return out;
    }
    // Not a URI (the server's parser accepted it): forward it under the base path.
    std::string out(base_path);
    out += '/';
    out += target;
    return out;
  }
  std::string out;
  out.reserve(base_path.size() + origin.size());
  out += base_path;
  out += origin;
  return out;
}

void add_forwarding_fields(const bhttp::fields& from, std::string_view peer, bhttp::fields& to) {
  std::string forwarded_for;
  const auto [first, last] = from.equal_range("X-Forwarded-For");
  for (auto it = first; it != last; ++it) {
    if (it->value().empty()) continue;
    if (!forwarded_for.empty()) forwarded_for += ", ";
    forwarded_for.append(it->value().data(), it->value().size());
  }
  if (!forwarded_for.empty()) forwarded_for += ", ";
  forwarded_for += peer;
  to.set("X-Forwarded-For", forwarded_for);

  if (from.find("X-Forwarded-Proto") == from.end()) {
    to.set("X-Forwarded-Proto", "http");
  }
  if (from.find("X-Forwarded-Host") == from.end()) {
    const auto host = from.find(bhttp::field::host);
    if (host != from.end() && !host->value().empty()) {
      to.set("X-Forwarded-Host", host->value());
    }
  }
}

}  // namespace sluice::http::proxy
