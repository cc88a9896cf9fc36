// Key redaction (policy/redact.h): values from the request hashed, the rest kept.
#include <gtest/gtest.h>

#include "policy/redact.h"

namespace sluice::policy {
namespace {

TEST(RedactKey, HeaderValuesBecomeAStableTwelveDigitHash) {
  // FNV-1a 64 of "s3cret", its 12 low nibbles from the lowest up: pinned, so
  // hashes in old logs keep matching new ones.
  EXPECT_EQ(redact_key("h:x-api-key=s3cret"), "h:x-api-key=~76e4a7b30b55");
  EXPECT_NE(redact_key("h:x-api-key=s3creT"), "h:x-api-key=~76e4a7b30b55");
  EXPECT_EQ(redact_key("h:authorization=s3cret"), "h:authorization=~76e4a7b30b55");
}

TEST(RedactKey, IpGlobalAndScopesAreKept) {
  EXPECT_EQ(redact_key("ip:192.0.2.1"), "ip:192.0.2.1");
  EXPECT_EQ(redact_key("global"), "global");
  EXPECT_EQ(redact_key("policy:login|user:h:x=1"), "policy:login|user:h:x=1");
  const std::string hashed = redact_key("h:x-api-key=abc");
  EXPECT_EQ(redact_key("route:GET /a|ip:192.0.2.1+h:x-api-key=abc"),
            "route:GET /a|ip:192.0.2.1+" + hashed);
  EXPECT_EQ(redact_key("route:GET /a|h:x-api-key=abc+ip:192.0.2.1"),
            "route:GET /a|" + hashed + "+ip:192.0.2.1");
  EXPECT_EQ(redact_key(""), "");
  EXPECT_EQ(redact_key("c:sid=s3cret+q:api_key=s3cret"),
            "c:sid=~76e4a7b30b55+q:api_key=~76e4a7b30b55");
  EXPECT_EQ(redact_key("j:sub=s3cret+ip:192.0.2.1"), "j:sub=~76e4a7b30b55+ip:192.0.2.1");
}

TEST(RedactKey, ADigestStoredForALongValueIsRedactedLikeAnyValue) {
  // A value above 256 bytes is stored as its digest (policy/key_bound.h);
  // a log shows the redaction of that, never the digest itself.
  const std::string digest = "%sha256:00112233445566778899aabbccddeeff";
  const std::string shown = redact_key("route:GET /a|h:x-api-key=" + digest + "+ip:192.0.2.1");
  EXPECT_EQ(shown, "route:GET /a|" + redact_key("h:x-api-key=" + digest) + "+ip:192.0.2.1");
  EXPECT_EQ(shown.find("sha256"), std::string::npos) << shown;
  EXPECT_EQ(redact_key("h:x-api-key=" + digest).size(), std::string("h:x-api-key=~").size() + 12);
}

}  // namespace
}  // namespace sluice::policy
