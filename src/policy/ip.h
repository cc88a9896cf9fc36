// IP addresses for client identification: parsing, CIDR membership, the
// client address behind trusted proxies, and the IPv6 prefix used as a key.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "policy/config.h"

namespace sluice::policy {

// 16 bytes; IPv4 is held as IPv4-mapped IPv6 (::ffff:a.b.c.d).
struct IpAddress {
  uint8_t bytes[16] = {};
  bool is_v4() const;
  std::string text() const;  // "192.0.2.1", "2001:db8::1"
  friend bool operator==(const IpAddress&, const IpAddress&) = default;
};

// Parses "192.0.2.1", "2001:db8::1", "[2001:db8::1]", "::ffff:192.0.2.1". No ports.
std::optional<IpAddress> parse_ip(std::string_view text);

// Parses "10.0.0.0/8", "2001:db8::/32", or a single address (a /32 or /128).
std::optional<Cidr> parse_cidr(std::string_view text);

bool cidr_contains(const Cidr& cidr, const IpAddress& ip);

// True when `ip` is in one of `config.trusted_proxies`.
bool is_trusted_proxy(const ClientIpConfig& config, const IpAddress& ip);

// 127.0.0.0/8 or ::1.
bool is_loopback(const IpAddress& ip);
// "localhost" (any case) or a loopback address literal: only this host can
// reach a port bound there.
bool is_loopback_host(std::string_view host);

// The header ClientIpConfig::Header names, lower-case, as the config writes
// it: "x-forwarded-for", "x-real-ip", "forwarded".
std::string_view client_ip_header_name(ClientIpConfig::Header header);

// The client's address: the peer itself unless the peer is a trusted proxy;
// then read from `value`, every field of the one header `config.header`
// names joined by ", " (the other headers mean nothing):
//   x-forwarded-for  the rightmost address that is not a trusted proxy;
//   forwarded        the same walk over the `for=` node of each element
//                    (RFC 7239; forwarded.h);
//   x-real-ip        the one address it holds (anything else: the peer).
// Walking from the right, each entry was written by the hop after it, so the
// first one that is not a trusted proxy is the client, and entries further
// left may be the client's own. An entry that is no address (garbage,
// `unknown`, an obfuscated `_name`, a Forwarded element without `for=`)
// stops the walk: the address to its right (a trusted proxy, or the peer)
// stands, so what a client writes cannot choose its key. When every entry is
// a trusted proxy, the leftmost is the client; with no entry, the peer.
IpAddress client_ip(const ClientIpConfig& config, const IpAddress& peer, std::string_view value);

// The part of a client address used as a key: IPv4 as is ("192.0.2.1"),
// IPv6 truncated to `ipv6_prefix` bits ("2001:db8:1:2::/64").
std::string client_key_text(const IpAddress& ip, int ipv6_prefix);

}  // namespace sluice::policy
