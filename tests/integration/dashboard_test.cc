// The dashboard (docs/DESIGN.md §6): served on the admin port only, from files
// embedded at build time, with its Content-Type, no caching and a CSP that
// allows the admin origin only; /admin/stats carries what the page shows
// besides the counts (version, store, reloads). tests/dashboard runs the page
// in a real browser.
#include <csignal>

#include "test_support.h"

namespace sluice::test {
namespace {

const std::string kCsp =
    "default-src 'self'; base-uri 'self'; form-action 'self'; frame-ancestors 'self'";

const std::string kYaml = R"(
policies:
  login: {capacity: 5, refill_rate: 1/h}
)";

class Dashboard : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = SluiceProcess::start(kYaml);
    ASSERT_NE(server_, nullptr);
  }
  std::unique_ptr<SluiceProcess> server_;
};

TEST_F(Dashboard, PageIsServedWithItsTypeNoStoreAndASelfOnlyCsp) {
  for (const std::string target : {"/dashboard", "/dashboard/", "/dashboard/index.html"}) {
    const HttpResponse r = server_->admin_get(target);
    EXPECT_EQ(r.status, 200) << target;
    EXPECT_EQ(r.header("Content-Type"), "text/html; charset=utf-8") << target;
    EXPECT_EQ(r.header("Cache-Control"), "no-store") << target;
    EXPECT_EQ(r.header("Content-Security-Policy"), kCsp) << target;
    EXPECT_EQ(r.header("X-Content-Type-Options"), "nosniff") << target;
    EXPECT_NE(r.body.find(R"(<script type="module" src="/dashboard/dashboard.js"></script>)"),
              std::string::npos)
        << target;
  }
}

TEST_F(Dashboard, ScriptStyleAndIconHaveTheirContentTypes) {
  const HttpResponse js = server_->admin_get("/dashboard/dashboard.js");
  EXPECT_EQ(js.status, 200);
  EXPECT_EQ(js.header("Content-Type"), "text/javascript; charset=utf-8");
  EXPECT_EQ(js.header("Content-Security-Policy"), kCsp);
  EXPECT_EQ(js.header("Cache-Control"), "no-store");
  EXPECT_NE(js.body.find("fetch('/admin/stats'"), std::string::npos);
  const HttpResponse css = server_->admin_get("/dashboard/dashboard.css");
  EXPECT_EQ(css.status, 200);
  EXPECT_EQ(css.header("Content-Type"), "text/css; charset=utf-8");
  const HttpResponse icon = server_->admin_get("/dashboard/favicon.svg");
  EXPECT_EQ(icon.status, 200);
  EXPECT_EQ(icon.header("Content-Type"), "image/svg+xml");
}

TEST_F(Dashboard, UnknownFilesAndOtherMethodsAreRefused) {
  EXPECT_EQ(server_->admin_get("/dashboard/nope.js").status, 404);
  EXPECT_EQ(server_->admin_get("/dashboard/../admin/stats").status, 404);
  EXPECT_EQ(server_->admin_get("/dashboardx").status, 404);
  EXPECT_EQ(server_->admin_post("/dashboard").status, 405);
}

TEST_F(Dashboard, IsNotServedOnThePublicPort) {
  // No route matches and there is no upstream: the public port answers as a
  // decision probe, never with the page.
  const HttpResponse r = server_->get("/dashboard");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("Content-Type"), "application/json");
  EXPECT_EQ(r.body, R"({"allowed":true})");
  EXPECT_FALSE(r.has_header("Content-Security-Policy"));
  EXPECT_EQ(server_->get("/dashboard/dashboard.js").body, R"({"allowed":true})");
}

TEST_F(Dashboard, StatsNameVersionStoreAndReloads) {
  const HttpResponse before = server_->admin_get("/admin/stats");
  EXPECT_NE(before.body.find(R"("version":"0.1.0","store":{"backend":"memory","ready":true},)"
                             R"("reloads":{"succeeded":0,"failed":0,"last":null},"routes":[])"),
            std::string::npos)
      << before.body;

  EXPECT_EQ(server_->admin_post("/admin/reload").status, 200);
  const HttpResponse reloaded = server_->admin_get("/admin/stats");
  EXPECT_NE(
      reloaded.body.find(
          R"("reloads":{"succeeded":1,"failed":0,"last":{"ok":true,"generation":2,"unix_ms":)"),
      std::string::npos)
      << reloaded.body;

  // A refused reload through SIGHUP is recorded too, with its errors.
  server_->write_config_raw("listen: [\n");
  server_->send_signal(SIGHUP);
  ASSERT_TRUE(server_->wait_for_log("reload refused"));
  const HttpResponse refused = server_->admin_get("/admin/stats");
  EXPECT_NE(
      refused.body.find(
          R"("reloads":{"succeeded":1,"failed":1,"last":{"ok":false,"generation":2,"unix_ms":)"),
      std::string::npos)
      << refused.body;
  EXPECT_NE(refused.body.find(R"(,"errors":[")"), std::string::npos) << refused.body;
  EXPECT_NE(refused.body.find(R"("generation":2,)"), std::string::npos);
}

}  // namespace
}  // namespace sluice::test
