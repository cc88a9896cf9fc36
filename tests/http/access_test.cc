// The admin port's Host check (http/access.h): IP literals are answered
// whatever the address the connection arrived on; names only when known.
#include "http/access.h"

#include <gtest/gtest.h>

namespace sluice::http {
namespace {

TEST(IpLiteralHost, AnAddressWithOrWithoutAPortIsOne) {
  for (const char* host : {"10.1.2.3", "10.1.2.3:9090", "10.1.2.3:", "[2001:db8::1]",
                           "[2001:db8::1]:9090", "[::1]", "[::1]:", "[::ffff:10.1.2.3]:80"}) {
    EXPECT_TRUE(is_ip_literal_host(host)) << host;
  }
}

TEST(IpLiteralHost, NamesAndMalformedAddressesAreNot) {
  for (const char* host :
       {"", "localhost", "evil.example", "10.1.2.3.nip.io", "10.1.2.3.evil.example:9090",
        "2001:db8::1", "::1", "[2001:db8::1", "[10.1.2.3]", "10.1.2.3:90x", "10.1.2.3:123456",
        "10.1.2:9090", "010.1.2.3", "[::1]x", "[fe80::1%25eth0]"}) {
    EXPECT_FALSE(is_ip_literal_host(host)) << host;
  }
}

TEST(AdminHost, AnyIpLiteralIsAnsweredAndNamesOnlyWhenKnown) {
  policy::AdminAccess access;
  access.hosts = {"sluice-admin.internal"};
  const auto allowed = [&](std::optional<std::string_view> host) {
    return admin_host_allowed(host, "0.0.0.0", "10.88.0.5", access);
  };
  EXPECT_TRUE(allowed("127.0.0.1:9090"));  // through a port mapping
  EXPECT_TRUE(allowed("10.88.0.5:9090"));  // the address it arrived on
  EXPECT_TRUE(allowed("[::1]:9090"));
  EXPECT_TRUE(allowed("localhost:9090"));
  EXPECT_TRUE(allowed("Sluice-Admin.Internal"));
  EXPECT_TRUE(allowed(std::nullopt));  // HTTP/1.0: no browser
  EXPECT_FALSE(allowed("evil.example:9090"));
  EXPECT_FALSE(allowed("127.0.0.1.evil.example"));
}

}  // namespace
}  // namespace sluice::http
