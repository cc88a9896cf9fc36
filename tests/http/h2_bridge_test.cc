// The HTTP/1.1 side of an HTTP/2 stream (http/h2_bridge.h) and the preface
// that makes a connection HTTP/2 (http/h2_connection.h).
#include <string>

#include <gtest/gtest.h>

#include "http/h2_bridge.h"
#include "http/h2_connection.h"

namespace sluice::http {
namespace {

BridgedRequest get_request() {
  BridgedRequest r;
  r.add(":method", "GET");
  r.add(":scheme", "https");
  r.add(":authority", "api.example");
  r.add(":path", "/a?b=1");
  return r;
}

TEST(H2Bridge, RequestHeadIsHttp11WithHostFromAuthorityAndConnectionClose) {
  BridgedRequest r = get_request();
  r.add("accept", "*/*");
  EXPECT_EQ(r.head(false),
            "GET /a?b=1 HTTP/1.1\r\nHost: api.example\r\naccept: */*\r\nConnection: close\r\n\r\n");
  EXPECT_FALSE(r.chunked());
}

TEST(H2Bridge, SplitCookiesAreJoinedAndExpectIsDropped) {
  BridgedRequest r = get_request();
  r.add("cookie", "a=1");
  r.add("expect", "100-continue");
  r.add("cookie", "b=2");
  EXPECT_EQ(r.head(false),
            "GET /a?b=1 HTTP/1.1\r\nHost: api.example\r\ncookie: a=1; b=2\r\nConnection: "
            "close\r\n\r\n");
}

TEST(H2Bridge, ABodyWithoutLengthIsChunkedOneWithLengthIsNot) {
  BridgedRequest chunked = get_request();
  EXPECT_NE(chunked.head(true).find("Transfer-Encoding: chunked\r\n"), std::string::npos);
  EXPECT_TRUE(chunked.chunked());
  BridgedRequest sized = get_request();
  sized.add("content-length", "5");
  EXPECT_EQ(sized.head(true).find("Transfer-Encoding"), std::string::npos);
  EXPECT_FALSE(sized.chunked());
}

TEST(H2Bridge, BytesCountEachFieldAsItsHttp11Line) {
  BridgedRequest r;
  r.add("x-a", "bc");  // "x-a: bc\r\n"
  EXPECT_EQ(r.bytes(), 9u);
}

TEST(H2Bridge, ResponseFieldsAreLowercaseWithoutHopByHopAndTheBodyUnchunked) {
  std::string body;
  BridgedResponseParser p(body);
  p.eager(true);
  const std::string text =
      "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 60\r\nConnection: close\r\n"
      "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
  boost::beast::error_code ec;
  p.put(boost::asio::buffer(text), ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_TRUE(p.is_done());
  EXPECT_EQ(p.status(), 429u);
  ASSERT_EQ(p.fields().size(), 1u);
  EXPECT_EQ(p.fields()[0].first, "retry-after");
  EXPECT_EQ(p.fields()[0].second, "60");
  EXPECT_EQ(body, "abcde");
}

TEST(H2Bridge, PrefaceWholePartOrNot) {
  const std::string preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  EXPECT_EQ(match_h2_preface(preface + "frames"), H2Preface::kWhole);
  EXPECT_EQ(match_h2_preface(preface.substr(0, 10)), H2Preface::kPart);
  EXPECT_EQ(match_h2_preface("GET / HTTP/1.1\r\n"), H2Preface::kNo);
  EXPECT_EQ(match_h2_preface("PRI * HTTP/1.1\r\n"), H2Preface::kNo);
}

}  // namespace
}  // namespace sluice::http
