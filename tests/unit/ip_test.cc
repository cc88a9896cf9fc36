#include <gtest/gtest.h>

#include <string>

#include "policy/ip.h"

namespace sluice::policy {
namespace {

IpAddress ip(std::string_view text) {
  std::optional<IpAddress> parsed = parse_ip(text);
  EXPECT_TRUE(parsed.has_value()) << text;
  return parsed.value_or(IpAddress{});
}

Cidr cidr(std::string_view text) {
  std::optional<Cidr> parsed = parse_cidr(text);
  EXPECT_TRUE(parsed.has_value()) << text;
  return parsed.value_or(Cidr{});
}

ClientIpConfig trusting(std::initializer_list<std::string_view> blocks) {
  ClientIpConfig config;
  for (std::string_view b : blocks) config.trusted_proxies.push_back(cidr(b));
  return config;
}

// Forwarded, believed from loopback and 10.0.0.0/8.
ClientIpConfig forwarded_from_proxies() {
  ClientIpConfig config = trusting({"127.0.0.1", "10.0.0.0/8"});
  config.header = ClientIpConfig::Header::kForwarded;
  return config;
}

// --- parsing ---

TEST(ParseIp, Ipv4) {
  const IpAddress a = ip("192.0.2.1");
  EXPECT_TRUE(a.is_v4());
  EXPECT_EQ(a.text(), "192.0.2.1");
  EXPECT_EQ(a.bytes[10], 0xff);
  EXPECT_EQ(a.bytes[12], 192);
  EXPECT_EQ(a.bytes[15], 1);
}

// The text is inet_ntop's: no leading zeros, every octet from 0 to 255.
TEST(ParseIp, Ipv4TextAsInetNtopWritesIt) {
  EXPECT_EQ(ip("0.0.0.0").text(), "0.0.0.0");
  EXPECT_EQ(ip("255.255.255.255").text(), "255.255.255.255");
  EXPECT_EQ(ip("10.0.100.9").text(), "10.0.100.9");
  EXPECT_EQ(ip("127.0.0.1").text(), "127.0.0.1");
}

TEST(ParseIp, Ipv6CompressedAndBracketed) {
  const IpAddress a = ip("2001:db8::1");
  EXPECT_FALSE(a.is_v4());
  EXPECT_EQ(a.text(), "2001:db8::1");
  EXPECT_EQ(ip("[2001:db8::1]"), a);
  EXPECT_EQ(ip("2001:0DB8:0000:0000:0000:0000:0000:0001"), a);
  EXPECT_EQ(ip("::1").text(), "::1");
  EXPECT_EQ(ip("::").text(), "::");
}

TEST(ParseIp, Ipv4MappedIpv6IsIpv4) {
  const IpAddress mapped = ip("::ffff:192.0.2.1");
  EXPECT_TRUE(mapped.is_v4());
  EXPECT_EQ(mapped, ip("192.0.2.1"));
  EXPECT_EQ(mapped.text(), "192.0.2.1");
  EXPECT_EQ(ip("[::ffff:c000:201]"), ip("192.0.2.1"));
}

TEST(ParseIp, RejectsGarbage) {
  for (std::string_view bad : {"",
                               " ",
                               "1.2.3",
                               "1.2.3.4.5",
                               "256.1.1.1",
                               "01.2.3.4",
                               "1.2.3.4 ",
                               " 1.2.3.4",
                               "1.2.3.-4",
                               "a.b.c.d",
                               "::g",
                               "1:2:3:4:5:6:7:8:9",
                               "2001:db8::1::2",
                               "fe80::1%eth0",
                               "[1.2.3.4]",
                               "[2001:db8::1",
                               "2001:db8::1]",
                               "[]",
                               "1.2.3.4:80",
                               "unknown",
                               "localhost"}) {
    EXPECT_FALSE(parse_ip(bad).has_value()) << "'" << bad << "'";
  }
  EXPECT_FALSE(parse_ip(std::string("1.2.3.4\0", 8)).has_value());
  EXPECT_FALSE(parse_ip(std::string(1000, '1')).has_value());
  EXPECT_FALSE(parse_ip(std::string(1000, ':')).has_value());
}

TEST(ParseCidr, Ipv4BlockIsHeldOverTheMappedForm) {
  const Cidr c = cidr("10.0.0.0/8");
  EXPECT_EQ(c.prefix_length, 104);
  EXPECT_EQ(c.text, "10.0.0.0/8");
  EXPECT_TRUE(cidr_contains(c, ip("10.255.1.2")));
  EXPECT_FALSE(cidr_contains(c, ip("11.0.0.1")));
  EXPECT_TRUE(cidr_contains(c, ip("::ffff:10.1.2.3")));
  EXPECT_FALSE(cidr_contains(c, ip("2001:db8::1")));
}

TEST(ParseCidr, Ipv6Block) {
  const Cidr c = cidr("2001:db8::/32");
  EXPECT_EQ(c.prefix_length, 32);
  EXPECT_TRUE(cidr_contains(c, ip("2001:db8:ffff::1")));
  EXPECT_FALSE(cidr_contains(c, ip("2001:db9::1")));
  EXPECT_FALSE(cidr_contains(c, ip("10.0.0.1")));
}

TEST(ParseCidr, SingleAddressIsAFullPrefix) {
  EXPECT_EQ(cidr("127.0.0.1").prefix_length, 128);
  EXPECT_EQ(cidr("127.0.0.1/32").prefix_length, 128);
  EXPECT_EQ(cidr("::1").prefix_length, 128);
  EXPECT_TRUE(cidr_contains(cidr("127.0.0.1"), ip("127.0.0.1")));
  EXPECT_FALSE(cidr_contains(cidr("127.0.0.1"), ip("127.0.0.2")));
}

TEST(ParseCidr, OddPrefixLengths) {
  const Cidr c = cidr("192.168.0.0/17");  // 192.168.0.0 - 192.168.127.255
  EXPECT_TRUE(cidr_contains(c, ip("192.168.127.255")));
  EXPECT_FALSE(cidr_contains(c, ip("192.168.128.0")));
  const Cidr zero = cidr("0.0.0.0/0");  // every IPv4 address, no IPv6
  EXPECT_TRUE(cidr_contains(zero, ip("1.2.3.4")));
  EXPECT_FALSE(cidr_contains(zero, ip("2001:db8::1")));
  const Cidr all = cidr("::/0");
  EXPECT_TRUE(cidr_contains(all, ip("2001:db8::1")));
  EXPECT_TRUE(cidr_contains(all, ip("1.2.3.4")));
}

TEST(ParseCidr, HostBitsAreMaskedOff) {
  const Cidr c = cidr("10.1.2.3/8");
  EXPECT_EQ(c.address[12], 10);
  EXPECT_EQ(c.address[13], 0);
  EXPECT_TRUE(cidr_contains(c, ip("10.200.0.1")));
}

TEST(ParseCidr, RejectsGarbage) {
  for (std::string_view bad :
       {"", "/8", "10.0.0.0/", "10.0.0.0/33", "2001:db8::/129", "10.0.0.0/x", "10.0.0.0/-1",
        "10.0.0.0/8/8", "10.0.0.0/0008", "10.0.0/8", "10.0.0.0 /8"}) {
    EXPECT_FALSE(parse_cidr(bad).has_value()) << "'" << bad << "'";
  }
}

// --- client_ip ---

TEST(ClientIp, ForwardedForIgnoredFromAnUntrustedPeer) {
  const ClientIpConfig config = trusting({"127.0.0.1/32"});
  const IpAddress peer = ip("203.0.113.9");
  EXPECT_EQ(client_ip(config, peer, "198.51.100.1"), peer);
}

TEST(ClientIp, ForwardedForHonouredFromATrustedPeer) {
  const ClientIpConfig config = trusting({"127.0.0.1/32"});
  EXPECT_EQ(client_ip(config, ip("127.0.0.1"), "198.51.100.1"), ip("198.51.100.1"));
}

TEST(ClientIp, NoProxiesTrustedByDefault) {
  ClientIpConfig config;
  EXPECT_EQ(client_ip(config, ip("127.0.0.1"), "198.51.100.1"), ip("127.0.0.1"));
  config.header = ClientIpConfig::Header::kXRealIp;
  EXPECT_EQ(client_ip(config, ip("127.0.0.1"), "198.51.100.2"), ip("127.0.0.1"));
  config.header = ClientIpConfig::Header::kForwarded;
  EXPECT_EQ(client_ip(config, ip("127.0.0.1"), "for=198.51.100.3"), ip("127.0.0.1"));
}

TEST(ClientIp, RightmostUntrustedAddressAcrossSeveralProxies) {
  // client -> 10.0.0.5 (edge proxy) -> 10.0.0.6 (inner proxy) -> peer 10.0.0.7
  const ClientIpConfig config = trusting({"10.0.0.0/24"});
  EXPECT_EQ(client_ip(config, ip("10.0.0.7"), "198.51.100.1, 10.0.0.5, 10.0.0.6"),
            ip("198.51.100.1"));
}

TEST(ClientIp, SpoofedLeftmostEntriesAreIgnored) {
  // The client wrote "1.1.1.1, 2.2.2.2" itself; our proxy appended its real address.
  const ClientIpConfig config = trusting({"10.0.0.0/8"});
  EXPECT_EQ(client_ip(config, ip("10.0.0.1"), "1.1.1.1, 2.2.2.2, 198.51.100.7"),
            ip("198.51.100.7"));
  // The same spoofed list from a client talking to us directly: the peer counts.
  EXPECT_EQ(client_ip(config, ip("198.51.100.7"), "1.1.1.1, 10.0.0.1"), ip("198.51.100.7"));
}

TEST(ClientIp, GarbageStopsTheWalkAtTheAddressToItsRight) {
  const ClientIpConfig config = trusting({"10.0.0.0/8"});
  // "garbage" sits left of a trusted proxy: that proxy's address stands.
  EXPECT_EQ(client_ip(config, ip("10.0.0.1"), "198.51.100.1, garbage, 10.0.0.2"), ip("10.0.0.2"));
  // Garbage right next to the peer: the peer stands.
  EXPECT_EQ(client_ip(config, ip("10.0.0.1"), "198.51.100.1, unknown"), ip("10.0.0.1"));
  EXPECT_EQ(client_ip(config, ip("10.0.0.1"), std::string("1.2.3.4\0", 8)), ip("10.0.0.1"));
}

TEST(ClientIp, EveryHopTrustedGivesTheLeftmost) {
  const ClientIpConfig config = trusting({"10.0.0.0/8"});
  EXPECT_EQ(client_ip(config, ip("10.0.0.1"), "10.0.0.3, 10.0.0.2"), ip("10.0.0.3"));
}

TEST(ClientIp, EntriesWithPortsEmptyElementsAndSpaces) {
  const ClientIpConfig config = trusting({"127.0.0.1"});
  const IpAddress peer = ip("127.0.0.1");
  EXPECT_EQ(client_ip(config, peer, "198.51.100.1:4711"), ip("198.51.100.1"));
  EXPECT_EQ(client_ip(config, peer, "[2001:db8::7]:4711"), ip("2001:db8::7"));
  EXPECT_EQ(client_ip(config, peer, "[2001:db8::7]"), ip("2001:db8::7"));
  EXPECT_EQ(client_ip(config, peer, "\t198.51.100.1 ,, ,"), ip("198.51.100.1"));
  EXPECT_EQ(client_ip(config, peer, "2001:db8::7"), ip("2001:db8::7"));
  EXPECT_EQ(client_ip(config, peer, ""), peer);
  EXPECT_EQ(client_ip(config, peer, " , "), peer);
}

TEST(ClientIp, RealIpIsTheOneAddressItHolds) {
  ClientIpConfig config = trusting({"127.0.0.1"});
  config.header = ClientIpConfig::Header::kXRealIp;
  const IpAddress peer = ip("127.0.0.1");
  EXPECT_EQ(client_ip(config, peer, "198.51.100.3"), ip("198.51.100.3"));
  EXPECT_EQ(client_ip(config, peer, " 198.51.100.3 "), ip("198.51.100.3"));
  EXPECT_EQ(client_ip(config, peer, "2001:db8::3"), ip("2001:db8::3"));
  // A list (two fields joined, or one client's own list) names no one address.
  EXPECT_EQ(client_ip(config, peer, "198.51.100.3, 198.51.100.4"), peer);
  EXPECT_EQ(client_ip(config, peer, "garbage"), peer);
  EXPECT_EQ(client_ip(config, peer, ""), peer);
}

// RFC 7239's examples and what a proxy may write.
TEST(ClientIp, ForwardedWalksTheForOfEachElement) {
  const ClientIpConfig config = forwarded_from_proxies();
  const IpAddress peer = ip("127.0.0.1");
  EXPECT_EQ(client_ip(config, peer, "for=192.0.2.60;proto=http;by=203.0.113.43"), ip("192.0.2.60"));
  EXPECT_EQ(client_ip(config, peer, R"(For="[2001:db8:cafe::17]:4711")"), ip("2001:db8:cafe::17"));
  EXPECT_EQ(client_ip(config, peer, "for=192.0.2.43, for=198.51.100.17"), ip("198.51.100.17"));
  EXPECT_EQ(client_ip(config, peer, "for=198.51.100.17, for=10.0.0.2;by=10.0.0.3, for=10.0.0.4"),
            ip("198.51.100.17"));
  EXPECT_EQ(client_ip(config, peer, R"(proto=https;for="198.51.100.17:_p1";host="a,b")"),
            ip("198.51.100.17"));
  // Every hop trusted: the leftmost.
  EXPECT_EQ(client_ip(config, peer, "for=10.0.0.9, for=10.0.0.8"), ip("10.0.0.9"));
}

// unknown and obfuscated nodes, elements without for=, and syntax errors name
// nobody: the walk stops at the address to their right.
TEST(ClientIp, ForwardedEntriesThatNameNoAddressStopTheWalk) {
  const ClientIpConfig config = forwarded_from_proxies();
  const IpAddress peer = ip("127.0.0.1");
  for (const std::string_view last :
       {"for=unknown", "for=_hidden", "for=\"_hidden:_port\"", "proto=https", "for=2001:db8::1",
        "for=\"2001:db8::1\"", "for=\"[2001:db8::1]:123456\"", "for=192.0.2.1:x",
        "for=192.0.2.1;for=192.0.2.2", "for=\"192.0.2.1", "for=", "=192.0.2.1", "for=192.0.2.1 x",
        "for=192.0.2.1\\"}) {
    EXPECT_EQ(client_ip(config, peer, "for=198.51.100.1, " + std::string(last)), peer) << last;
    EXPECT_EQ(client_ip(config, peer, "for=198.51.100.1, " + std::string(last) + ", for=10.0.0.2"),
              ip("10.0.0.2"))
        << last;
  }
}

// Whatever a client writes on the left (an unterminated quote, a comma in a
// quoted string), the elements the proxies appended are read as written.
TEST(ClientIp, ForwardedTextOnTheLeftCannotChangeTheElementsOnTheRight) {
  const ClientIpConfig config = forwarded_from_proxies();
  const IpAddress peer = ip("127.0.0.1");
  for (const std::string_view forged :
       {"for=\"", "for=\"9.9.9.9, for=", "\"", "for=\"\\\"", "for=9.9.9.9;by=\",",
        "for=\"[2001:db8::1]\", for=9.9.9.9"}) {
    EXPECT_EQ(client_ip(config, peer, std::string(forged) + ", for=198.51.100.7;by=10.0.0.1"),
              ip("198.51.100.7"))
        << forged;
  }
  // A comma and an escaped quote inside quoted values are not separators.
  EXPECT_EQ(client_ip(config, peer, R"(for=198.51.100.7;x="a,\"b,", for=10.0.0.1;y=",")"),
            ip("198.51.100.7"));
}

TEST(ClientIp, MappedPeerMatchesAnIpv4TrustedBlock) {
  const ClientIpConfig config = trusting({"127.0.0.0/8"});
  EXPECT_EQ(client_ip(config, ip("::ffff:127.0.0.1"), "198.51.100.1"), ip("198.51.100.1"));
}

TEST(ClientIp, LongHostileHeaderIsHandled) {
  ClientIpConfig config = trusting({"127.0.0.1"});
  std::string xff;
  for (int i = 0; i < 10000; ++i) xff += "127.0.0.1, ";
  xff += "198.51.100.1";
  EXPECT_EQ(client_ip(config, ip("127.0.0.1"), xff), ip("198.51.100.1"));
  EXPECT_EQ(client_ip(config, ip("127.0.0.1"), std::string(100000, ',')), ip("127.0.0.1"));
  config.header = ClientIpConfig::Header::kForwarded;
  std::string forwarded;
  for (int i = 0; i < 10000; ++i) forwarded += "for=127.0.0.1, ";
  forwarded += "for=198.51.100.1";
  EXPECT_EQ(client_ip(config, ip("127.0.0.1"), forwarded), ip("198.51.100.1"));
  EXPECT_EQ(client_ip(config, ip("127.0.0.1"), std::string(100000, '"')), ip("127.0.0.1"));
  EXPECT_EQ(client_ip(config, ip("127.0.0.1"), std::string(100000, '\\') + "\""), ip("127.0.0.1"));
}

TEST(ClientIp, HeaderNamesAreTheConfigsWords) {
  EXPECT_EQ(client_ip_header_name(ClientIpConfig::Header::kXForwardedFor), "x-forwarded-for");
  EXPECT_EQ(client_ip_header_name(ClientIpConfig::Header::kXRealIp), "x-real-ip");
  EXPECT_EQ(client_ip_header_name(ClientIpConfig::Header::kForwarded), "forwarded");
}

// --- client_key_text ---

TEST(ClientKeyText, Ipv4AsIs) {
  EXPECT_EQ(client_key_text(ip("192.0.2.1"), 64), "192.0.2.1");
  EXPECT_EQ(client_key_text(ip("::ffff:192.0.2.1"), 64), "192.0.2.1");
}

TEST(ClientKeyText, Ipv6KeyedBySlash64) {
  EXPECT_EQ(client_key_text(ip("2001:db8:1:2:aaaa:bbbb:cccc:dddd"), 64), "2001:db8:1:2::/64");
  // Two addresses in one /64 share a key; the neighbouring /64 does not.
  EXPECT_EQ(client_key_text(ip("2001:db8:1:2::1"), 64),
            client_key_text(ip("2001:db8:1:2::ffff"), 64));
  EXPECT_NE(client_key_text(ip("2001:db8:1:2::1"), 64), client_key_text(ip("2001:db8:1:3::1"), 64));
}

TEST(ClientKeyText, OtherIpv6Prefixes) {
  EXPECT_EQ(client_key_text(ip("2001:db8:1:2::1"), 48), "2001:db8:1::/48");
  EXPECT_EQ(client_key_text(ip("2001:db8:1:2::1"), 48),
            client_key_text(ip("2001:db8:1:ff::1"), 48));
  EXPECT_NE(client_key_text(ip("2001:db8:1:2::1"), 48), client_key_text(ip("2001:db8:2:2::1"), 48));
  EXPECT_EQ(client_key_text(ip("2001:db8:1:2::1"), 128), "2001:db8:1:2::1/128");
  EXPECT_NE(client_key_text(ip("2001:db8:1:2::1"), 128),
            client_key_text(ip("2001:db8:1:2::2"), 128));
  EXPECT_EQ(client_key_text(ip("2001:db8:1:2::1"), 60), "2001:db8:1::/60");
  EXPECT_EQ(client_key_text(ip("2001:db8:1:12::1"), 60), "2001:db8:1:10::/60");
}

}  // namespace
}  // namespace sluice::policy
