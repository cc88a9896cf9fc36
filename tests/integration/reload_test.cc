// Hot reload (SIGHUP, POST /admin/reload): a good file swaps in whole, a bad
// one is refused and the old config stays; unchanged limits keep their state.
#include <csignal>

#include "reload_configs.h"
#include "test_support.h"

namespace sluice::test {
namespace {

TEST(Reload, AdminReloadSwapsTheConfigAndKeepsUnchangedLimitsState) {
  auto server = SluiceProcess::start(kBefore);
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(count_allowed(*server, "GET", "/a", 3), 2);                    // /a exhausted
  EXPECT_EQ(count_allowed(*server, "GET", "/b", 1), 1);                    // /b: 2 of 3 left
  EXPECT_EQ(server->get("/c").header("X-RateLimit-Limit"), std::nullopt);  // no route yet

  server->rewrite_config(kAfter);
  const HttpResponse r = server->admin_post("/admin/reload");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, R"({"reloaded":true,"generation":2})");
  EXPECT_EQ(server->metric(kReloadSuccesses), 1);

  // /a did not change: still exhausted. /b changed: a fresh bucket of 5. /c is new.
  EXPECT_EQ(count_allowed(*server, "GET", "/a", 1), 0);
  EXPECT_EQ(count_allowed(*server, "GET", "/b", 7), 5);
  EXPECT_EQ(count_allowed(*server, "GET", "/c", 2), 1);
}

TEST(Reload, BadFileViaAdminIsRefusedWithItsErrorsAndTheOldConfigStays) {
  auto server = SluiceProcess::start(kBefore);
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(count_allowed(*server, "GET", "/a", 1), 1);

  server->rewrite_config(kBroken);
  const HttpResponse r = server->admin_post("/admin/reload");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find(R"("code":"INVALID_CONFIG")"), std::string::npos) << r.body;
  // Every error, each as file:line:col (lines 1-2 are listen and admin).
  EXPECT_NE(r.body.find(server->config_path() + ":7:"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find(server->config_path() + ":9:"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find(R"("generation":1)"), std::string::npos) << r.body;
  EXPECT_EQ(server->metric(kReloadFailures), 1);
  EXPECT_EQ(server->metric(kReloadSuccesses), 0);
  EXPECT_TRUE(server->wait_for_log("reload refused"));

  // The old limits still apply, with their state: /a has 1 of 2 left.
  EXPECT_EQ(count_allowed(*server, "GET", "/a", 3), 1);
  EXPECT_EQ(server->get("/b").header("X-RateLimit-Limit"), "3");
}

TEST(Reload, BadFileViaSighupIsRefusedAndTheOldConfigStays) {
  auto server = SluiceProcess::start(kBefore);
  ASSERT_NE(server, nullptr);
  server->rewrite_config(kBroken);
  server->send_signal(SIGHUP);
  ASSERT_TRUE(server->wait_for_log("reload refused"));
  EXPECT_EQ(server->metric(kReloadFailures), 1);
  EXPECT_NE(server->log().find(server->config_path() + ":9:"), std::string::npos);
  EXPECT_EQ(count_allowed(*server, "GET", "/a", 3), 2);
  EXPECT_EQ(server->get("/b").header("X-RateLimit-Limit"), "3");
}

TEST(Reload, GoodFileViaSighupSwapsTheConfig) {
  auto server = SluiceProcess::start(kBefore);
  ASSERT_NE(server, nullptr);
  server->rewrite_config(kAfter);
  server->send_signal(SIGHUP);
  ASSERT_TRUE(server->wait_for_log("generation 2"));
  EXPECT_EQ(server->metric(kReloadSuccesses), 1);
  EXPECT_EQ(server->get("/b").header("X-RateLimit-Limit"), "5");
  EXPECT_EQ(server->get("/c").header("X-RateLimit-Limit"), "1");
}

TEST(Reload, ListenChangesAreReportedAsNeedingARestart) {
  auto server = SluiceProcess::start(kBefore);
  ASSERT_NE(server, nullptr);
  server->write_config_raw("listen: 127.0.0.1:1\nadmin: 127.0.0.1:0\n" + kBefore);
  const HttpResponse r = server->admin_post("/admin/reload");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, R"({"reloaded":true,"generation":2})");  // the rest is in force
  // Only the listen line changed, and only it is reported.
  EXPECT_TRUE(server->wait_for_log(
      "reload: listen changed from 127.0.0.1:0 to 127.0.0.1:1; this takes effect only after a "
      "restart"))
      << server->log();
  EXPECT_EQ(server->log().find("admin changed"), std::string::npos) << server->log();
  // Still serving on the port it has.
  EXPECT_EQ(server->get("/a").status, 200);
}

TEST(Reset, AdminResetForgetsOnePolicyKey) {
  auto server = SluiceProcess::start(kBefore);
  ASSERT_NE(server, nullptr);
  const std::string body = R"({"policy":"login","key":"user:42"})";
  for (int i = 0; i < 3; ++i) EXPECT_EQ(server->post("/v1/check", body).status, 200);
  EXPECT_EQ(server->post("/v1/check", body).status, 429);
  EXPECT_EQ(server->post("/v1/check", R"({"policy":"login","key":"user:7"})").status, 200);

  const HttpResponse r = server->admin_post("/admin/reset", body);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, R"({"reset":true,"had_state":true})");
  EXPECT_EQ(server->post("/v1/check", body).status, 200);
  // Only that key: user:7 still has 2 left.
  const HttpResponse other = server->post("/v1/check", R"({"policy":"login","key":"user:7"})");
  EXPECT_NE(other.body.find(R"("remaining":1)"), std::string::npos) << other.body;
}

TEST(Reset, AdminResetForgetsOneRouteClient) {
  // 127.0.0.1 is a trusted proxy: X-Forwarded-For names another client.
  auto server = SluiceProcess::start(kBefore + "client_ip:\n  trusted_proxies: [127.0.0.1]\n");
  ASSERT_NE(server, nullptr);
  const Headers other = {{"X-Forwarded-For", "192.0.2.7"}};
  EXPECT_EQ(count_allowed(*server, "GET", "/a", 3), 2);         // 127.0.0.1: /a exhausted
  EXPECT_EQ(count_allowed(*server, "GET", "/a", 1, other), 1);  // 192.0.2.7: 1 of 2 left
  EXPECT_EQ(count_allowed(*server, "GET", "/b", 1), 1);         // 127.0.0.1: /b 2 of 3 left

  const HttpResponse r =
      server->admin_post("/admin/reset", R"({"route":"GET /a","client":"ip:127.0.0.1"})");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, R"({"reset":true,"had_state":true})");

  EXPECT_EQ(count_allowed(*server, "GET", "/a", 3), 2);         // forgotten: a fresh 2
  EXPECT_EQ(count_allowed(*server, "GET", "/a", 2, other), 1);  // the other client: kept
  EXPECT_EQ(count_allowed(*server, "GET", "/b", 3), 2);         // the other route: kept
}

// The client as an operator writes it: the address itself, or the value of
// the header a route is keyed by; and a reset that finds nothing says so.
TEST(Reset, AdminResetTakesTheClientAsWrittenAndFindingNothingIs404) {
  auto server = SluiceProcess::start(kBefore + R"(
  - match: GET /k
    key: header:x-api-key
    limits: [{capacity: 1, refill_rate: 1/h}]
)");
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(count_allowed(*server, "GET", "/a", 3), 2);
  const HttpResponse by_ip =
      server->admin_post("/admin/reset", R"({"route":"GET /a","client":"127.0.0.1"})");
  EXPECT_EQ(by_ip.status, 200) << by_ip.body;
  EXPECT_EQ(count_allowed(*server, "GET", "/a", 3), 2);  // a fresh 2

  const Headers key = {{"X-Api-Key", "k 1+x"}};
  EXPECT_EQ(count_allowed(*server, "GET", "/k", 2, key), 1);
  const HttpResponse by_header =
      server->admin_post("/admin/reset", R"({"route":"GET /k","client":"k 1+x"})");
  EXPECT_EQ(by_header.status, 200) << by_header.body;
  EXPECT_EQ(count_allowed(*server, "GET", "/k", 2, key), 1);

  // A client with no state: 404 naming what was looked for, nothing reset.
  const HttpResponse none =
      server->admin_post("/admin/reset", R"({"route":"GET /a","client":"192.0.2.99"})");
  EXPECT_EQ(none.status, 404);
  EXPECT_EQ(
      none.body,
      R"x({"error":{"code":"NO_STATE","message":"nothing to reset for route \"GET /a\" )x"
      R"x(client key \"ip:192.0.2.99\" (store keys looked for: route:GET /a|ip:192.0.2.99)"}})x");
  const HttpResponse policy_none =
      server->admin_post("/admin/reset", R"({"policy":"login","key":"nobody"})");
  EXPECT_EQ(policy_none.status, 404);
  EXPECT_NE(policy_none.body.find(R"("code":"NO_STATE")"), std::string::npos) << policy_none.body;
}

TEST(Reset, AdminResetErrors) {
  auto server = SluiceProcess::start(kBefore);
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->admin_post("/admin/reset", R"({"policy":"nope","key":"k"})").status, 404);
  EXPECT_EQ(server->admin_post("/admin/reset", R"({"route":"GET /zzz","client":"k"})").status, 404);
  EXPECT_EQ(server->admin_post("/admin/reset", R"({"policy":"login"})").status, 400);
  EXPECT_EQ(server->admin_post("/admin/reset", "{").status, 400);
  EXPECT_EQ(server->admin_get("/admin/reset").status, 405);
}

}  // namespace
}  // namespace sluice::test
