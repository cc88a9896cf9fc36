// The gateway proxy's header rewriting (src/http/proxy_headers.h).
#include "http/proxy_headers.h"

#include <string>
#include <string_view>

#include <gtest/gtest.h>
#include <boost/beast/http/fields.hpp>

namespace sluice::http::proxy {
namespace {

namespace bhttp = boost::beast::http;

std::string copied(const bhttp::fields& from, std::initializer_list<std::string_view> drop = {}) {
  std::string out;
  append_end_to_end(from, std::span<const std::string_view>(drop.begin(), drop.size()), out);
  return out;
}

TEST(ProxyHeaders, EveryHopByHopFieldIsRecognisedWhateverItsCase) {
  for (const char* name :
       {"Connection", "keep-alive", "PROXY-CONNECTION", "TE", "Trailer", "Transfer-Encoding",
        "Upgrade", "Proxy-Authorization", "Proxy-Authenticate", "Content-Length"}) {
    EXPECT_TRUE(is_hop_by_hop(name)) << name;
  }
  for (const char* name : {"Host", "X-Forwarded-For", "Authorization", "TEA", "Connections"}) {
    EXPECT_FALSE(is_hop_by_hop(name)) << name;
  }
}

TEST(ProxyHeaders, EndToEndFieldsAreCopiedInOrderWithDuplicates) {
  bhttp::fields f;
  f.insert("Accept", "a/b");
  f.insert("X-Custom", "1");
  f.insert("Accept", "c/d");
  // Beast keeps fields of one name together, in the order they came (the
  // order between different names carries no meaning, RFC 9110 §5.3).
  EXPECT_EQ(copied(f), "Accept: a/b\r\nAccept: c/d\r\nX-Custom: 1\r\n");
}

TEST(ProxyHeaders, HopByHopFieldsAndFramingAreNotCopied) {
  bhttp::fields f;
  f.insert("Connection", "keep-alive");
  f.insert("Keep-Alive", "timeout=5");
  f.insert("Proxy-Connection", "keep-alive");
  f.insert("TE", "trailers");
  f.insert("Trailer", "X-Sum");
  f.insert("Transfer-Encoding", "chunked");
  f.insert("Upgrade", "websocket");
  f.insert("Proxy-Authorization", "Basic x");
  f.insert("Proxy-Authenticate", "Basic");
  f.insert("Content-Length", "10");
  f.insert("Accept", "*/*");
  EXPECT_EQ(copied(f), "Accept: */*\r\n");
}

TEST(ProxyHeaders, FieldsNamedByConnectionStopButHostStays) {
  bhttp::fields f;
  f.insert("Host", "example.test");
  f.insert("X-Secret", "1");  // named below, after it appears
  f.insert("Connection", "close, x-secret, Host");
  f.insert("Connection", "X-Other");
  f.insert("X-Other", "2");
  f.insert("X-Kept", "3");
  EXPECT_EQ(copied(f), "Host: example.test\r\nX-Kept: 3\r\n");
}

TEST(ProxyHeaders, DroppedNamesAreLeftOutWhateverTheirCase) {
  bhttp::fields f;
  f.insert("x-forwarded-for", "1.2.3.4");
  f.insert("Expect", "100-continue");
  f.insert("X-Kept", "1");
  EXPECT_EQ(copied(f, {"X-Forwarded-For", "expect"}), "X-Kept: 1\r\n");
}

TEST(ProxyHeaders, TheBasePathIsPrefixedToTheTarget) {
  auto target = [](std::string_view base, std::string_view t) {
    std::string out;
    append_upstream_target(base, t, out);
    return out;
  };
  EXPECT_EQ(target("", "/a/b?c=1"), "/a/b?c=1");
  EXPECT_EQ(target("/base", "/a/b?c=1"), "/base/a/b?c=1");
  EXPECT_EQ(target("/base", "/"), "/base/");
  EXPECT_EQ(target("", "*"), "*");
  EXPECT_EQ(target("/base", "*"), "/base");
  // Absolute form: the client does not choose the upstream.
  EXPECT_EQ(target("", "http://elsewhere.test:81/a?b=2"), "/a?b=2");
  EXPECT_EQ(target("/base", "http://elsewhere.test"), "/base/");
}

TEST(ProxyHeaders, XForwardedForGetsThePeerAppendedAndTheOthersAreSetOnce) {
  bhttp::fields plain;
  plain.insert("Host", "api.test");
  std::string out;
  append_forwarding_fields(plain, Forwarding{"192.0.2.7", "192.0.2.7", false}, out);
  EXPECT_EQ(out,
            "X-Forwarded-For: 192.0.2.7\r\nX-Real-IP: 192.0.2.7\r\nForwarded: for=192.0.2.7\r\n"
            "X-Forwarded-Proto: http\r\nX-Forwarded-Host: api.test\r\n");
  // Over TLS (`tls:` on listen) the scheme Sluice was reached by is https.
  out.clear();
  append_forwarding_fields(plain, Forwarding{"192.0.2.7", "192.0.2.7", false, true}, out);
  EXPECT_NE(out.find("\r\nX-Forwarded-Proto: https\r\n"), std::string::npos) << out;

  bhttp::fields proxied;
  proxied.insert("Host", "api.test");
  proxied.insert("X-Forwarded-For", "203.0.113.1, 198.51.100.2");
  proxied.insert("X-Forwarded-For", "10.0.0.1");
  proxied.insert("X-Forwarded-Proto", "https");
  proxied.insert("X-Forwarded-Host", "www.test");
  out.clear();
  append_forwarding_fields(proxied, Forwarding{"2001:db8::1", "198.51.100.2", true}, out);
  EXPECT_EQ(out,
            "X-Forwarded-For: 203.0.113.1, 198.51.100.2, 10.0.0.1, 2001:db8::1\r\n"
            "X-Real-IP: 198.51.100.2\r\nForwarded: for=\"[2001:db8::1]\"\r\n"
            "X-Forwarded-Proto: https\r\nX-Forwarded-Host: www.test\r\n");
}

// Upstreams build redirects and "secure" decisions on X-Forwarded-Proto and
// X-Forwarded-Host: a client that is not a trusted proxy gets Sluice's own
// (the caller drops the client's from the copy), a trusted proxy keeps its.
TEST(ProxyHeaders, ForwardedProtoAndHostOfAnUntrustedPeerAreReplaced) {
  bhttp::fields claimed;
  claimed.insert("Host", "api.test");
  claimed.insert("X-Forwarded-Proto", "https");
  claimed.insert("X-Forwarded-Host", "bank.test");
  std::string out;
  append_forwarding_fields(claimed, Forwarding{"192.0.2.7", "192.0.2.7", false}, out);
  EXPECT_EQ(out,
            "X-Forwarded-For: 192.0.2.7\r\nX-Real-IP: 192.0.2.7\r\nForwarded: for=192.0.2.7\r\n"
            "X-Forwarded-Proto: http\r\nX-Forwarded-Host: api.test\r\n");
  out.clear();
  append_forwarding_fields(claimed, Forwarding{"10.0.0.2", "10.0.0.2", true}, out);
  EXPECT_EQ(out,
            "X-Forwarded-For: 10.0.0.2\r\nX-Real-IP: 10.0.0.2\r\nForwarded: for=10.0.0.2\r\n"
            "X-Forwarded-Proto: https\r\nX-Forwarded-Host: bank.test\r\n");
}

// A client that is not a trusted proxy cannot tell the upstream who it is:
// its X-Real-IP and Forwarded are replaced (the caller drops them from the
// copy), and Forwarded names only the peer.
TEST(ProxyHeaders, ForwardedOfAnUntrustedPeerIsReplacedAndOfATrustedOneExtended) {
  bhttp::fields spoofed;
  spoofed.insert("Host", "api.test");
  spoofed.insert("Forwarded", "for=10.9.9.9");
  std::string out;
  append_forwarding_fields(spoofed, Forwarding{"192.0.2.7", "192.0.2.7", false}, out);
  EXPECT_EQ(out,
            "X-Forwarded-For: 192.0.2.7\r\nX-Real-IP: 192.0.2.7\r\nForwarded: for=192.0.2.7\r\n"
            "X-Forwarded-Proto: http\r\nX-Forwarded-Host: api.test\r\n");
  out.clear();
  append_forwarding_fields(spoofed, Forwarding{"10.0.0.2", "10.9.9.9", true}, out);
  EXPECT_EQ(out,
            "X-Forwarded-For: 10.0.0.2\r\nX-Real-IP: 10.9.9.9\r\n"
            "Forwarded: for=10.9.9.9, for=10.0.0.2\r\n"
            "X-Forwarded-Proto: http\r\nX-Forwarded-Host: api.test\r\n");
}

}  // namespace
}  // namespace sluice::http::proxy
