// Brute-force protection through the real sluice binary: count_status (only
// the statuses listed count; anything else is given back) and block (once the
// limit denies, the key is denied for the whole block), in front of the demo
// upstream's login (401 unless the password is "demo") or a TestUpstream that
// holds its answers. The block's exact length, refill and expiry are the
// store conformance table's, with an injected clock; here the windows are
// long enough that nothing refills while a test runs.
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gateway_support.h"
#include "test_support.h"

namespace sluice::test {
namespace {

using Headers = std::vector<std::pair<std::string, std::string>>;

// A gateway to `upstream_url` whose POST /api/login has `limit` (a limit block).
std::string login_yaml(const std::string& upstream_url, const std::string& limit,
                       const std::string& key = "ip") {
  return "upstream: " + upstream_url + R"(
server: {threads: 1}
headers: [legacy]
routes:
  - match: POST /api/login
    key: )" +
         key + "\n    limits: [" + limit + "]\n";
}

std::string lockout_yaml(const std::string& upstream_url) {
  return login_yaml(upstream_url, kLoginLockout, "header:x-user");
}

const std::string kWrong = R"({"user":"a","password":"guess"})";
const std::string kRight = R"({"user":"a","password":"demo"})";
const std::string kRoute = "POST /api/login";

HttpResponse login(HttpConnection& c, const std::string& user, const std::string& body) {
  return c.request("POST", "/api/login", {{"X-User", user}, {"Content-Type", "application/json"}},
                   body);
}

TEST(Lockout, FiveFailedLoginsThenTheKeyIsBlockedForTheWholeBlock) {
  DemoUpstream upstream(SLUICE_BINARY);
  ASSERT_NE(upstream.port(), 0);
  auto server = SluiceProcess::start(lockout_yaml(upstream.url()));
  ASSERT_NE(server, nullptr);
  auto c = server->connect();
  for (int i = 1; i <= 5; ++i) {
    const HttpResponse r = login(*c, "mallory", kWrong);
    ASSERT_EQ(r.status, 401) << i << ": " << r.body;
    EXPECT_EQ(r.header("X-RateLimit-Remaining"), std::to_string(5 - i)) << i;
  }
  // The sixth is denied, and the block (30 minutes) starts: even the right
  // password waits it out.
  const HttpResponse sixth = login(*c, "mallory", kWrong);
  EXPECT_EQ(sixth.status, 429) << sixth.body;
  EXPECT_EQ(sixth.body, rate_limited_body("POST /api/login"));
  EXPECT_EQ(sixth.header("Retry-After"), "1800");
  EXPECT_EQ(sixth.header("X-RateLimit-Remaining"), "0");
  const HttpResponse right = login(*c, "mallory", kRight);
  EXPECT_EQ(right.status, 429) << right.body;
  // What is left of the block: more than the window's 15 minutes could say.
  const int retry_after = std::stoi(right.header("Retry-After").value_or("0"));
  EXPECT_GT(retry_after, 900);
  EXPECT_LE(retry_after, 1800);
  EXPECT_EQ(right.header("X-RateLimit-Remaining"), "0");
  // Another user logs in as often as they like: each success is given back.
  for (int i = 1; i <= 10; ++i) {
    const HttpResponse r = login(*c, "alice", kRight);
    ASSERT_EQ(r.status, 200) << i << ": " << r.body;
    EXPECT_EQ(r.body, "{\"login\":\"ok\"}\n");
    EXPECT_EQ(r.header("X-RateLimit-Remaining"), "4") << i;
  }
  // ...and still has all five attempts for failures.
  for (int i = 1; i <= 5; ++i) EXPECT_EQ(login(*c, "alice", kWrong).status, 401) << i;
  EXPECT_EQ(login(*c, "alice", kWrong).status, 429);
  EXPECT_EQ(server->metric(R"(sluice_refunds_total{route="POST /api/login"})"), 10);
  EXPECT_EQ(server->metric(R"(sluice_requests_total{route="POST /api/login",result="denied"})"), 3);
}

// Charged before proxying: attempts in flight at once can never exceed the
// limit, whatever their answers turn out to be.
TEST(Lockout, ConcurrentWrongPasswordsReachTheUpstreamExactlyLimitTimes) {
  TestUpstream upstream;
  ASSERT_NE(upstream.port(), 0);
  upstream.answer_with(401);
  upstream.hold();
  auto server = SluiceProcess::start(lockout_yaml(upstream.url()));
  ASSERT_NE(server, nullptr);
  constexpr int kAttempts = 100;
  std::vector<std::future<int>> statuses;
  for (int i = 0; i < kAttempts; ++i) {
    statuses.push_back(std::async(std::launch::async, [&server] {
      auto c = server->connect();
      return login(*c, "mallory", kWrong).status;
    }));
  }
  // Every attempt but those held at the upstream is answered first.
  ASSERT_TRUE(server->wait_for_metric(
      R"(sluice_requests_total{route="POST /api/login",result="denied"})", kAttempts - 5));
  EXPECT_EQ(upstream.requests(), 5);
  upstream.release();
  int unauthorized = 0;
  int limited = 0;
  for (auto& s : statuses) {
    const int status = s.get();
    unauthorized += status == 401;
    limited += status == 429;
  }
  EXPECT_EQ(unauthorized, 5);
  EXPECT_EQ(limited, kAttempts - 5);
  EXPECT_EQ(upstream.requests(), 5);
  EXPECT_EQ(server->metric(R"(sluice_refunds_total{route="POST /api/login"})"), 0);
}

// A status not listed gives the charge back; one listed keeps it; an
// upstream that cannot be reached never saw the attempt.
TEST(Lockout, OnlyTheListedStatusesCount) {
  TestUpstream upstream;
  ASSERT_NE(upstream.port(), 0);
  auto server = SluiceProcess::start(login_yaml(
      upstream.url(), "{algorithm: sliding_window, limit: 2, window: 1h, count_status: [401]}"));
  ASSERT_NE(server, nullptr);
  auto c = server->connect();
  for (int status : {200, 302, 403, 500, 200}) {
    upstream.answer_with(status);
    const HttpResponse r = c->request("POST", "/api/login", {}, "x");
    EXPECT_EQ(r.status, status);
    EXPECT_EQ(r.header("X-RateLimit-Remaining"), "1") << status;
  }
  upstream.answer_with(401);
  EXPECT_EQ(c->request("POST", "/api/login", {}, "x").status, 401);
  EXPECT_EQ(c->request("POST", "/api/login", {}, "x").status, 401);
  const HttpResponse denied = c->request("POST", "/api/login", {}, "x");
  EXPECT_EQ(denied.status, 429);
  EXPECT_EQ(upstream.requests(), 7);
  EXPECT_EQ(server->metric(R"(sluice_refunds_total{route="POST /api/login"})"), 5);
}

TEST(Lockout, AnUnreachableUpstreamGivesTheChargeBack) {
  RefusingPort refusing;
  auto server = SluiceProcess::start(
      login_yaml("http://127.0.0.1:" + std::to_string(refusing.port()),
                 "{algorithm: fixed_window, limit: 1, window: 1h, count_status: [401]}"));
  ASSERT_NE(server, nullptr);
  auto c = server->connect();
  for (int i = 0; i < 3; ++i) {
    const HttpResponse r = c->request("POST", "/api/login", {}, "x");
    EXPECT_EQ(r.status, 502) << i;
    EXPECT_EQ(r.header("X-RateLimit-Remaining"), "0") << i;
  }
  EXPECT_EQ(server->metric(R"(sluice_refunds_total{route="POST /api/login"})"), 3);
}

// A reload that keeps the route keeps its lockouts (the limit, and so its
// state, is the same); one that changes the limit starts it afresh.
TEST(Lockout, AReloadThatKeepsTheRouteKeepsTheLockout) {
  DemoUpstream upstream(SLUICE_BINARY);
  ASSERT_NE(upstream.port(), 0);
  auto server = SluiceProcess::start(lockout_yaml(upstream.url()));
  ASSERT_NE(server, nullptr);
  auto c = server->connect();
  for (int i = 1; i <= 5; ++i) ASSERT_EQ(login(*c, "mallory", kWrong).status, 401) << i;
  ASSERT_EQ(login(*c, "mallory", kWrong).status, 429);
  // The same config plus another route.
  server->rewrite_config(
      lockout_yaml(upstream.url()) +
      "  - match: GET /api/other\n    limits: [{capacity: 1, refill_rate: 1/s}]\n");
  ASSERT_EQ(server->admin_post("/admin/reload").status, 200);
  EXPECT_EQ(login(*c, "mallory", kRight).status, 429);
  // A changed limit (a longer window) is a new one.
  server->rewrite_config(login_yaml(upstream.url(),
                                    "{algorithm: fixed_window, limit: 5, window: 20m, "
                                    "count_status: [401, 403], block: 30m}",
                                    "header:x-user"));
  ASSERT_EQ(server->admin_post("/admin/reload").status, 200);
  EXPECT_EQ(login(*c, "mallory", kRight).status, 200);
}

}  // namespace
}  // namespace sluice::test
