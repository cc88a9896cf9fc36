// RFC 7239 Forwarded as the client address walk reads it (policy/forwarded.h).
#include <gtest/gtest.h>

#include <string>

#include "policy/forwarded.h"

namespace sluice::policy {
namespace {

std::string text(const std::optional<IpAddress>& ip) {
  return ip ? ip->text() : "<none>";
}

TEST(ForwardedNode, AddressesWithAndWithoutPorts) {
  EXPECT_EQ(text(parse_forwarded_node("192.0.2.43")), "192.0.2.43");
  EXPECT_EQ(text(parse_forwarded_node("192.0.2.43:80")), "192.0.2.43");
  EXPECT_EQ(text(parse_forwarded_node("192.0.2.43:_p-1.x")), "192.0.2.43");
  EXPECT_EQ(text(parse_forwarded_node("[2001:db8:cafe::17]")), "2001:db8:cafe::17");
  EXPECT_EQ(text(parse_forwarded_node("[2001:db8:cafe::17]:4711")), "2001:db8:cafe::17");
  EXPECT_EQ(text(parse_forwarded_node("[::ffff:192.0.2.1]")), "192.0.2.1");
}

TEST(ForwardedNode, NamesThatAreNoAddress) {
  for (const std::string_view node :
       {"", "unknown", "UNKNOWN", "_hidden", "_SEVKISEK", "2001:db8::1", "[2001:db8::1",
        "[192.0.2.1]", "192.0.2.1:", "192.0.2.1:123456", "192.0.2.1:_", "192.0.2.1:a",
        "[2001:db8::1]4711", "[2001:db8::1]:", "192.0.2.1:80:80", "192.0.2.256",
        "[fe80::1%eth0]"}) {
    EXPECT_FALSE(parse_forwarded_node(node).has_value()) << node;
  }
}

TEST(ForwardedElement, TheForOfOneElement) {
  EXPECT_EQ(text(forwarded_element_for("for=192.0.2.60;proto=http;by=203.0.113.43")), "192.0.2.60");
  EXPECT_EQ(text(forwarded_element_for("by=203.0.113.43; FOR=192.0.2.60 ;;")), "192.0.2.60");
  EXPECT_EQ(text(forwarded_element_for(R"(for="\[2001:db8::1\]:80")")), "2001:db8::1");
  EXPECT_EQ(text(forwarded_element_for(R"(host="a;b,c";for=192.0.2.60)")), "192.0.2.60");
  for (const std::string_view element :
       {"", "proto=http", "for=192.0.2.60;for=192.0.2.61", "for =192.0.2.60", "for=\"192.0.2.60",
        "for=192.0.2.60 proto=http", "for=192.0.2.60,", "for=\"192.0.2.60\x01\"", "for=unknown"}) {
    EXPECT_FALSE(forwarded_element_for(element).has_value()) << element;
  }
}

TEST(ForwardedSeparator, TheLastCommaOutsideQuotedStrings) {
  EXPECT_EQ(last_forwarded_separator("for=a"), std::string_view::npos);
  EXPECT_EQ(last_forwarded_separator("for=a, for=b"), 5u);
  EXPECT_EQ(last_forwarded_separator(R"(for=a, x=",")"), 5u);
  EXPECT_EQ(last_forwarded_separator(R"(for=a, x="\",")"), 5u);
  EXPECT_EQ(last_forwarded_separator(R"(for=a, x="\\",y)"), 13u);
  // An unterminated quote on the left does not hide the comma on its right.
  EXPECT_EQ(last_forwarded_separator(R"(for=", for=b)"), 5u);
}

}  // namespace
}  // namespace sluice::policy
