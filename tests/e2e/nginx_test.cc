// End to end: Debian's real nginx in front, running examples/nginx/sluice-auth.conf
// (ports replaced by free ones), asking the real `sluice serve` through
// auth_request, in front of the demo upstream (or a counting TestUpstream).
// nginx runs as the current user with every file in a temporary directory,
// and everything is stopped by PID.
#include <pwd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "nginx_support.h"

#ifndef SLUICE_SOURCE_DIR
#error "SLUICE_SOURCE_DIR must name the source tree (for examples/nginx)"
#endif

namespace sluice::test {
namespace {

using Headers = std::vector<std::pair<std::string, std::string>>;

const std::string kRateLimitedBody =
    R"({"error":{"code":"RATE_LIMITED","message":"Too many requests. Please retry after the Retry-After period."}})";

// What examples/nginx/sluice.yaml sets for nginx, with limits that do not
// refill during a test (1 per hour) so that counts are exact.
const std::string kSluiceYaml = R"(
auth_deny_status: 403
client_ip:
  header: x-real-ip
  trusted_proxies: [127.0.0.1/32]
headers: [legacy, draft]
routes:
  - match: GET /api/hello
    limits: [{capacity: 5, refill_rate: 1/h}]
)";

// nginx with examples/nginx/sluice-auth.conf, its ports replaced.
Nginx auth_nginx(uint16_t sluice_port, uint16_t app_port) {
  const std::string site =
      read_text(std::string(SLUICE_SOURCE_DIR) + "/examples/nginx/sluice-auth.conf");
  if (site.empty()) ADD_FAILURE() << "cannot read examples/nginx/sluice-auth.conf";
  return Nginx([&](uint16_t port) {
    if (site.empty()) return std::string();
    std::string conf = site;
    // The example's ports: nginx 8000, Sluice 8080, the app 3000.
    EXPECT_EQ(replace_all(conf, "127.0.0.1:8000;", "127.0.0.1:" + std::to_string(port) + ";"), 1);
    EXPECT_GE(
        replace_all(conf, "127.0.0.1:8080;", "127.0.0.1:" + std::to_string(sluice_port) + ";"), 1);
    EXPECT_GE(replace_all(conf, "127.0.0.1:3000;", "127.0.0.1:" + std::to_string(app_port) + ";"),
              1);
    return conf;
  });
}

std::string demo_body(const std::string& path) {
  return R"({"upstream":"demo","method":"GET","path":")" + path +
         R"(","x_forwarded_for":"127.0.0.1"})" + "\n";
}

TEST(Nginx, AllowedRequestsPassWithSluicesHeadersThenDenialsAre429WithRetryAfter) {
  DemoUpstream app(SLUICE_BINARY);
  ASSERT_NE(app.port(), 0);
  auto sluice = SluiceProcess::start(kSluiceYaml);
  ASSERT_NE(sluice, nullptr);
  Nginx nginx = auth_nginx(sluice->port(), app.port());
  ASSERT_NE(nginx.port(), 0);

  HttpConnection c("127.0.0.1", nginx.port());
  for (int i = 0; i < 5; ++i) {
    const HttpResponse r = c.request("GET", "/api/hello");
    ASSERT_EQ(r.status, 200) << r.body << "\n" << nginx.log();
    EXPECT_EQ(r.body, demo_body("/api/hello"));
    EXPECT_EQ(r.header("X-RateLimit-Limit"), "5");
    EXPECT_EQ(r.header("X-RateLimit-Remaining"), std::to_string(4 - i));
    EXPECT_TRUE(r.has_header("X-RateLimit-Reset"));
    EXPECT_EQ(r.header("RateLimit"), R"("GET /api/hello";r=)" + std::to_string(4 - i) + ";t=3600");
    EXPECT_TRUE(r.has_header("RateLimit-Policy"));
    EXPECT_FALSE(r.has_header("Retry-After"));
  }
  std::string reset;
  for (int i = 0; i < 3; ++i) {
    const HttpResponse r = c.request("GET", "/api/hello");
    EXPECT_EQ(r.status, 429) << nginx.log();
    EXPECT_EQ(r.body, kRateLimitedBody);
    EXPECT_EQ(r.header("Content-Type"), "application/json");
    EXPECT_EQ(r.header("Retry-After"), "3600");
    EXPECT_EQ(r.header("X-RateLimit-Limit"), "5");
    EXPECT_EQ(r.header("X-RateLimit-Remaining"), "0");
    EXPECT_EQ(r.header("RateLimit"), R"("GET /api/hello";r=0;t=3600)");
    ASSERT_TRUE(r.has_header("X-RateLimit-Reset"));
    if (i > 0) {
      EXPECT_EQ(r.header("X-RateLimit-Reset"), reset);  // denials consume nothing
    }
    reset = *r.header("X-RateLimit-Reset");
  }
  EXPECT_EQ(sluice->metric(R"(sluice_requests_total{route="GET /api/hello",result="allowed"})"), 5);
  EXPECT_EQ(sluice->metric(R"(sluice_requests_total{route="GET /api/hello",result="denied"})"), 3);
}

TEST(Nginx, DeniedRequestsNeverReachTheApp) {
  TestUpstream app;
  ASSERT_NE(app.port(), 0);
  auto sluice = SluiceProcess::start(kSluiceYaml);
  ASSERT_NE(sluice, nullptr);
  Nginx nginx = auth_nginx(sluice->port(), app.port());
  ASSERT_NE(nginx.port(), 0);
  HttpConnection c("127.0.0.1", nginx.port());
  int allowed = 0, denied = 0;
  for (int i = 0; i < 12; ++i) {
    const int status = c.request("GET", "/api/hello").status;
    allowed += status == 200;
    denied += status == 429;
  }
  EXPECT_EQ(allowed, 5);
  EXPECT_EQ(denied, 7);
  EXPECT_EQ(app.requests(), 5);
  // Unlimited paths (no route, no default) pass without rate headers.
  const HttpResponse free = c.request("GET", "/not-limited");
  EXPECT_EQ(free.status, 200);
  EXPECT_FALSE(free.has_header("X-RateLimit-Limit"));
  EXPECT_EQ(app.requests(), 6);
}

TEST(Nginx, TheClientAddressNginxSawIsTheKeyAndPathSpellingsShareALimit) {
  DemoUpstream app(SLUICE_BINARY);
  ASSERT_NE(app.port(), 0);
  auto sluice = SluiceProcess::start(kSluiceYaml);
  ASSERT_NE(sluice, nullptr);
  Nginx nginx = auth_nginx(sluice->port(), app.port());
  ASSERT_NE(nginx.port(), 0);
  HttpConnection c("127.0.0.1", nginx.port());
  // Five spellings of one resource spend one bucket (X-Original-URI is raw).
  for (const char* target :
       {"/api/hello", "/api/hello/", "/api//hello", "/api/hello?x=1", "/api/%68ello"}) {
    EXPECT_EQ(c.request("GET", target).status, 200) << target;
  }
  EXPECT_EQ(c.request("GET", "/api/./hello").status, 429);
  // The client is the address nginx saw ($remote_addr in X-Real-IP, the one
  // header Sluice reads): what a client writes in its own forwarding headers,
  // which nginx passes on, cannot give it another key.
  const std::vector<Headers> spoofs = {{{"X-Forwarded-For", "9.9.9.9"}},
                                       {{"X-Forwarded-For", "203.0.113.9, 10.0.0.1"}},
                                       {{"X-Real-IP", "203.0.113.9"}},
                                       {{"Forwarded", "for=203.0.113.9"}}};
  for (const Headers& spoof : spoofs) {
    const HttpResponse r = c.request("GET", "/api/hello", spoof);
    EXPECT_EQ(r.status, 429) << spoof[0].first << ": " << spoof[0].second;
    EXPECT_EQ(r.header("X-RateLimit-Remaining"), "0");
  }
  EXPECT_EQ(sluice->metric(R"(sluice_requests_total{route="GET /api/hello",result="denied"})"), 5);
}

// A client on the deny list stays there whatever it forwards: Sluice's 403,
// which the example turns into the 429 body, and nothing reaches the app.
TEST(Nginx, ADeniedClientStaysDeniedWhateverForwardingHeadersItSends) {
  TestUpstream app;
  ASSERT_NE(app.port(), 0);
  auto sluice = SluiceProcess::start(kSluiceYaml + "access: {deny: [127.0.0.1/32]}\n");
  ASSERT_NE(sluice, nullptr);
  Nginx nginx = auth_nginx(sluice->port(), app.port());
  ASSERT_NE(nginx.port(), 0);
  HttpConnection c("127.0.0.1", nginx.port());
  const std::vector<Headers> attempts = {{},
                                         {{"X-Forwarded-For", "9.9.9.9"}},
                                         {{"X-Real-IP", "9.9.9.9"}},
                                         {{"Forwarded", "for=9.9.9.9"}}};
  for (const Headers& headers : attempts) {
    const HttpResponse r = c.request("GET", "/api/hello", headers);
    EXPECT_EQ(r.status, 429) << nginx.log();
    EXPECT_EQ(r.body, kRateLimitedBody);
  }
  EXPECT_EQ(app.requests(), 0);
  EXPECT_EQ(sluice->metric(R"(sluice_http_rejected_total{reason="access_denied"})"), 4);
}

TEST(Nginx, TheExampleSluiceConfigIsValid) {
  const std::string config = std::string(SLUICE_SOURCE_DIR) + "/examples/nginx/sluice.yaml";
  const std::string log = make_temp_dir() + "/validate.log";
  const pid_t pid = spawn_program({SLUICE_BINARY, "validate", "--config", config}, log);
  ASSERT_GT(pid, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_text(log);
  const std::string text = read_text(log);
  EXPECT_NE(text.find("decision API only"), std::string::npos) << text;
  ::unlink(log.c_str());
  ::rmdir(log.substr(0, log.rfind('/')).c_str());
}

}  // namespace
}  // namespace sluice::test
