// The client address: X-Forwarded-For / X-Real-IP are honoured only from
// trusted proxies, and IPv6 clients are keyed by their /64 (docs/DESIGN.md §5).
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
  // X-Real-IP when there is no X-Forwarded-For.
  EXPECT_EQ(allowed_from(*server, {{"X-Real-IP", "198.51.100.3"}}, 5), 2);
  // The proxy itself (no forwarding header) is one more client.
  EXPECT_EQ(allowed_from(*server, {}, 5), 2);
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
