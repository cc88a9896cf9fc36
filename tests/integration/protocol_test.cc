// What a client sends never crashes the server: malformed HTTP gets 400,
// oversized headers 431, oversized bodies 413, slow headers 408, and the
// server keeps serving (docs/DESIGN.md §6).
#include "test_support.h"

namespace sluice::test {
namespace {

const std::string kYaml = R"(
headers: [legacy]
server:
  max_header_bytes: 2KiB
  max_body_bytes: 1KiB
  header_timeout: 1s
policies:
  login: {capacity: 5, refill_rate: 1/h}
routes:
  - match: GET /api/search
    limits: [{capacity: 100, refill_rate: 1/h}]
)";

class Protocol : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = SluiceProcess::start(kYaml);
    ASSERT_NE(server_, nullptr);
  }
  void expect_still_serving() const {
    const HttpResponse r = server_->get("/api/search");
    EXPECT_EQ(r.status, 200);
  }
  std::unique_ptr<SluiceProcess> server_;
};

void expect_json_error(const HttpResponse& r, int status, const std::string& code) {
  EXPECT_EQ(r.status, status) << r.body;
  EXPECT_EQ(r.header("Content-Type"), "application/json");
  EXPECT_NE(r.body.find("\"code\":\"" + code + "\""), std::string::npos) << r.body;
  EXPECT_EQ(r.header("Connection"), "close");
}

TEST_F(Protocol, MalformedRequestLineGets400ThenTheConnectionCloses) {
  auto c = server_->connect();
  c->send_raw("GARBAGE\r\n\r\n");
  expect_json_error(c->read_response(), 400, "BAD_REQUEST");
  EXPECT_TRUE(c->closed_by_peer());
  expect_still_serving();
}

TEST_F(Protocol, MalformedHeaderLineGets400) {
  auto c = server_->connect();
  c->send_raw("GET /api/search HTTP/1.1\r\nHost: x\r\nthis is not a header\r\n\r\n");
  expect_json_error(c->read_response(), 400, "BAD_REQUEST");
  EXPECT_TRUE(c->closed_by_peer());
  expect_still_serving();
}

TEST_F(Protocol, BadContentLengthGets400) {
  auto c = server_->connect();
  c->send_raw("POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: banana\r\n\r\n");
  expect_json_error(c->read_response(), 400, "BAD_REQUEST");
  expect_still_serving();
}

TEST_F(Protocol, BinaryNoiseGets400) {
  auto c = server_->connect();
  std::string noise;
  for (int i = 0; i < 512; ++i) noise += static_cast<char>((i * 37 + 11) % 256);
  c->send_raw(noise + "\r\n\r\n");
  EXPECT_EQ(c->read_response().status, 400);
  expect_still_serving();
}

TEST_F(Protocol, OversizedHeaderGets431) {
  auto c = server_->connect();
  c->send_request("GET", "/api/search", {{"X-Padding", std::string(4096, 'a')}});
  expect_json_error(c->read_response(), 431, "HEADER_TOO_LARGE");
  EXPECT_TRUE(c->closed_by_peer());
  expect_still_serving();
}

TEST_F(Protocol, HeaderJustUnderTheLimitIsServed) {
  const HttpResponse r = server_->get("/api/search", {{"X-Padding", std::string(1500, 'a')}});
  EXPECT_EQ(r.status, 200);
}

TEST_F(Protocol, OversizedBodyGets413) {
  auto c = server_->connect();
  const std::string body = R"({"policy":"login","key":")" + std::string(2000, 'k') + "\"}";
  c->send_request("POST", "/v1/check", {{"Content-Type", "application/json"}}, body);
  expect_json_error(c->read_response(), 413, "BODY_TOO_LARGE");
  expect_still_serving();
}

TEST_F(Protocol, OversizedChunkedBodyGets413) {
  auto c = server_->connect();
  std::string chunked = "POST /v1/check HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 4; ++i) chunked += "200\r\n" + std::string(512, 'x') + "\r\n";
  chunked += "0\r\n\r\n";
  c->send_raw(chunked);
  expect_json_error(c->read_response(), 413, "BODY_TOO_LARGE");
  expect_still_serving();
}

TEST_F(Protocol, SlowHeaderGets408) {
  auto c = server_->connect();
  c->send_raw("GET /api/search HTTP/1.1\r\nHost: x\r\n");  // and never the blank line
  // header_timeout is 1 s; the answer must come well within 5 s.
  expect_json_error(c->read_response(std::chrono::seconds(5)), 408, "REQUEST_TIMEOUT");
  EXPECT_TRUE(c->closed_by_peer());
  expect_still_serving();
}

TEST_F(Protocol, KeepAliveServesSeveralRequestsOnOneConnection) {
  auto c = server_->connect();
  for (int i = 0; i < 3; ++i) {
    const HttpResponse r = c->request("GET", "/api/search");
    EXPECT_EQ(r.status, 200);
    EXPECT_FALSE(r.has_header("Connection"));
  }
  // A POST with a small body that the gateway does not need keeps the connection too.
  EXPECT_EQ(c->request("POST", "/other", {}, "payload").status, 200);
  EXPECT_EQ(c->request("GET", "/api/search").status, 200);
}

TEST(KeepAlive, AConnectionIdlePastIdleTimeoutIsClosedQuietly) {
  auto server = SluiceProcess::start(R"(
server:
  idle_timeout: 1s
  header_timeout: 30s
)");
  ASSERT_NE(server, nullptr);
  auto c = server->connect();
  const auto sent = std::chrono::steady_clock::now();
  ASSERT_EQ(c->request("GET", "/a").status, 200);
  // Idle from its response on: closed after idle_timeout (1 s), with no
  // answer (read_response gets none), long before header_timeout (30 s).
  EXPECT_EQ(c->read_response(std::chrono::seconds(20)).status, 0);
  EXPECT_GE(std::chrono::steady_clock::now() - sent, std::chrono::seconds(1));
  EXPECT_TRUE(c->closed_by_peer(std::chrono::seconds(1)));
  EXPECT_EQ(server->metric(R"(sluice_http_rejected_total{reason="timeout"})"), 0);
}

TEST(KeepAlive, AConnectionIdleWithinIdleTimeoutIsReusedPastHeaderTimeout) {
  auto server = SluiceProcess::start(R"(
server:
  idle_timeout: 60s
  header_timeout: 1s
)");
  ASSERT_NE(server, nullptr);
  auto kept = server->connect();
  ASSERT_EQ(kept->request("GET", "/a").status, 200);
  // A new connection that sends nothing is closed header_timeout (1 s) after
  // its accept...
  auto silent = server->connect();
  EXPECT_TRUE(silent->closed_by_peer(std::chrono::seconds(20)));
  // ... by then `kept` has waited longer than that between two requests, and
  // idle_timeout (60 s) applies to it: the same connection serves again.
  const HttpResponse again = kept->request("GET", "/a");
  EXPECT_EQ(again.status, 200);
  EXPECT_FALSE(again.has_header("Connection"));
}

TEST_F(Protocol, PipelinedRequestsAreAnsweredInOrder) {
  auto c = server_->connect();
  c->send_raw(
      "GET /api/search HTTP/1.1\r\nHost: x\r\n\r\n"
      "POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: 31\r\n\r\n"
      R"({"policy":"login","key":"pipe"})"
      "GET /v1/check HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(c->read_response().status, 200);
  const HttpResponse check = c->read_response();
  EXPECT_EQ(check.status, 200);
  EXPECT_NE(check.body.find(R"("remaining":4)"), std::string::npos) << check.body;
  EXPECT_EQ(c->read_response().status, 405);
}

TEST_F(Protocol, Http10ClosesAfterTheResponse) {
  auto c = server_->connect();
  c->send_raw("GET /api/search HTTP/1.0\r\n\r\n");
  const HttpResponse r = c->read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(c->closed_by_peer());
}

TEST_F(Protocol, ClientThatDisconnectsMidRequestChargesNothingAndDoesNotDisturbOthers) {
  const std::string body = R"({"policy":"login","key":"aborted"})";
  {
    // The whole JSON object, but Content-Length promises 100 bytes.
    auto c = server_->connect();
    c->send_raw("POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n" + body);
  }  // closed with the body unfinished
  {
    auto c = server_->connect();
    c->send_raw("GET /api/sea");
  }  // closed mid request line
  // Both connections are gone on the server's side too: the only one open is
  // the admin connection asking.
  ASSERT_TRUE(server_->wait_for_metric("sluice_open_connections", 1));
  expect_still_serving();
  // Nothing was charged to the key: this first complete check leaves 4 of 5.
  const HttpResponse check = server_->post("/v1/check", body);
  EXPECT_EQ(check.status, 200);
  EXPECT_EQ(
      check.body,
      R"({"allowed":true,"limit":5,"remaining":4,"reset_after_ms":3600000,"retry_after_ms":0})");
}

}  // namespace
}  // namespace sluice::test
