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

// The client's address: the peer itself unless the peer is a trusted proxy;
// then the rightmost address of X-Forwarded-For that is not a trusted proxy
// (or X-Real-IP when X-Forwarded-For is absent). Unparseable entries stop the
// walk: the address to their right is used, so garbage cannot choose the key.
IpAddress client_ip(const ClientIpConfig& config, const IpAddress& peer,
                    std::string_view x_forwarded_for, std::string_view x_real_ip);

// The part of a client address used as a key: IPv4 as is ("192.0.2.1"),
// IPv6 truncated to `ipv6_prefix` bits ("2001:db8:1:2::/64").
std::string client_key_text(const IpAddress& ip, int ipv6_prefix);

}  // namespace sluice::policy
