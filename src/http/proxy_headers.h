// Header rewriting of the gateway proxy (proxy.h): what crosses Sluice from
// the client to the upstream and back. The proxy writes the header blocks it
// sends itself, as text, from the fields its parsers read; these functions
// produce the pieces.
//
// Hop-by-hop fields (RFC 9110 §7.6.1) describe one connection and are never
// forwarded, in either direction: Connection and every field it names,
// Keep-Alive, Proxy-Connection, TE, Trailer, Transfer-Encoding, Upgrade,
// Proxy-Authorization, Proxy-Authenticate. Content-Length is not copied
// either: the proxy re-frames every message itself from what its parser read
// (Content-Length when the length is known, else chunked), so no header a
// client or upstream sends (a `Connection: content-length` trick included)
// can make the two sides disagree on where a message ends. Host is always
// kept, even when Connection names it.
//
// Field values were validated by Beast's parser (no CR, LF or NUL), so they
// are written as they came.
//
// Thread-safety: pure functions.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include <boost/beast/http/fields.hpp>

#include "http/head_writer.h"

namespace sluice::http::proxy {

// True for a hop-by-hop field name (case-insensitive), Content-Length included
// (see above). Fields named by a Connection header are checked separately.
bool is_hop_by_hop(std::string_view name);

// Appends "Name: value\r\n" to `out` for every field of `from` that crosses
// the proxy: not hop-by-hop, not named in `from`'s Connection header(s), and
// not listed in `drop` (case-insensitive). Order and duplicates are kept.
void append_end_to_end(const boost::beast::http::fields& from,
                       std::span<const std::string_view> drop, std::string& out);

// Appends the request target sent upstream: the upstream's base path (no
// trailing '/', "" when none) before the client's target. An origin-form
// target ("/a?b") is prefixed; an absolute-form one ("http://h/a?b") is
// reduced to its path and query first; "*" (OPTIONS *) becomes the base
// path, or stays "*".
void append_upstream_target(std::string_view base_path, std::string_view target, std::string& out);

// Who sent a request, as the forwarding fields tell the upstream.
struct Forwarding {
  std::string_view peer;      // the TCP peer, as text ("192.0.2.1", "2001:db8::1")
  std::string_view client;    // the client address Sluice resolved (the peer
                              // unless the peer is a trusted proxy)
  bool peer_trusted = false;  // the peer is in client_ip.trusted_proxies
  bool tls = false;           // the client's connection is TLS (`tls:` on listen)
};

// Appends the forwarding fields of the upstream request, from what the client
// sent in `from` (whose own X-Forwarded-For, X-Real-IP, Forwarded,
// X-Forwarded-Proto and X-Forwarded-Host must be dropped from the copy):
//   X-Forwarded-For: the client's values (every X-Forwarded-For field, joined
//     by ", ") with the peer appended;
//   X-Real-IP: the resolved client, never the client's own claim (an
//     upstream reads it as the truth);
//   Forwarded: "for=<peer>", after the client's Forwarded values only when
//     the peer is a trusted proxy (RFC 7239 node syntax: IPv6 quoted in brackets);
//   X-Forwarded-Proto: https over TLS, else http; a trusted proxy's own
//     X-Forwarded-Proto instead, when it sent one (it saw the client's scheme);
//   X-Forwarded-Host: the client's Host; a trusted proxy's own instead.
// An untrusted client cannot set any of them: upstreams build redirects and
// "secure" decisions on X-Forwarded-Proto and X-Forwarded-Host.
void append_forwarding_fields(const boost::beast::http::fields& from, const Forwarding& who,
                              std::string& out);

// Appends "Name: value\r\n" (the one writer of fields, head_writer.h).
using http::append_field;

}  // namespace sluice::http::proxy
