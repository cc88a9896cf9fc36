// How the gateway reads each spelling of the login path that a framework
// behind it would route to the login handler (Express, Spring/Tomcat, nginx,
// Go's ServeMux): charged to the login route, or refused with 400, and what
// the upstream receives (paths.forward: normalized by default).
#include "gateway_support.h"
#include "test_support.h"

namespace sluice::test {
namespace {

// The login route is told apart by its limit: 100 against the default's 1000.
std::string path_yaml(const std::string& upstream_url, const std::string& paths) {
  return "upstream: " + upstream_url + "\nserver: {threads: 1}\nheaders: [legacy]\n" + paths +
         R"(default:
  limits: [{capacity: 1000, refill_rate: 1/h}]
routes:
  - match: POST /api/auth/login
    limits: [{capacity: 100, refill_rate: 1/h}]
)";
}

struct Spelling {
  std::string target;
  std::vector<std::pair<std::string, std::string>> headers;
  int status;            // 200 (proxied) or 400 (refused)
  std::string upstream;  // the request target the upstream got ("" when refused)
};

// Sends each spelling on a fresh connection; every proxied one must be
// charged to the login route, one unit each, in order.
void expect_spellings(const SluiceProcess& server, const TestUpstream& upstream,
                      const std::vector<Spelling>& spellings) {
  int64_t remaining = 100;
  size_t proxied = upstream.request_heads().size();
  for (const Spelling& s : spellings) {
    SCOPED_TRACE(s.target);
    auto c = server.connect();
    const HttpResponse r = c->request("POST", s.target, s.headers, "user=a&password=b");
    ASSERT_EQ(r.status, s.status) << r.body;
    if (s.status != 200) {
      EXPECT_EQ(upstream.request_heads().size(), proxied) << "a refused path reached the upstream";
      continue;
    }
    EXPECT_EQ(r.header("X-RateLimit-Limit"), "100");
    EXPECT_EQ(r.header("X-RateLimit-Remaining"), std::to_string(--remaining));
    const std::vector<std::string> heads = upstream.request_heads();
    ASSERT_EQ(heads.size(), ++proxied);
    const std::string& head = heads.back();
    EXPECT_EQ(head.substr(0, head.find("\r\n")), "POST " + s.upstream + " HTTP/1.1");
  }
}

TEST(PathReadings, EverySpellingOfTheLoginIsChargedToItOrRefused) {
  TestUpstream upstream;
  ASSERT_NE(upstream.port(), 0);
  auto server = SluiceProcess::start(path_yaml(upstream.url(), ""));
  ASSERT_NE(server, nullptr);
  const std::string login = "/api/auth/login";
  expect_spellings(
      *server, upstream,
      {
          {login, {}, 200, login},
          {login + ";jsessionid=0F3A", {}, 200, login},  // Tomcat strips path parameters
          {"/api;v=2/auth/login", {}, 200, login},
          {"/api/auth/x/..;/login", {}, 200, login},  // Tomcat: "..;" is ".."
          {login + "/", {}, 200, login},              // trailing slash (Express, Go)
          {"//api/./auth//login", {}, 200, login},
          {"/api/x/../auth/login", {}, 200, login},
          {"/api/auth/%2e%2e/auth/login", {}, 200, login},
          {"/api/auth/%6Cogin", {}, 200, login},  // an unreserved escape
          {login + "?next=/a%2Fb", {}, 200, login + "?next=/a%2Fb"},
          {"http://api.example.test/api/auth/login", {}, 200, login},  // absolute form
          {login, {{"Host", "api.example.test:8080"}}, 200, login},
          {login, {{"Host", "api.example.test."}}, 200, login},
          // Refused: read as "/api/auth/login" by some servers, not by others.
          {"/api/auth%2Flogin", {}, 400, ""},
          {"/api/auth%2flogin", {}, 400, ""},
          {"/api/auth%5Clogin", {}, 400, ""},
          {"/api/auth%5clogin", {}, 400, ""},
          {"/api/auth%C0%AFlogin", {}, 400, ""},     // overlong UTF-8 for '/'
          {"/api/auth%E0%80%AFlogin", {}, 400, ""},  // overlong UTF-8 for '/'
          {"/api/auth/login%00", {}, 400, ""},       // NUL
          {"/api/auth/login;a=%2F", {}, 400, ""},    // even inside parameters
      });
}

TEST(PathReadings, ABackslashIsRefusedOrReadAsASlash) {
  TestUpstream upstream;
  ASSERT_NE(upstream.port(), 0);
  {
    auto server = SluiceProcess::start(path_yaml(upstream.url(), ""));
    ASSERT_NE(server, nullptr);
    expect_spellings(*server, upstream, {{"/api\\auth\\login", {}, 400, ""}});
  }
  auto server = SluiceProcess::start(
      path_yaml(upstream.url(), "paths: {backslash: as_slash, escaped_slashes: decode}\n"));
  ASSERT_NE(server, nullptr);
  expect_spellings(*server, upstream,
                   {
                       {"/api\\auth\\login", {}, 200, "/api/auth/login"},
                       {"/api%5Cauth%2Flogin", {}, 200, "/api/auth/login"},
                   });
}

TEST(PathReadings, KeptReadingsAndTheOriginalTargetForwarded) {
  TestUpstream upstream;
  ASSERT_NE(upstream.port(), 0);
  auto server = SluiceProcess::start(path_yaml(
      upstream.url(), "paths: {matrix_params: keep, escaped_slashes: keep, forward: original}\n"));
  ASSERT_NE(server, nullptr);
  auto c = server->connect();
  // Kept: neither is the login route; the upstream gets the target as sent.
  for (const std::string target : {"/api/auth/login;x=1", "/api/auth%2Flogin"}) {
    const HttpResponse r = c->request("POST", target, {}, "a=b");
    ASSERT_EQ(r.status, 200) << target;
    EXPECT_EQ(r.header("X-RateLimit-Limit"), "1000") << target;
    const std::string head = upstream.request_heads().back();
    EXPECT_EQ(head.substr(0, head.find("\r\n")), "POST " + target + " HTTP/1.1");
  }
  // forward: original also sends unnormalised spellings on as they came.
  const HttpResponse r = c->request("POST", "/api/x/../auth/login/", {}, "a=b");
  EXPECT_EQ(r.header("X-RateLimit-Limit"), "100");
  const std::string head = upstream.request_heads().back();
  EXPECT_EQ(head.substr(0, head.find("\r\n")), "POST /api/x/../auth/login/ HTTP/1.1");
}

}  // namespace
}  // namespace sluice::test
