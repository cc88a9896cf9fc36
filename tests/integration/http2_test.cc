// HTTP/2 to clients (`http2: true`) through the real sluice binary: curl
// with prior knowledge (h2c) and over TLS (h2 by ALPN) gets the decisions
// and rate-limit headers HTTP/1.1 gets; concurrent streams on one
// connection are each one request, answered on their own stream; a
// rapid-reset flood ends the connection with GOAWAY and is counted; a header
// list over server.max_header_bytes is refused; `http2: false` speaks
// HTTP/1.1 only. The scripted client is h2_client.py (Python's h2 module).
#include <sstream>
#include <string>
#include <vector>

#include "gateway_support.h"
#include "test_support.h"
#include "tls/test_certs.h"
#include "tls_support.h"

namespace sluice::test {
namespace {

const std::string kAllowed = R"(sluice_requests_total{route="GET /api/x",result="allowed"})";
const std::string kDenied = R"(sluice_requests_total{route="GET /api/x",result="denied"})";
const std::string kRapidResets = "sluice_http2_rapid_resets_total";
const std::string kDeniedBody =
    R"({"error":{"code":"RATE_LIMITED","message":"Too many requests. Please retry after the Retry-After period.","limit":"GET /api/x"}})";

std::string yaml(bool http2, int capacity, const std::string& before = "",
                 const std::string& server = "") {
  return before + "http2: " + (http2 ? "true" : "false") + "\nserver: {threads: 1" + server +
         R"(}
routes:
  - match: GET /api/x
    key: ip
    limits: [{capacity: )" +
         std::to_string(capacity) + R"(, refill_rate: 1/h}]
)";
}

std::string h2_client(const std::string& mode, uint16_t port, int n) {
  return run_command("/usr/bin/python3 " SLUICE_SOURCE_DIR "/tests/integration/h2_client.py " +
                     mode + " " + std::to_string(port) + " " + std::to_string(n) + " /api/x")
      .output;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(Http2, CurlWithPriorKnowledgeGetsStatusAndRateLimitHeaders) {
  auto server = SluiceProcess::start(yaml(true, 2));
  ASSERT_NE(server, nullptr);
  const std::string curl =
      "curl -sS --http2-prior-knowledge -D - http://127.0.0.1:" + std::to_string(server->port()) +
      "/api/x";
  const std::string first = run_command(curl).output;
  EXPECT_NE(first.find("HTTP/2 200 \r\n"), std::string::npos) << first;
  EXPECT_NE(first.find("x-ratelimit-limit: 2\r\n"), std::string::npos) << first;
  EXPECT_NE(first.find("x-ratelimit-remaining: 1\r\n"), std::string::npos) << first;
  EXPECT_NE(first.find(R"({"allowed":true})"), std::string::npos) << first;
  const std::string second = run_command(curl).output;
  EXPECT_NE(second.find("x-ratelimit-remaining: 0\r\n"), std::string::npos) << second;
  const std::string third = run_command(curl).output;
  EXPECT_NE(third.find("HTTP/2 429 \r\n"), std::string::npos) << third;
  EXPECT_NE(third.find("retry-after: "), std::string::npos) << third;
  EXPECT_NE(third.find("content-type: application/json\r\n"), std::string::npos) << third;
  EXPECT_NE(third.find(kDeniedBody), std::string::npos) << third;
  EXPECT_EQ(server->metric(kAllowed), 2);
  EXPECT_EQ(server->metric(kDenied), 1);
  // HTTP/1.1 keeps working on the same port.
  const std::string http11 =
      "curl -sS -o /dev/null -w '%{http_code} %{http_version}' http://127.0.0.1:" +
      std::to_string(server->port()) + "/api/x";
  EXPECT_EQ(run_command(http11).output, "429 1.1");
}

TEST(Http2, CurlOverTlsNegotiatesH2ByAlpn) {
  testing::TestCerts certs;
  ASSERT_TRUE(certs.ok()) << certs.error();
  auto server = SluiceProcess::start(
      yaml(true, 2, "tls: {cert: " + certs.server_cert() + ", key: " + certs.server_key() + "}\n"));
  ASSERT_NE(server, nullptr);
  const std::string url = "https://localhost:" + std::to_string(server->port()) + "/api/x";
  const std::string curl =
      "curl -sS --http2 --cacert " + certs.ca() +
      " -o /dev/null -w '%{http_code} %{http_version} %header{x-ratelimit-remaining}' " + url;
  EXPECT_EQ(run_command(curl).output, "200 2 1");
  EXPECT_EQ(run_command(curl).output, "200 2 0");
  EXPECT_EQ(run_command(curl).output, "429 2 0");
  // A client offering HTTP/1.1 only is answered in it.
  const std::string http11 = "curl -sS --http1.1 --cacert " + certs.ca() +
                             " -o /dev/null -w '%{http_code} %{http_version}' " + url;
  EXPECT_EQ(run_command(http11).output, "429 1.1");
  EXPECT_EQ(server->metric(kAllowed), 2);
  EXPECT_EQ(server->metric(kDenied), 2);
}

TEST(Http2, TenConcurrentStreamsAgainstALimitOfFiveEachAnsweredOnItsOwnStream) {
  auto server = SluiceProcess::start(yaml(true, 5));
  ASSERT_NE(server, nullptr);
  const std::vector<std::string> lines = lines_of(h2_client("streams", server->port(), 10));
  ASSERT_EQ(lines.size(), 10u);
  int allowed = 0;
  int denied = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    // Streams 1, 3, 5, ...: each has exactly one answer.
    const std::string id = std::to_string(2 * i + 1) + " ";
    ASSERT_EQ(lines[i].rfind(id, 0), 0u) << lines[i];
    const std::string rest = lines[i].substr(id.size());
    if (rest.rfind("200 ", 0) == 0) {
      ++allowed;
      EXPECT_EQ(rest.substr(rest.find(' ', 4) + 1), R"({"allowed":true})");
    } else {
      ++denied;
      EXPECT_EQ(rest, "429 0 " + kDeniedBody);
    }
  }
  EXPECT_EQ(allowed, 5);
  EXPECT_EQ(denied, 5);
  EXPECT_EQ(server->metric(kAllowed), 5);
  EXPECT_EQ(server->metric(kDenied), 5);
}

TEST(Http2, RapidResetFloodEndsTheConnectionWithGoawayAndIsCounted) {
  auto server = SluiceProcess::start(yaml(true, 1000000));
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->metric(kRapidResets), 0);
  // 300 streams opened and reset at once: past the budget of 100, GOAWAY
  // with ENHANCE_YOUR_CALM (11).
  EXPECT_EQ(h2_client("flood", server->port(), 300), "goaway 11\n");
  EXPECT_TRUE(server->wait_for_metric(kRapidResets, 1)) << server->metric(kRapidResets);
  // The server goes on serving.
  EXPECT_EQ(lines_of(h2_client("streams", server->port(), 1)).size(), 1u);
  EXPECT_EQ(server->metric(kRapidResets), 1);
}

TEST(Http2, AHeaderListOverTheLimitIsRefused) {
  auto server = SluiceProcess::start(yaml(true, 10, "", ", max_header_bytes: 2KiB"));
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(h2_client("header", server->port(), 1000), "200 {\"allowed\":true}\n");
  EXPECT_EQ(
      h2_client("header", server->port(), 3000),
      "431 "
      R"({"error":{"code":"HEADER_TOO_LARGE","message":"the request header is larger than 2048 bytes"}})"
      "\n");
  EXPECT_EQ(server->metric(R"(sluice_http_rejected_total{reason="header_too_large"})"), 1);
  EXPECT_EQ(server->metric(kAllowed), 1);
}

// A body larger than the stream's window both ways: the request streams to
// the upstream (through the pool, as HTTP/1.1) and its echo streams back.
TEST(Http2, ABodyStreamsThroughTheGatewayBothWays) {
  DemoUpstream demo(SLUICE_BINARY);
  ASSERT_NE(demo.port(), 0);
  auto server = SluiceProcess::start("upstream: " + demo.url() + "\n" + yaml(true, 10));
  ASSERT_NE(server, nullptr);
  const std::string dir = make_temp_dir();
  ASSERT_EQ(run_command("head -c 300000 /dev/urandom > " + dir + "/in").status, 0);
  const std::string curl = "curl -sS --http2-prior-knowledge --data-binary @" + dir + "/in -o " +
                           dir + "/out -w '%{http_code} %{http_version}' " +
                           "'http://127.0.0.1:" + std::to_string(server->port()) + "/api/x?echo=1'";
  EXPECT_EQ(run_command(curl).output, "200 2");
  EXPECT_EQ(run_command("cmp " + dir + "/in " + dir + "/out && echo same").output, "same\n");
  remove_dir(dir);
}

TEST(Http2, OffAnswersHttp11Only) {
  auto server = SluiceProcess::start(yaml(false, 5));
  ASSERT_NE(server, nullptr);
  const std::string port = std::to_string(server->port());
  const CommandResult h2c = run_command(
      "curl -sS --http2-prior-knowledge -o /dev/null http://127.0.0.1:" + port + "/api/x");
  EXPECT_NE(h2c.status, 0) << h2c.output;
  EXPECT_EQ(run_command("curl -sS -o /dev/null -w '%{http_code} %{http_version}' "
                        "http://127.0.0.1:" +
                        port + "/api/x")
                .output,
            "200 1.1");
  EXPECT_EQ(server->metric(kAllowed), 1);
}

TEST(Http2, OffOverTlsAnswersAlpnWithHttp11) {
  testing::TestCerts certs;
  ASSERT_TRUE(certs.ok()) << certs.error();
  auto server = SluiceProcess::start(yaml(
      false, 5, "tls: {cert: " + certs.server_cert() + ", key: " + certs.server_key() + "}\n"));
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(run_command("curl -sS --http2 --cacert " + certs.ca() +
                        " -o /dev/null -w '%{http_code} %{http_version}' https://localhost:" +
                        std::to_string(server->port()) + "/api/x")
                .output,
            "200 1.1");
}

}  // namespace
}  // namespace sluice::test
