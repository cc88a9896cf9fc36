// Named upstreams (src/http/upstream_group.h, retry_rule.h, upstream_tls.h)
// through the real sluice binary, in front of TestUpstreams, ports that
// refuse connections, and another sluice serving TLS.
#include <string>
#include <thread>

#include "gateway_support.h"
#include "test_support.h"
#include "tls/test_certs.h"

namespace sluice::test {
namespace {

// A gateway whose upstreams are `upstreams` (the lines under `upstreams:`),
// the default `api`, one worker thread, and `routes`.
std::string upstreams_yaml(const std::string& upstreams, const std::string& routes = R"(
headers: [legacy]
routes:
  - match: "* /*"
    limits: [{capacity: 100, refill_rate: 1/h}]
)") {
  return "upstreams:\n" + upstreams + "upstream: api\nserver:\n  threads: 1\n" + routes;
}

std::string ejections(const std::string& server_url) {
  return R"(sluice_upstream_ejections_total{upstream="api",server=")" + server_url + "\"}";
}
std::string returns(const std::string& server_url) {
  return R"(sluice_upstream_returns_total{upstream="api",server=")" + server_url + "\"}";
}

size_t count_of(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST(Upstreams, RoundRobinAlternatesExactlyOverTwoServers) {
  TestUpstream a, b;
  ASSERT_NE(a.port(), 0);
  ASSERT_NE(b.port(), 0);
  auto server = SluiceProcess::start(
      upstreams_yaml("  api:\n    servers: [" + a.url() + ", " + b.url() + "]\n"));
  ASSERT_NE(server, nullptr);
  auto c = server->connect();
  for (int i = 1; i <= 6; ++i) {
    const HttpResponse r = c->request("GET", "/x");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(a.requests(), (i + 1) / 2) << "after request " << i;
    EXPECT_EQ(b.requests(), i / 2) << "after request " << i;
  }
}

TEST(Upstreams, LeastRequestSendsToTheServerWithFewerInFlight) {
  TestUpstream a, b;
  ASSERT_NE(a.port(), 0);
  ASSERT_NE(b.port(), 0);
  auto server = SluiceProcess::start(upstreams_yaml("  api:\n    servers: [" + a.url() + ", " +
                                                    b.url() + "]\n    balance: least_request\n"));
  ASSERT_NE(server, nullptr);
  a.hold();
  // 0,0 in flight: the first server (ties go by order), where it stays.
  HttpResponse held;
  std::thread first([&] { held = server->connect()->request("GET", "/held"); });
  ASSERT_TRUE(wait_until([&] { return a.requests() == 1; }));
  auto c = server->connect();
  for (int i = 0; i < 3; ++i) {
    // 1,0 in flight: each goes to the second server.
    const HttpResponse r = c->request("GET", "/x");
    ASSERT_EQ(r.status, 200) << r.body;
  }
  EXPECT_EQ(b.requests(), 3);
  EXPECT_EQ(a.requests(), 1);
  a.release();
  first.join();
  EXPECT_EQ(held.status, 200);
  // 0,0 again: the first server.
  EXPECT_EQ(c->request("GET", "/x").status, 200);
  EXPECT_EQ(a.requests(), 2);
}

TEST(Upstreams, ADeadServerIsEjectedAfterFailAfterAndReturnsAfterRetryAfter) {
  TestUpstream alive;
  RefusingPort dead;
  ASSERT_NE(alive.port(), 0);
  ASSERT_NE(dead.port(), 0);
  auto server = SluiceProcess::start(
      upstreams_yaml("  api:\n    servers: [" + alive.url() + ", " + dead.url() +
                     "]\n    health: {fail_after: 2, retry_after: 1s}\n"));
  ASSERT_NE(server, nullptr);
  auto c = server->connect();
  // In turn: alive, dead (502), alive, dead (502: 2 in a row, ejected).
  EXPECT_EQ(c->request("GET", "/x").status, 200);
  EXPECT_EQ(c->request("GET", "/x").status, 502);
  EXPECT_EQ(c->request("GET", "/x").status, 200);
  EXPECT_EQ(server->metric(ejections(dead.url())), 0);
  EXPECT_EQ(c->request("GET", "/x").status, 502);
  EXPECT_EQ(server->metric(ejections(dead.url())), 1);
  // Ejected: every request goes to the live one while retry_after runs.
  EXPECT_EQ(c->request("GET", "/x").status, 200);
  EXPECT_EQ(c->request("GET", "/x").status, 200);
  EXPECT_EQ(alive.requests(), 4);
  EXPECT_EQ(server->metric(returns(dead.url())), 0);
  // After retry_after the dead server is tried again (and fails: 502).
  int failed_after_return = 0;
  ASSERT_TRUE(wait_until([&] {
    if (c->request("GET", "/x").status == 502) ++failed_after_return;
    return server->metric(returns(dead.url())) == 1;
  }));
  EXPECT_EQ(failed_after_return, 1);  // the request that found it back went to it
  EXPECT_EQ(server->metric(ejections(dead.url())), 1);
  EXPECT_EQ(server->metric(returns(dead.url())), 1);
  EXPECT_EQ(server->metric(R"(sluice_upstream_failures_total{route="* /*",reason="connect"})"),
            2 + failed_after_return);
  const std::string log = server->log();
  EXPECT_EQ(count_of(log, "ejected for 1000 ms after 2 failures in a row"), 1u) << log;
  EXPECT_EQ(count_of(log, "gets requests again"), 1u) << log;
}

TEST(Upstreams, AllServersEjectedAreTriedAnyway) {
  TestUpstream up;
  ASSERT_NE(up.port(), 0);
  up.answer_with(503);
  auto server = SluiceProcess::start(upstreams_yaml(
      "  api:\n    servers: [" + up.url() + "]\n    health: {fail_after: 1, retry_after: 1h}\n"));
  ASSERT_NE(server, nullptr);
  auto c = server->connect();
  EXPECT_EQ(c->request("GET", "/x").status, 503);
  EXPECT_EQ(server->metric(ejections(up.url())), 1);
  up.answer_with(200);
  // Its only server is ejected for an hour: it is asked all the same.
  EXPECT_EQ(c->request("GET", "/x").status, 200);
  EXPECT_EQ(up.requests(), 2);
}

TEST(Upstreams, AConnectFailureIsRetriedOnTheOtherServerAndChargedOnce) {
  RefusingPort dead;
  TestUpstream alive;
  ASSERT_NE(dead.port(), 0);
  ASSERT_NE(alive.port(), 0);
  auto server = SluiceProcess::start(upstreams_yaml("  api:\n    servers: [" + dead.url() + ", " +
                                                    alive.url() + "]\n    retries: 1\n"));
  ASSERT_NE(server, nullptr);
  auto c = server->connect();
  // Each request meets the dead server first or second; either way it gets 200.
  for (int i = 0; i < 4; ++i) {
    const HttpResponse r = c->request(i % 2 == 0 ? "GET" : "POST", "/x");
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.header("X-RateLimit-Remaining"), std::to_string(99 - i));
  }
  EXPECT_EQ(alive.requests(), 4);
  EXPECT_EQ(server->metric(R"(sluice_upstream_failures_total{route="* /*",reason="connect"})"), 0);
}

TEST(Upstreams, AResetBeforeAnyResponseIsRetriedForGetButNotForASentPost) {
  TestUpstream resetting(TestUpstream::Mode::kResetUnanswered);
  TestUpstream alive;
  ASSERT_NE(resetting.port(), 0);
  ASSERT_NE(alive.port(), 0);
  auto server = SluiceProcess::start(upstreams_yaml("  api:\n    servers: [" + resetting.url() +
                                                    ", " + alive.url() + "]\n    retries: 1\n"));
  ASSERT_NE(server, nullptr);
  // GET: the first server reads it and resets; the other answers.
  const HttpResponse get = server->connect()->request("GET", "/x");
  EXPECT_EQ(get.status, 200) << get.body;
  EXPECT_EQ(get.header("X-RateLimit-Remaining"), "99");  // charged once
  EXPECT_EQ(resetting.requests(), 1);
  EXPECT_EQ(alive.requests(), 1);
  // POST: the first server in turn again; it may have acted on it: 502, no retry.
  const HttpResponse post = server->connect()->request("POST", "/x", {}, "a=1");
  EXPECT_EQ(post.status, 502) << post.body;
  EXPECT_EQ(resetting.requests(), 2);
  EXPECT_EQ(alive.requests(), 1);
  EXPECT_EQ(server->metric(R"(sluice_upstream_failures_total{route="* /*",reason="reset"})"), 1);
}

TEST(Upstreams, RoutesGoToTheirOwnUpstreams) {
  TestUpstream api, auth;
  ASSERT_NE(api.port(), 0);
  ASSERT_NE(auth.port(), 0);
  auto server = SluiceProcess::start(upstreams_yaml(
      "  api:\n    servers: [" + api.url() + "]\n  auth:\n    servers: [" + auth.url() + "]\n",
      R"(
routes:
  - match: POST /login
    limits: [{capacity: 100, refill_rate: 1/h}]
    upstream: auth
  - match: "* /*"
    limits: [{capacity: 100, refill_rate: 1/h}]
)"));
  ASSERT_NE(server, nullptr);
  auto c = server->connect();
  EXPECT_EQ(c->request("POST", "/login", {}, "u=a").status, 200);
  EXPECT_EQ(c->request("GET", "/login").status, 200);
  EXPECT_EQ(c->request("POST", "/login", {}, "u=b").status, 200);
  EXPECT_EQ(c->request("GET", "/other").status, 200);
  EXPECT_EQ(auth.requests(), 2);
  EXPECT_EQ(api.requests(), 2);
  const std::vector<std::string> heads = auth.request_heads();
  ASSERT_EQ(heads.size(), 2u);
  EXPECT_EQ(heads[0].rfind("POST /login HTTP/1.1\r\n", 0), 0u) << heads[0];
}

// ---------------------------------------------------------------- TLS

class UpstreamsTls : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(certs_.ok()) << certs_.error();
    // The https upstream: another sluice, decision-only behind TLS, whose
    // every path answers {"allowed":true}.
    backend_ = SluiceProcess::start("tls: {cert: " + certs_.server_cert() +
                                    ", key: " + certs_.server_key() +
                                    "}\nserver: {threads: 1}\nroutes:\n  - match: \"* /*\"\n    "
                                    "limits: [{capacity: 100, refill_rate: 1/h}]\n");
    ASSERT_NE(backend_, nullptr);
  }
  std::string https_url() const { return "https://127.0.0.1:" + std::to_string(backend_->port()); }
  std::unique_ptr<SluiceProcess> gateway(const std::string& tls_block) {
    return SluiceProcess::start(
        upstreams_yaml("  api:\n    servers: [" + https_url() + "]\n    tls: " + tls_block + "\n"));
  }

  testing::TestCerts certs_;
  std::unique_ptr<SluiceProcess> backend_;
};

const std::string kTlsFailures = R"(sluice_upstream_failures_total{route="* /*",reason="tls"})";

TEST_F(UpstreamsTls, AnHttpsUpstreamVerifiedWithTheTestCaAnswers) {
  auto server = gateway("{ca_file: " + certs_.ca() + "}");
  ASSERT_NE(server, nullptr);
  auto c = server->connect();
  for (int i = 0; i < 2; ++i) {  // the second on the pooled TLS connection
    const HttpResponse r = c->request("GET", "/x");
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.body, R"({"allowed":true})");
  }
  EXPECT_EQ(server->metric(kTlsFailures), 0);
  // The certificate names localhost too: server_name verifies (and sends) it.
  auto named = gateway("{ca_file: " + certs_.ca() + ", server_name: localhost}");
  ASSERT_NE(named, nullptr);
  EXPECT_EQ(named->connect()->request("GET", "/x").status, 200);
}

TEST_F(UpstreamsTls, AWrongCaOrNameGives502CountedAsTls) {
  auto server = gateway("{ca_file: " + certs_.other_ca() + "}");
  ASSERT_NE(server, nullptr);
  const HttpResponse r = server->connect()->request("GET", "/x");
  EXPECT_EQ(r.status, 502);
  EXPECT_NE(r.body.find(R"("code":"UPSTREAM_UNAVAILABLE")"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("the TLS handshake with the upstream failed"), std::string::npos) << r.body;
  EXPECT_EQ(server->metric(kTlsFailures), 1);
  auto misnamed = gateway("{ca_file: " + certs_.ca() + ", server_name: wrong.example}");
  ASSERT_NE(misnamed, nullptr);
  EXPECT_EQ(misnamed->connect()->request("GET", "/x").status, 502);
  EXPECT_EQ(misnamed->metric(kTlsFailures), 1);
}

// `openssl s_server -Verify 1` refuses a client without a certificate
// signed by the test CA: the gateway presents its cert_file and key_file.
TEST_F(UpstreamsTls, TheClientCertificateIsPresentedToAServerThatAsksForOne) {
  const uint16_t port = pick_free_port();
  const std::string log = certs_.dir() + "/s_server.log";
  const pid_t pid =
      spawn_program({"/usr/bin/openssl", "s_server", "-accept", "127.0.0.1:" + std::to_string(port),
                     "-cert", certs_.server_cert(), "-key", certs_.server_key(), "-CAfile",
                     certs_.ca(), "-Verify", "1", "-www", "-quiet"},
                    log);
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(wait_listening(port, std::chrono::seconds(10)));
  auto server = SluiceProcess::start(upstreams_yaml(
      "  api:\n    servers: [https://127.0.0.1:" + std::to_string(port) +
      "]\n    tls: {ca_file: " + certs_.ca() + ", cert_file: " + certs_.client_cert() +
      ", key_file: " + certs_.client_key() + "}\n"));
  ASSERT_NE(server, nullptr);
  const HttpResponse r = server->connect()->request("GET", "/");
  stop_child(pid);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(server->metric(kTlsFailures), 0);
}

}  // namespace
}  // namespace sluice::test
