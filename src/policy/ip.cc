#include "policy/ip.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "policy/forwarded.h"
#include "util/ascii.h"

namespace sluice::policy {
namespace {

constexpr uint8_t kV4MappedPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

using util::trim;

// inet_pton needs a NUL-terminated string; the longest textual IPv6 address
// ("ffff:...:255.255.255.255") is 45 characters, so anything longer is not one.
constexpr size_t kMaxAddressText = 45;

// An embedded NUL would end the C string early: "1.2.3.4\0junk" must not
// parse as 1.2.3.4.
bool has_nul(std::string_view text) {
  return text.find('\0') != std::string_view::npos;
}

bool parse_v4(std::string_view text, uint8_t out[4]) {
  if (text.empty() || text.size() > 15 || has_nul(text)) return false;
  char buffer[16];
  std::memcpy(buffer, text.data(), text.size());
  buffer[text.size()] = '\0';
  // glibc's inet_pton accepts exactly four decimal octets and rejects leading
  // zeros ("010.0.0.1" is octal to some parsers: ambiguous, so refused).
  return inet_pton(AF_INET, buffer, out) == 1;
}

bool parse_v6(std::string_view text, uint8_t out[16]) {
  if (text.empty() || text.size() > kMaxAddressText || has_nul(text)) return false;
  char buffer[kMaxAddressText + 1];
  std::memcpy(buffer, text.data(), text.size());
  buffer[text.size()] = '\0';
  // Zone identifiers ("fe80::1%eth0") are refused by inet_pton: they name a
  // local interface and mean nothing as a client identity.
  return inet_pton(AF_INET6, buffer, out) == 1;
}

// Keeps the first `prefix_length` bits of `bytes` and clears the rest.
void mask(uint8_t bytes[16], int prefix_length) {
  for (int i = 0; i < 16; ++i) {
    const int bits = prefix_length - i * 8;
    if (bits >= 8) continue;
    bytes[i] = bits <= 0 ? 0 : static_cast<uint8_t>(bytes[i] & (0xff << (8 - bits)));
  }
}

// An X-Forwarded-For entry: an address, optionally with a port as some proxies
// write it ("192.0.2.1:4711", "[2001:db8::1]:4711").
std::optional<IpAddress> parse_forwarded_entry(std::string_view entry) {
  if (std::optional<IpAddress> ip = parse_ip(entry)) return ip;
  if (!entry.empty() && entry.front() == '[') {
    const size_t close = entry.find(']');
    if (close == std::string_view::npos || close + 1 >= entry.size() || entry[close + 1] != ':')
      return std::nullopt;
    return parse_ip(entry.substr(0, close + 1));
  }
  const size_t colon = entry.find(':');
  if (colon != std::string_view::npos && entry.find(':', colon + 1) == std::string_view::npos) {
    // Exactly one colon: IPv4 with a port. The address part must be IPv4.
    std::optional<IpAddress> ip = parse_ip(entry.substr(0, colon));
    if (ip && ip->is_v4()) return ip;
  }
  return std::nullopt;
}

}  // namespace

bool is_trusted_proxy(const ClientIpConfig& config, const IpAddress& ip) {
  for (const Cidr& cidr : config.trusted_proxies) {
    if (cidr_contains(cidr, ip)) return true;
  }
  return false;
}

bool is_loopback(const IpAddress& ip) {
  static constexpr uint8_t kV6Loopback[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  if (ip.is_v4()) return ip.bytes[12] == 127;
  return std::memcmp(ip.bytes, kV6Loopback, 16) == 0;
}

bool is_loopback_host(std::string_view host) {
  constexpr std::string_view kLocalhost = "localhost";
  // (c | 0x20) lower-cases a letter, and only 'L' or 'l' give 'l'.
  if (std::equal(host.begin(), host.end(), kLocalhost.begin(), kLocalhost.end(),
                 [](char c, char l) { return (c | 0x20) == l; })) {
    return true;
  }
  const std::optional<IpAddress> ip = parse_ip(host);
  return ip.has_value() && is_loopback(*ip);
}

bool IpAddress::is_v4() const {
  return std::memcmp(bytes, kV4MappedPrefix, 12) == 0;
}

std::string IpAddress::text() const {
  char buffer[INET6_ADDRSTRLEN];
  if (is_v4()) {
    // What inet_ntop writes ("%u.%u.%u.%u"), without its sprintf: every
    // request keyed by ip forms this text.
    std::string out;
    out.reserve(15);
    for (int i = 12; i < 16; ++i) {
      if (i > 12) out += '.';
      const unsigned octet = bytes[i];
      if (octet >= 100) out += static_cast<char>('0' + octet / 100);
      if (octet >= 10) out += static_cast<char>('0' + octet / 10 % 10);
      out += static_cast<char>('0' + octet % 10);
    }
    return out;
  }
  inet_ntop(AF_INET6, bytes, buffer, sizeof buffer);
  return buffer;
}

std::optional<IpAddress> parse_ip(std::string_view text) {
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') {
    text = text.substr(1, text.size() - 2);
    IpAddress ip;
    if (!parse_v6(text, ip.bytes)) return std::nullopt;
    return ip;
  }
  IpAddress ip;
  if (text.find(':') == std::string_view::npos) {
    std::memcpy(ip.bytes, kV4MappedPrefix, 12);
    if (!parse_v4(text, ip.bytes + 12)) return std::nullopt;
    return ip;
  }
  // "::ffff:192.0.2.1" parses to the same bytes as "192.0.2.1": a dual-stack
  // socket reports IPv4 peers this way and they must key as IPv4.
  if (!parse_v6(text, ip.bytes)) return std::nullopt;
  return ip;
}

std::optional<Cidr> parse_cidr(std::string_view text) {
  Cidr cidr;
  cidr.text = std::string(text);
  const size_t slash = text.find('/');
  std::optional<IpAddress> ip = parse_ip(text.substr(0, slash));
  if (!ip) return std::nullopt;
  const bool v4 = ip->is_v4() && text.substr(0, slash).find(':') == std::string_view::npos;
  const int max_bits = v4 ? 32 : 128;
  int bits = max_bits;
  if (slash != std::string_view::npos) {
    const std::string_view digits = text.substr(slash + 1);
    if (digits.empty() || digits.size() > 3) return std::nullopt;
    bits = 0;
    for (char c : digits) {
      if (c < '0' || c > '9') return std::nullopt;
      bits = bits * 10 + (c - '0');
    }
    if (bits > max_bits) return std::nullopt;
  }
  // An IPv4 block is held over the IPv4-mapped form: 10.0.0.0/8 is ::ffff:10.0.0.0/104.
  cidr.prefix_length = v4 ? 96 + bits : bits;
  std::memcpy(cidr.address, ip->bytes, 16);
  // Host bits written after the prefix ("10.0.0.1/8") are ignored, as most
  // routers and firewalls do.
  mask(cidr.address, cidr.prefix_length);
  return cidr;
}

bool cidr_contains(const Cidr& cidr, const IpAddress& ip) {
  const int full_bytes = cidr.prefix_length / 8;
  if (std::memcmp(cidr.address, ip.bytes, static_cast<size_t>(full_bytes)) != 0) return false;
  const int rest = cidr.prefix_length % 8;
  if (rest == 0) return true;
  const uint8_t m = static_cast<uint8_t>(0xff << (8 - rest));
  return (cidr.address[full_bytes] & m) == (ip.bytes[full_bytes] & m);
}

std::string_view client_ip_header_name(ClientIpConfig::Header header) {
  switch (header) {
    case ClientIpConfig::Header::kXRealIp:
      return "x-real-ip";
    case ClientIpConfig::Header::kForwarded:
      return "forwarded";
    case ClientIpConfig::Header::kXForwardedFor:
      break;
  }
  return "x-forwarded-for";
}

namespace {

// The walk of client_ip() over a list, right to left: `last_separator`
// finds the comma before the last entry, `read` an entry's address.
template <class LastSeparator, class Read>
IpAddress walk_hops(const ClientIpConfig& config, const IpAddress& peer, std::string_view list,
                    LastSeparator last_separator, Read read) {
  IpAddress client = peer;
  while (true) {
    const size_t comma = last_separator(list);
    const std::string_view entry =
        trim(comma == std::string_view::npos ? list : list.substr(comma + 1));
    // Empty list elements are legal and ignored (RFC 9110 5.6.1).
    if (!entry.empty()) {
      const std::optional<IpAddress> ip = read(entry);
      if (!ip) return client;  // no address: the one to its right stands
      client = *ip;
      if (!is_trusted_proxy(config, client)) return client;
    }
    if (comma == std::string_view::npos) return client;
    list = list.substr(0, comma);
  }
}

}  // namespace

IpAddress client_ip(const ClientIpConfig& config, const IpAddress& peer, std::string_view value) {
  if (!is_trusted_proxy(config, peer)) return peer;
  switch (config.header) {
    case ClientIpConfig::Header::kXRealIp: {
      const std::optional<IpAddress> ip = parse_ip(trim(value));
      return ip ? *ip : peer;
    }
    case ClientIpConfig::Header::kForwarded:
      return walk_hops(config, peer, value, last_forwarded_separator, forwarded_element_for);
    case ClientIpConfig::Header::kXForwardedFor:
      break;
  }
  return walk_hops(
      config, peer, value, [](std::string_view list) { return list.rfind(','); },
      parse_forwarded_entry);
}

std::string client_key_text(const IpAddress& ip, int ipv6_prefix) {
  if (ip.is_v4()) return ip.text();
  if (ipv6_prefix < 0) ipv6_prefix = 0;
  if (ipv6_prefix > 128) ipv6_prefix = 128;
  IpAddress masked = ip;
  mask(masked.bytes, ipv6_prefix);
  // The prefix is always written, also for /128, so a key says how it was cut.
  std::string out = masked.text();
  out += '/';
  out += std::to_string(ipv6_prefix);
  return out;
}

}  // namespace sluice::policy
