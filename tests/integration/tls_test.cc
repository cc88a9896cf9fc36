// TLS on `listen` through the real sluice binary, with certificates the test
// makes (openssl command line): curl and a verifying client get the same
// decisions as over plain HTTP; a reload swaps the certificate for the next
// handshake while open connections carry on; a certificate that is expired or
// a key of another pair is refused at startup and on reload, with its position;
// TLS 1.2 offers ECDHE-AEAD suites only; unfinished handshakes are bounded.
#include <algorithm>
#include <csignal>
#include <memory>
#include <string>
#include <vector>

#include "gated_log.h"
#include "gateway_support.h"
#include "test_support.h"
#include "tls/test_certs.h"
#include "tls_support.h"

namespace sluice::test {
namespace {

const std::string kHandshakeFailures = "sluice_tls_handshake_failures_total";
const std::string kReloadFailures = R"(sluice_config_reloads_total{result="failure"})";
const std::string kReloadSuccesses = R"(sluice_config_reloads_total{result="success"})";
const std::string kHandshakes = "sluice_tls_handshakes";
const std::string kHandshakesDropped = "sluice_tls_handshakes_dropped_total";

class Tls : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(certs_.ok()) << certs_.error(); }

  // `tls:` (first in the file: line 3, after the harness's listen and admin)
  // and a route allowing 2 a minute per client.
  std::string yaml(const std::string& cert, const std::string& key, const std::string& extra = "",
                   const std::string& server = "{threads: 1}") const {
    return "tls: {cert: " + cert + ", key: " + key + extra + "}\nserver: " + server + R"(
routes:
  - match: GET /api/x
    key: ip
    limits: [{capacity: 2, refill_rate: 1/m}]
)";
  }

  testing::TestCerts certs_;
};

TEST_F(Tls, AVerifyingClientGetsTheDecisionsAndHeadersOverHttp11) {
  auto server = SluiceProcess::start(yaml(certs_.server_cert(), certs_.server_key()));
  ASSERT_NE(server, nullptr);
  TlsClient c(server->port(), certs_.ca());
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c.certificate_cn(), "server");
  EXPECT_EQ(c.alpn(), "http/1.1");
  EXPECT_EQ(c.protocol(), "TLSv1.3");
  // Three requests on one connection (keep-alive over TLS).
  const HttpResponse first = c.get("/api/x");
  const HttpResponse second = c.get("/api/x");
  const HttpResponse third = c.get("/api/x");
  EXPECT_EQ(first.status, 200);
  EXPECT_EQ(first.header("X-RateLimit-Limit"), "2");
  EXPECT_EQ(first.header("X-RateLimit-Remaining"), "1");
  EXPECT_EQ(first.body, R"({"allowed":true})");
  EXPECT_EQ(second.status, 200);
  EXPECT_EQ(second.header("X-RateLimit-Remaining"), "0");
  EXPECT_EQ(third.status, 429);
  EXPECT_EQ(third.header("Content-Type"), "application/json");
  EXPECT_EQ(
      third.body,
      R"({"error":{"code":"RATE_LIMITED","message":"Too many requests. Please retry after the Retry-After period.","limit":"GET /api/x"}})");
  EXPECT_EQ(server->metric(R"(sluice_requests_total{route="GET /api/x",result="denied"})"), 1);
}

TEST_F(Tls, CurlWithTheCaCertificate) {
  auto server = SluiceProcess::start(yaml(certs_.server_cert(), certs_.server_key()));
  ASSERT_NE(server, nullptr);
  const std::string url = "https://localhost:" + std::to_string(server->port()) + "/api/x";
  const std::string curl =
      "curl -sS --cacert " + certs_.ca() + " -o /dev/null -w '%{http_code} %{http_version}' " + url;
  EXPECT_EQ(run_command(curl).output, "200 1.1");
  EXPECT_EQ(run_command(curl).output, "200 1.1");
  EXPECT_EQ(run_command(curl).output, "429 1.1");
  // Without the CA, curl refuses the server (the server sees a handshake fail).
  const CommandResult unverified = run_command("curl -sS -o /dev/null " + url);
  EXPECT_NE(unverified.status, 0);
  EXPECT_TRUE(server->wait_for_metric(kHandshakeFailures, 1)) << server->metric(kHandshakeFailures);
  // Plain HTTP on the TLS port is not a TLS handshake: closed, counted.
  const CommandResult plain = run_command(
      "curl -sS -o /dev/null http://127.0.0.1:" + std::to_string(server->port()) + "/api/x");
  EXPECT_NE(plain.status, 0);
  EXPECT_TRUE(server->wait_for_metric(kHandshakeFailures, 2)) << server->metric(kHandshakeFailures);
  EXPECT_EQ(server->metric(R"(sluice_requests_total{route="GET /api/x",result="allowed"})"), 2);
}

TEST_F(Tls, MinVersion13RefusesATls12Client) {
  auto server = SluiceProcess::start(
      yaml(certs_.server_cert(), certs_.server_key(), ", min_version: \"1.3\""));
  ASSERT_NE(server, nullptr);
  TlsClient old(server->port(), certs_.ca(), "localhost", false, /*tls12_only=*/true);
  EXPECT_FALSE(old.ok());
  EXPECT_TRUE(server->wait_for_metric(kHandshakeFailures, 1)) << server->metric(kHandshakeFailures);
  TlsClient current(server->port(), certs_.ca());
  ASSERT_TRUE(current.ok()) << current.error();
  EXPECT_EQ(current.get("/api/x").status, 200);
}

// TLS 1.2 offers ECDHE with an AEAD cipher only: a client that insists on
// static-RSA key exchange, or on CBC (with SHA-1 or SHA-2), is refused at
// the handshake; ECDHE with AES-GCM or ChaCha20-Poly1305 is taken. The
// certificate is RSA here, so that static-RSA suites could be chosen at all.
TEST_F(Tls, Tls12OffersOnlyEcdheWithAeadSuites) {
  const std::string dir = make_temp_dir();
  const CommandResult made =
      run_command("openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost -keyout " +
                  dir + "/rsa.key -out " + dir + "/rsa.crt");
  ASSERT_EQ(made.status, 0) << made.output;
  auto server = SluiceProcess::start(yaml(dir + "/rsa.crt", dir + "/rsa.key"));
  ASSERT_NE(server, nullptr);
  const auto handshake = [&](const std::string& cipher) {
    return run_command(
        "timeout 20 openssl s_client -connect 127.0.0.1:" + std::to_string(server->port()) +
        " -tls1_2 -cipher '" + cipher + ":@SECLEVEL=0' </dev/null");
  };
  const std::vector<std::string> refused = {"AES128-SHA", "AES128-GCM-SHA256", "AES256-GCM-SHA384",
                                            "ECDHE-RSA-AES128-SHA", "ECDHE-RSA-AES256-SHA384"};
  for (const std::string& cipher : refused) {
    const CommandResult r = handshake(cipher);
    EXPECT_NE(r.status, 0) << cipher << ": " << r.output;
    EXPECT_NE(r.output.find("Cipher is (NONE)"), std::string::npos) << cipher << ": " << r.output;
  }
  EXPECT_TRUE(server->wait_for_metric(kHandshakeFailures, 5)) << server->metric(kHandshakeFailures);
  for (const std::string cipher : {"ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-AES256-GCM-SHA384",
                                   "ECDHE-RSA-CHACHA20-POLY1305"}) {
    const CommandResult r = handshake(cipher);
    EXPECT_EQ(r.status, 0) << cipher << ": " << r.output;
    EXPECT_NE(r.output.find("Cipher is " + cipher), std::string::npos)
        << cipher << ": " << r.output;
  }
  // A TLS 1.2 client with its default list gets the server's first choice.
  TlsClient c(server->port(), dir + "/rsa.crt", "localhost", false, /*tls12_only=*/true);
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c.protocol(), "TLSv1.2");
  EXPECT_EQ(c.cipher(), "ECDHE-RSA-AES128-GCM-SHA256");
  EXPECT_EQ(c.get("/api/x").status, 200);
  EXPECT_EQ(server->metric(kHandshakeFailures), 5);
  remove_dir(dir);
}

// Unfinished handshakes (a ClientHello's first bytes, then nothing) hold at
// most server.max_tls_handshakes TLS sessions: each new one past it closes
// the oldest unfinished one, counted apart from failures; a connection that
// has sent nothing holds no TLS session at all. A client that handshakes
// meanwhile is served.
TEST_F(Tls, PastMaxTlsHandshakesTheOldestUnfinishedOneIsClosedAndAClientIsServed) {
  auto server = SluiceProcess::start(
      yaml(certs_.server_cert(), certs_.server_key(), "", "{threads: 1, max_tls_handshakes: 4}"));
  ASSERT_NE(server, nullptr);
  std::vector<std::unique_ptr<HttpConnection>> silent;
  for (int i = 0; i < 3; ++i) silent.push_back(server->connect());
  // A TLS record of 512 bytes announced, 6 of them sent: a ClientHello begun.
  const std::string partial_hello("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11);
  std::vector<std::unique_ptr<HttpConnection>> half_open;
  for (int i = 0; i < 10; ++i) {
    half_open.push_back(server->connect());
    half_open.back()->send_raw(partial_hello);
    // Each is in its handshake (or has closed an older one) before the next.
    ASSERT_TRUE(server->wait_for_metric(kHandshakes, std::min(i + 1, 4))) << i;
    ASSERT_TRUE(server->wait_for_metric(kHandshakesDropped, std::max(0, i - 3))) << i;
  }
  TlsClient c(server->port(), certs_.ca());
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c.get("/api/x").status, 200);
  // The six past the bound and the one that made room for the client: the
  // seven oldest, closed by the server; the three newest still wait.
  EXPECT_EQ(server->metric(kHandshakesDropped), 7);
  EXPECT_TRUE(
      server->wait_for_log("TLS: server.max_tls_handshakes (4) handshakes in progress: "
                           "closed the oldest unfinished one"))
      << server->log();
  for (size_t i = 0; i < 7; ++i) EXPECT_TRUE(half_open[i]->closed_by_peer()) << i;
  for (size_t i = 7; i < 10; ++i) {
    EXPECT_FALSE(half_open[i]->closed_by_peer(std::chrono::milliseconds(100))) << i;
  }
  for (auto& s : silent) EXPECT_FALSE(s->closed_by_peer(std::chrono::milliseconds(100)));
  EXPECT_EQ(server->metric(kHandshakes), 3);
  EXPECT_EQ(server->metric(kHandshakeFailures), 0);
}

TEST_F(Tls, AReloadSwapsTheCertificateForTheNextHandshakeAndOpenConnectionsCarryOn) {
  auto server = SluiceProcess::start(yaml(certs_.server_cert(), certs_.server_key()));
  ASSERT_NE(server, nullptr);
  TlsClient before(server->port(), certs_.ca());
  ASSERT_TRUE(before.ok()) << before.error();
  EXPECT_EQ(before.get("/api/x").status, 200);
  EXPECT_EQ(before.certificate_cn(), "server");

  server->rewrite_config(yaml(certs_.server_b_cert(), certs_.server_b_key()));
  server->send_signal(SIGHUP);
  ASSERT_TRUE(server->wait_for_metric(kReloadSuccesses, 1)) << server->log();

  TlsClient after(server->port(), certs_.ca());
  ASSERT_TRUE(after.ok()) << after.error();
  EXPECT_EQ(after.certificate_cn(), "server-b");
  // The connection opened before the reload is still served (the route is
  // unchanged, so its count goes on: the second of 2).
  const HttpResponse again = before.get("/api/x");
  EXPECT_EQ(again.status, 200);
  EXPECT_EQ(again.header("X-RateLimit-Remaining"), "0");
  EXPECT_EQ(after.get("/api/x").status, 429);
}

TEST_F(Tls, AReloadWithAKeyOfAnotherPairIsRefusedAndTheOldCertificateStays) {
  auto server = SluiceProcess::start(yaml(certs_.server_cert(), certs_.server_key()));
  ASSERT_NE(server, nullptr);
  server->rewrite_config(yaml(certs_.server_cert(), certs_.client_key()));
  server->send_signal(SIGHUP);
  ASSERT_TRUE(server->wait_for_metric(kReloadFailures, 1)) << server->log();
  const std::string column =
      std::to_string(std::string("tls: {cert: " + certs_.server_cert() + ", key: ").size() + 1);
  EXPECT_TRUE(server->wait_for_log(server->config_path() + ":3:" + column +
                                   ": tls.key: the key file " + certs_.client_key() +
                                   " is not the key of the certificate"))
      << server->log();
  TlsClient c(server->port(), certs_.ca());
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c.certificate_cn(), "server");
  EXPECT_EQ(c.get("/api/x").status, 200);
}

TEST_F(Tls, AnExpiredCertificateOrAKeyOfAnotherPairIsRefusedAtStartup) {
  std::string log;
  EXPECT_EQ(SluiceProcess::run_and_capture(yaml(certs_.expired_cert(), certs_.expired_key()), &log),
            1);
  EXPECT_NE(
      log.find(":1:13: tls.cert: the certificate file " + certs_.expired_cert() + " expired on "),
      std::string::npos)
      << log;
  EXPECT_EQ(SluiceProcess::run_and_capture(yaml(certs_.server_cert(), certs_.client_key()), &log),
            1);
  EXPECT_NE(log.find("tls.key: the key file " + certs_.client_key() +
                     " is not the key of the certificate (their public keys differ)"),
            std::string::npos)
      << log;
  EXPECT_EQ(SluiceProcess::run_and_capture(yaml(certs_.server_key(), certs_.server_key()), &log),
            1);
  EXPECT_NE(log.find("tls.cert: the certificate file " + certs_.server_key() +
                     " holds no PEM certificate (-----BEGIN CERTIFICATE-----)"),
            std::string::npos)
      << log;
}

TEST_F(Tls, TheGatewayProxiesOverTlsAndTellsTheUpstreamSo) {
  TestUpstream upstream;
  ASSERT_NE(upstream.port(), 0);
  auto server = SluiceProcess::start("upstream: " + upstream.url() + "\n" +
                                     yaml(certs_.server_cert(), certs_.server_key()));
  ASSERT_NE(server, nullptr);
  TlsClient c(server->port(), certs_.ca());
  ASSERT_TRUE(c.ok()) << c.error();
  const HttpResponse r = c.get("/api/x");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, R"({"n":1})");
  EXPECT_EQ(c.get("/api/x").status, 200);
  EXPECT_EQ(c.get("/api/x").status, 429);
  // Two proxied on one upstream connection; the upstream learns the scheme.
  ASSERT_EQ(upstream.request_heads().size(), 2u);
  const std::string head = upstream.request_heads()[0];
  EXPECT_NE(head.find("\r\nX-Forwarded-Proto: https\r\n"), std::string::npos) << head;
  EXPECT_NE(head.find("\r\nX-Forwarded-For: 127.0.0.1\r\n"), std::string::npos) << head;
}

TEST_F(Tls, FailedHandshakesAreLoggedAtTheDenialLogRateWithACountOfTheRest) {
  auto server = SluiceProcess::start(yaml(certs_.server_cert(), certs_.server_key()));
  ASSERT_NE(server, nullptr);
  const uint16_t port = server->port();
  // Plain HTTP on the TLS port: the handshake fails on the first bytes.
  auto fail = [port] {
    HttpConnection c("127.0.0.1", port);
    c.send_raw("GET /api/x HTTP/1.1\r\nHost: x\r\n\r\n");
    EXPECT_TRUE(c.closed_by_peer());
  };
  expect_gated_log(*server, fail, 200, kHandshakeFailures,
                   "TLS handshake with 127.0.0.1 failed: ", "failed handshakes");
}

}  // namespace
}  // namespace sluice::test
