// The client address: the one header client_ip.header names (X-Forwarded-For
// by default, X-Real-IP or Forwarded) is honoured only from trusted proxies,
// and IPv6 clients are keyed by their /64 (docs/DESIGN.md §5).
// The test client's address is always loopback, so each test makes loopback
// trusted or untrusted in its config.
#include "test_support.h"

namespace sluice::test {
namespace {

const std::string kLimits = R"(
headers: [legacy]
routes:
  - match: GET /api/search
    limits: [{capacity: 2, refill_rate: 1/h}]
)";

int allowed_from(const SluiceProcess& server, const Headers& headers, int count) {
  return count_allowed(server, "GET", "/api/search", count, headers);
}

TEST(ClientIp, ForwardedForIsIgnoredFromAnUntrustedPeer) {
  auto server = SluiceProcess::start("client_ip: {trusted_proxies: [10.0.0.0/8]}\n" + kLimits);
  ASSERT_NE(server, nullptr);
  // Every request claims another client; all are keyed by the peer, 127.0.0.1.
  EXPECT_EQ(allowed_from(*server, {{"X-Forwarded-For", "198.51.100.1"}}, 1), 1);
  EXPECT_EQ(allowed_from(*server, {{"X-Forwarded-For", "198.51.100.2"}}, 1), 1);
  EXPECT_EQ(allowed_from(*server, {{"X-Forwarded-For", "198.51.100.3"}}, 1), 0);
  EXPECT_EQ(allowed_from(*server, {{"X-Real-IP", "198.51.100.4"}}, 1), 0);
}

TEST(ClientIp, ForwardedForIsHonouredFromATrustedPeer) {
  auto server = SluiceProcess::start("client_ip: {trusted_proxies: [127.0.0.1/32]}\n" + kLimits);
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(allowed_from(*server, {{"X-Forwarded-For", "198.51.100.1"}}, 5), 2);
  EXPECT_EQ(allowed_from(*server, {{"X-Forwarded-For", "198.51.100.2"}}, 5), 2);
  // The rightmost untrusted address is the client: a forged leftmost entry changes nothing.
  EXPECT_EQ(allowed_from(*server, {{"X-Forwarded-For", "203.0.113.9, 198.51.100.1"}}, 1), 0);
  // X-Real-IP is not the configured header (X-Forwarded-For by default): it
  // names nobody, so these are the proxy's own requests...
  EXPECT_EQ(allowed_from(*server, {{"X-Real-IP", "198.51.100.3"}}, 5), 2);
  // ... and the proxy (no forwarding header) has no more.
  EXPECT_EQ(allowed_from(*server, {}, 5), 0);
}

// Behind nginx setting X-Real-IP and passing the client's own
// X-Forwarded-For through, the client chose its key with X-Forwarded-For.
// The address comes from the one configured header, whichever others come.
TEST(ClientIp, WithHeaderXRealIpForwardedForNamesNobody) {
  auto server = SluiceProcess::start(R"(
client_ip: {header: x-real-ip, trusted_proxies: [127.0.0.1/32]}
access: {deny: [198.51.100.66/32]}
)" + kLimits);
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(allowed_from(*server, {{"X-Real-IP", "198.51.100.3"}}, 1), 1);
  for (const std::string spoof : {"9.9.9.9", "9.9.9.10", "9.9.9.11"}) {
    EXPECT_EQ(allowed_from(*server, {{"X-Real-IP", "198.51.100.3"}, {"X-Forwarded-For", spoof}}, 1),
              spoof == "9.9.9.9" ? 1 : 0)
        << spoof;
  }
  // A denied client stays denied whatever X-Forwarded-For says.
  const HttpResponse denied =
      server->get("/api/search", {{"X-Real-IP", "198.51.100.66"}, {"X-Forwarded-For", "9.9.9.9"}});
  EXPECT_EQ(denied.status, 403);
  EXPECT_NE(denied.body.find("ACCESS_DENIED"), std::string::npos);
  // Two X-Real-IP fields name no one address: the proxy is the client.
  EXPECT_EQ(allowed_from(*server, {{"X-Real-IP", "203.0.113.1"}, {"X-Real-IP", "203.0.113.2"}}, 5),
            2);
  EXPECT_EQ(allowed_from(*server, {}, 1), 0);
  EXPECT_EQ(server->metric(R"(sluice_http_rejected_total{reason="access_denied"})"), 1);
}

// RFC 7239 Forwarded: the same right-to-left walk over its elements' for=.
TEST(ClientIp, WithHeaderForwardedTheRightmostUntrustedForIsTheClient) {
  auto server = SluiceProcess::start(
      "client_ip: {header: forwarded, trusted_proxies: [127.0.0.1/32, 10.0.0.0/8]}\n" + kLimits);
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(allowed_from(*server, {{"Forwarded", "for=198.51.100.1;proto=https"}}, 5), 2);
  // A forged element left of the real one changes nothing; a trusted hop is skipped.
  EXPECT_EQ(allowed_from(*server,
                         {{"Forwarded", "for=203.0.113.9, for=198.51.100.1;by=10.0.0.2"},
                          {"Forwarded", "for=10.0.0.3"}},
                         5),
            0);
  // Quoted IPv6 with a port; one /64 is one client.
  EXPECT_EQ(allowed_from(*server, {{"Forwarded", R"(For="[2001:db8:1:2::1]:4711")"}}, 5), 2);
  EXPECT_EQ(allowed_from(*server, {{"Forwarded", R"(for="[2001:db8:1:2::2]")"}}, 5), 0);
  // X-Forwarded-For and X-Real-IP name nobody; neither do `unknown` and
  // obfuscated nodes: the walk stops at the address to their right, here
  // the proxy, and a client writing them spends the proxy's own budget.
  EXPECT_EQ(allowed_from(*server,
                         {{"X-Forwarded-For", "198.51.100.7"}, {"X-Real-IP", "198.51.100.8"}}, 1),
            1);
  EXPECT_EQ(allowed_from(*server, {{"Forwarded", "for=198.51.100.9, for=unknown"}}, 1), 1);
  EXPECT_EQ(allowed_from(*server, {{"Forwarded", "for=198.51.100.9, for=_hidden"}}, 1), 0);
  EXPECT_EQ(allowed_from(*server, {{"Forwarded", "for=\"198.51.100.9"}}, 1), 0);
  EXPECT_EQ(allowed_from(*server, {}, 1), 0);
}

TEST(ClientIp, Ipv6ClientsAreKeyedByTheirSlash64) {
  auto server =
      SluiceProcess::start("client_ip: {trusted_proxies: [\"::1/128\"]}\n" + kLimits, "::1");
  ASSERT_NE(server, nullptr);
  // Two addresses of one /64 share a bucket.
  EXPECT_EQ(allowed_from(*server, {{"X-Forwarded-For", "2001:db8:1:2::1"}}, 1), 1);
  EXPECT_EQ(allowed_from(*server, {{"X-Forwarded-For", "2001:db8:1:2:ffff:ffff:ffff:fffe"}}, 5), 1);
  // The neighbouring /64 is another client.
  EXPECT_EQ(allowed_from(*server, {{"X-Forwarded-For", "2001:db8:1:3::1"}}, 5), 2);
}

TEST(ClientIp, Ipv6PrefixIsConfigurable) {
  auto server = SluiceProcess::start(
      "client_ip: {trusted_proxies: [\"::1/128\"], ipv6_prefix: 128}\n" + kLimits, "::1");
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(allowed_from(*server, {{"X-Forwarded-For", "2001:db8:1:2::1"}}, 5), 2);
  EXPECT_EQ(allowed_from(*server, {{"X-Forwarded-For", "2001:db8:1:2::2"}}, 5), 2);
}

}  // namespace
}  // namespace sluice::test
