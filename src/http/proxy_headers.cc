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

std::string_view sv(beast::string_view s) {
  return {s.data(), s.size()};
}
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

bool hop_by_hop_id(bhttp::field id) {
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
      return true;
    default:
      return false;
  }
}

// True when a Connection header of `from` lists `name`. The usual tokens
// ("close", "keep-alive") name no field that is copied, so this only matters
// for extension fields a peer marked as its own.
bool named_by_connection(const bhttp::fields& from, beast::string_view name) {
  // Host stays, whatever a client asks: the upstream needs it to route.
  if (beast::iequals(name, "host")) return false;
  const auto [first, last] = from.equal_range(bhttp::field::connection);
  for (auto it = first; it != last; ++it) {
    for (const auto& token : bhttp::token_list(it->value())) {
      if (beast::iequals(token, name)) return true;
    }
  }
  return false;
}

bool only_usual_connection_tokens(const bhttp::fields& from) {
  const auto [first, last] = from.equal_range(bhttp::field::connection);
  for (auto it = first; it != last; ++it) {
    for (const auto& token : bhttp::token_list(it->value())) {
      if (!beast::iequals(token, "close") && !beast::iequals(token, "keep-alive")) return false;
    }
  }
  return true;
}

}  // namespace

bool is_hop_by_hop(std::string_view name) {
  for (std::string_view h : kHopByHop) {
    if (beast::iequals(bsv(name), bsv(h))) return true;
  }
  return false;
}

void append_end_to_end(const bhttp::fields& from, std::span<const std::string_view> drop,
                       std::string& out) {
  // Checked once: most messages list no field in Connection.
  const bool check_connection = !only_usual_connection_tokens(from);
  for (const auto& f : from) {
    if (hop_by_hop_id(f.name())) continue;
    const beast::string_view name = f.name_string();
    bool dropped = false;
    for (std::string_view d : drop) {
      if (beast::iequals(name, bsv(d))) {
        dropped = true;
        break;
      }
    }
    if (dropped) continue;
    if (check_connection && named_by_connection(from, name)) continue;
    append_field(sv(name), sv(f.value()), out);
  }
}

void append_upstream_target(std::string_view base_path, std::string_view target, std::string& out) {
  if (target == "*") {
    out.append(base_path.empty() ? std::string_view("*") : base_path);
    return;
  }
  out.append(base_path);
  if (target.empty() || target.front() == '/') {
    out.append(target);
    return;
  }
  // Absolute form (RFC 9112 §3.2.2): keep the path and query only; the
  // upstream is Sluice's to choose, not the client's.
  auto url = boost::urls::parse_absolute_uri(bsv(target));
  if (!url) {
    out += '/';  // not a URI (the server's parser accepted it): keep it under the base path
    out.append(target);
    return;
  }
  const auto path = url->encoded_path();
  if (path.empty() || path.front() != '/') out += '/';
  out.append(path.data(), path.size());
  if (url->has_query()) {
    const auto query = url->encoded_query();
    out += '?';
    out.append(query.data(), query.size());
  }
}

namespace {

// Appends every `name` field of `from` as it came; false when there is none.
bool append_copies(const bhttp::fields& from, std::string_view name, std::string& out) {
  const auto [first, last] = from.equal_range(name);
  for (auto it = first; it != last; ++it) append_field(name, sv(it->value()), out);
  return first != last;
}

}  // namespace

void append_forwarding_fields(const bhttp::fields& from, const Forwarding& who, std::string& out) {
  out.append("X-Forwarded-For: ");
  const auto [first, last] = from.equal_range("X-Forwarded-For");
  for (auto it = first; it != last; ++it) {
    if (it->value().empty()) continue;
    out.append(it->value().data(), it->value().size());
    out.append(", ", 2);
  }
  out.append(who.peer);
  out.append("\r\n", 2);

  append_field("X-Real-IP", who.client, out);

  out.append("Forwarded: ");
  if (who.peer_trusted) {
    const auto [ffirst, flast] = from.equal_range(bhttp::field::forwarded);
    for (auto it = ffirst; it != flast; ++it) {
      if (it->value().empty()) continue;
      out.append(it->value().data(), it->value().size());
      out.append(", ", 2);
    }
  }
  const bool v6 = who.peer.find(':') != std::string_view::npos;
  out.append(v6 ? "for=\"[" : "for=");
  out.append(who.peer);
  out.append(v6 ? "]\"\r\n" : "\r\n");

  if (!(who.peer_trusted && append_copies(from, "X-Forwarded-Proto", out))) {
    out.append(who.tls ? "X-Forwarded-Proto: https\r\n" : "X-Forwarded-Proto: http\r\n");
  }
  if (!(who.peer_trusted && append_copies(from, "X-Forwarded-Host", out))) {
    const auto host = from.find(bhttp::field::host);
    if (host != from.end() && !host->value().empty()) {
      append_field("X-Forwarded-Host", sv(host->value()), out);
    }
  }
}

}  // namespace sluice::http::proxy
