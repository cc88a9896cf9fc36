// Plans per consumer through the real binary: free and pro quotas, unknown
// consumers (a plan keyed by address, or 401), /v1/check by consumer, and
// /admin/consumers changing a plan at runtime, in the file, across a
// restart; a malformed consumers file at reload keeps the old table.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "test_support.h"

namespace sluice::test {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

// Decision-only (no upstream): an allowed request gets 200 {"allowed":true}.
// Refills of one an hour keep the counts exact however slow the test is.
std::string config_for(const std::string& consumers_file, const std::string& unknown) {
  return R"(
headers: [legacy]
plans:
  free: [{capacity: 2, refill_rate: 1/h}]
  pro: [{capacity: 5, refill_rate: 1/h}]
consumers: {key: header:x-api-key, file: ")" +
         consumers_file + R"(", unknown: )" + unknown + R"(}
routes:
  - match: GET /api/search
    limits: [plan, {capacity: 100, refill_rate: 1/h}]
  - match: GET /api/orders
    limits: [plan]
  - match: GET /health
    limits: [{capacity: 100, refill_rate: 1/h}]
)";
}

const std::string kConsumers = "# tiers\nkey-pro: pro\nkey-free: free   # trial\n";

Headers api_key(const std::string& id) {
  return {{"X-Api-Key", id}};
}

class Consumers : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = make_temp_dir();
    file_ = dir_ + "/consumers.yaml";
    write_text(file_, kConsumers);
  }
  void TearDown() override { remove_dir(dir_); }

  std::unique_ptr<SluiceProcess> start(const std::string& unknown,
                                       const SluiceProcess::Files& files = {},
                                       const std::string& extra = "") {
    return SluiceProcess::start(config_for(file_, unknown) + extra, "127.0.0.1", files);
  }
  static HttpResponse put(const SluiceProcess& s, const std::string& id, const std::string& body,
                          Headers headers = {{"Content-Type", "application/json"}}) {
    return s.admin_request("PUT", "/admin/consumers/" + id, headers, body);
  }

  std::string dir_;
  std::string file_;
};

TEST_F(Consumers, FreeAndProQuotasAreOneAcrossTheRoutesThatListPlan) {
  auto server = start("free");
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(count_allowed(*server, "GET", "/api/search", 3, api_key("key-pro")), 3);
  EXPECT_EQ(count_allowed(*server, "GET", "/api/orders", 4, api_key("key-pro")), 2);
  EXPECT_EQ(count_allowed(*server, "GET", "/api/search", 3, api_key("key-free")), 2);
  EXPECT_EQ(count_allowed(*server, "GET", "/api/orders", 1, api_key("key-free")), 0);
  // The route's own limit still counts: /health has no `plan`.
  EXPECT_EQ(count_allowed(*server, "GET", "/health", 3, api_key("key-free")), 3);
  const HttpResponse r = server->get("/api/orders", api_key("key-pro"));
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(r.body, rate_limited_body("pro#0"));
}

TEST_F(Consumers, UnknownIdsShareTheUnknownPlanOfTheirAddress) {
  auto server = start("free");
  ASSERT_NE(server, nullptr);
  // A fresh made-up id per request mints nothing: one free quota for the address.
  EXPECT_EQ(count_allowed(*server, "GET", "/api/orders", 1, api_key("made-up-1")), 1);
  EXPECT_EQ(count_allowed(*server, "GET", "/api/orders", 1, api_key("made-up-2")), 1);
  EXPECT_EQ(count_allowed(*server, "GET", "/api/orders", 1, api_key("made-up-3")), 0);
  EXPECT_EQ(count_allowed(*server, "GET", "/api/orders", 1), 0);  // no id at all
  // Known consumers are unaffected.
  EXPECT_EQ(count_allowed(*server, "GET", "/api/orders", 1, api_key("key-free")), 1);
}

TEST_F(Consumers, UnknownRejectAnswers401Json) {
  auto server = start("reject");
  ASSERT_NE(server, nullptr);
  const std::string body =
      R"({"error":{"code":"UNKNOWN_CONSUMER","message":"this route is for known consumers only: send a consumer id that is on a plan"}})";
  for (const Headers& headers : {api_key("stranger"), Headers{}}) {
    const HttpResponse r = server->get("/api/orders", headers);
    EXPECT_EQ(r.status, 401);
    EXPECT_EQ(r.body, body);
    EXPECT_EQ(r.header("Content-Type"), "application/json");
  }
  const HttpResponse auth =
      server->get("/v1/auth", {{"X-Original-Method", "GET"}, {"X-Original-URI", "/api/orders"}});
  EXPECT_EQ(auth.status, 401);
  EXPECT_EQ(auth.body, body);
  const HttpResponse check = server->post("/v1/check", R"({"consumer":"stranger"})",
                                          {{"Content-Type", "application/json"}});
  EXPECT_EQ(check.status, 401);
  EXPECT_EQ(check.body, body);
  EXPECT_EQ(server->metric(R"(sluice_http_rejected_total{reason="unknown_consumer"})"), 4);
  EXPECT_EQ(server->get("/health").status, 200);  // no `plan` there
  EXPECT_EQ(count_allowed(*server, "GET", "/api/orders", 3, api_key("key-free")), 2);
}

TEST_F(Consumers, CheckByConsumerSpendsTheGatewaysQuota) {
  auto server = start("free");
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(count_allowed(*server, "GET", "/api/orders", 1, api_key("key-free")), 1);
  auto check = [&](const std::string& body) {
    return server->post("/v1/check", body, {{"Content-Type", "application/json"}});
  };
  const HttpResponse r = check(R"({"consumer":"key-free"})");
  EXPECT_EQ(r.status, 200);
  // The gateway's request took one of the two: the check spends the other
  // (reset_after_ms counts from the gateway's charge, so its exact value varies).
  EXPECT_EQ(r.body.rfind(R"({"allowed":true,"limit":2,"remaining":0,"reset_after_ms":)", 0), 0u)
      << r.body;
  EXPECT_EQ(check(R"({"consumer":"key-free"})").status, 429);
  EXPECT_EQ(count_allowed(*server, "GET", "/api/orders", 1, api_key("key-free")), 0);
  // Unknown: the free plan under the caller's key.
  EXPECT_EQ(check(R"({"consumer":"who","key":"ip:198.51.100.1","cost":2})").status, 200);
  EXPECT_EQ(check(R"({"consumer":"who","key":"ip:198.51.100.1"})").status, 429);
  const HttpResponse big = check(R"({"consumer":"key-pro","cost":6})");
  EXPECT_EQ(big.status, 400);
  EXPECT_NE(big.body.find(R"(\"cost\" 6 is above the size of limit \"pro#0\")"), std::string::npos)
      << big.body;
}

TEST_F(Consumers, PutChangesThePlanForTheNextRequestInTheFileAndAcrossARestart) {
  auto server = start("reject");
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->admin_get("/admin/consumers/key-free").body,
            R"({"consumer":"key-free","plan":"free"})");
  EXPECT_EQ(count_allowed(*server, "GET", "/api/orders", 3, api_key("key-free")), 2);

  const HttpResponse r = put(*server, "key-free", R"({"plan":"pro"})");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, R"({"consumer":"key-free","plan":"pro"})");
  // The pro quota applies at once (its own state: 5).
  EXPECT_EQ(count_allowed(*server, "GET", "/api/orders", 6, api_key("key-free")), 5);
  // A new consumer; an id that needs quoting in the file.
  EXPECT_EQ(put(*server, "new%3Aone", R"({"plan":"free"})").body,
            R"({"consumer":"new:one","plan":"free"})");
  EXPECT_EQ(count_allowed(*server, "GET", "/api/orders", 1, api_key("new:one")), 1);
  // Only the changed lines differ; comments stay.
  EXPECT_EQ(read_text(file_), "# tiers\nkey-pro: pro\nkey-free: pro\n\"new:one\": free\n");

  const HttpResponse unknown_plan = put(*server, "key-free", R"({"plan":"gold"})");
  EXPECT_EQ(unknown_plan.status, 400);
  EXPECT_EQ(
      unknown_plan.body,
      R"json({"error":{"code":"UNKNOWN_PLAN","message":"no plan named \"gold\" (plans: free, pro)"}})json");
  const HttpResponse removed = server->admin_request("DELETE", "/admin/consumers/key-pro", {});
  EXPECT_EQ(removed.status, 200);
  EXPECT_EQ(removed.body, R"({"consumer":"key-pro","plan":null})");
  const HttpResponse gone = server->admin_get("/admin/consumers/key-pro");
  EXPECT_EQ(gone.status, 404);
  EXPECT_EQ(
      gone.body,
      R"json({"error":{"code":"UNKNOWN_CONSUMER","message":"no consumer \"key-pro\" (not in the consumers file)"}})json");
  EXPECT_EQ(server->get("/api/orders", api_key("key-pro")).status, 401);
  EXPECT_EQ(read_text(file_), "# tiers\nkey-free: pro\n\"new:one\": free\n");

  // A restart reads the file: the changes stay.
  server.reset();
  auto again = start("reject");
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->admin_get("/admin/consumers/key-free").body,
            R"({"consumer":"key-free","plan":"pro"})");
  EXPECT_EQ(again->admin_get("/admin/consumers/new%3aone").body,
            R"({"consumer":"new:one","plan":"free"})");
  EXPECT_EQ(again->admin_get("/admin/consumers/key-pro").status, 404);
}

TEST_F(Consumers, ChangesNeedTheAdminTokenLikeEveryAdminWrite) {
  auto server =
      start("reject", {{"admin.token", "4dm1n-s3cret\n"}}, "admin_token_file: admin.token\n");
  ASSERT_NE(server, nullptr);
  const HttpResponse none = put(*server, "key-free", R"({"plan":"pro"})");
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(server->admin_request("DELETE", "/admin/consumers/key-free", {}).status, 401);
  const HttpResponse text =
      put(*server, "key-free", R"({"plan":"pro"})", {{"Authorization", "Bearer 4dm1n-s3cret"}});
  EXPECT_EQ(text.status, 415);
  EXPECT_EQ(
      text.body,
      R"({"error":{"code":"UNSUPPORTED_MEDIA_TYPE","message":"the body of an admin PUT must be Content-Type: application/json"}})");
  EXPECT_EQ(read_text(file_), kConsumers);
  EXPECT_EQ(put(*server, "key-free", R"({"plan":"pro"})",
                {{"Authorization", "Bearer 4dm1n-s3cret"}, {"Content-Type", "application/json"}})
                .status,
            200);
}

// A GET tells whether an API key exists and its plan: with admin_token_file
// every /admin/consumers request needs the token.
TEST_F(Consumers, ReadingAConsumerNeedsTheAdminTokenToo) {
  auto server =
      start("reject", {{"admin.token", "4dm1n-s3cret\n"}}, "admin_token_file: admin.token\n");
  ASSERT_NE(server, nullptr);
  for (const std::string target : {"/admin/consumers/key-free", "/admin/consumers/nobody"}) {
    const HttpResponse none = server->admin_get(target);
    EXPECT_EQ(none.status, 401) << target;
    EXPECT_EQ(
        none.body,
        R"json({"error":{"code":"UNAUTHORIZED","message":"this admin endpoint needs \"Authorization: Bearer <token>\" (admin_token_file)"}})json");
    EXPECT_EQ(none.header("WWW-Authenticate"), "Bearer");
    const HttpResponse wrong =
        server->admin_request("GET", target, {{"Authorization", "Bearer guess"}});
    EXPECT_EQ(wrong.status, 401) << target;
  }
  const HttpResponse ok = server->admin_request("GET", "/admin/consumers/key-free",
                                                {{"Authorization", "Bearer 4dm1n-s3cret"}});
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.body, R"({"consumer":"key-free","plan":"free"})");
  EXPECT_EQ(server
                ->admin_request("GET", "/admin/consumers/nobody",
                                {{"Authorization", "Bearer 4dm1n-s3cret"}})
                .status,
            404);
  // Other reads stay open without admin_token_all.
  EXPECT_EQ(server->admin_get("/healthz").status, 200);
}

// A kill in the middle of a PUT leaves the consumers file's temporary file
// ("<file>.tmp-<pid>-<n>"); the next start removes the ones of processes that
// are gone, and nothing else.
TEST_F(Consumers, TemporaryFilesLeftByAKilledWriteAreRemovedAtStart) {
  // A pid that no longer runs: a child that has exited and been reaped.
  const pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  ASSERT_GT(gone, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(gone, &status, 0), gone);
  const std::string stray = file_ + ".tmp-" + std::to_string(gone) + "-0";
  const std::string stray_big = file_ + ".tmp-" + std::to_string(gone) + "-17";
  // This test's process runs: it could be writing it.
  const std::string live = file_ + ".tmp-" + std::to_string(::getpid()) + "-0";
  const std::string other = dir_ + "/other.yaml.tmp-" + std::to_string(gone) + "-0";
  const std::string backup = file_ + ".tmp-backup";
  for (const std::string& f : {stray, stray_big, live, other, backup}) write_text(f, "partial");
  write_text(stray_big, std::string(1 << 20, 'x'));

  auto server = start("free");
  ASSERT_NE(server, nullptr);
  const auto exists = [](const std::string& f) { return ::access(f.c_str(), F_OK) == 0; };
  EXPECT_FALSE(exists(stray));
  EXPECT_FALSE(exists(stray_big));
  EXPECT_TRUE(exists(live));
  EXPECT_TRUE(exists(other));
  EXPECT_TRUE(exists(backup));
  EXPECT_TRUE(server->wait_for_log("removed " + stray + ": a write of the consumers file"))
      << server->log();
  EXPECT_TRUE(server->wait_for_log("removed " + stray_big + ": a write of the consumers file"));
  EXPECT_EQ(read_text(file_), kConsumers);
  for (const std::string& f : {live, other, backup}) std::remove(f.c_str());
}

TEST_F(Consumers, AMalformedConsumersFileAtReloadKeepsTheOldTable) {
  auto server = start("reject");
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(count_allowed(*server, "GET", "/api/orders", 1, api_key("key-pro")), 1);
  write_text(file_, "key-pro: free\nkey-free: prp\nkey-new\n");
  const HttpResponse r = server->admin_post("/admin/reload");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find(file_ + ":2:11: unknown plan \\\"prp\\\"; did you mean `pro`?"),
            std::string::npos)
      << r.body;
  EXPECT_NE(r.body.find(file_ + ":3:8: expected ':' and a plan after the consumer id"),
            std::string::npos)
      << r.body;
  // The old table stays: key-pro is still pro (4 of 5 left), key-new unknown.
  EXPECT_EQ(server->admin_get("/admin/consumers/key-pro").body,
            R"({"consumer":"key-pro","plan":"pro"})");
  EXPECT_EQ(count_allowed(*server, "GET", "/api/orders", 5, api_key("key-pro")), 4);
  EXPECT_EQ(server->get("/api/orders", api_key("key-new")).status, 401);
  // Fixed, the reload goes through and the new file applies.
  write_text(file_, "key-pro: free\nkey-new: free\n");
  EXPECT_EQ(server->admin_post("/admin/reload").status, 200);
  EXPECT_EQ(count_allowed(*server, "GET", "/api/orders", 3, api_key("key-new")), 2);
}

// /admin/reset {"consumer": id} forgets that consumer's plan (every limit of
// it, on every route that lists `plan`) and nothing else; an id that is not a
// consumer has no state of its own and is a 404 that says how to reset it.
TEST_F(Consumers, AdminResetOfAConsumerForgetsItsPlanOnly) {
  auto server = start("free");
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(count_allowed(*server, "GET", "/api/orders", 6, api_key("key-pro")), 5);
  EXPECT_EQ(count_allowed(*server, "GET", "/api/orders", 3, api_key("key-free")), 2);
  EXPECT_EQ(count_allowed(*server, "GET", "/health", 1, api_key("key-pro")), 1);

  const HttpResponse r = server->admin_post("/admin/reset", R"({"consumer":"key-pro"})");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, R"({"reset":true,"had_state":true})");
  EXPECT_TRUE(server->wait_for_log(R"(admin reset: consumer "key-pro" (1 limit(s)))"))
      << server->log();
  EXPECT_EQ(count_allowed(*server, "GET", "/api/search", 6, api_key("key-pro")), 5);   // fresh
  EXPECT_EQ(count_allowed(*server, "GET", "/api/orders", 1, api_key("key-free")), 0);  // kept

  const HttpResponse unknown = server->admin_post("/admin/reset", R"({"consumer":"key-nobody"})");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_EQ(unknown.body,
            R"x({"error":{"code":"UNKNOWN_CONSUMER","message":"no consumer \"key-nobody\" (an )x"
            R"x(unknown id's plan is keyed by the client address: reset it with )x"
            R"x({\"route\":NAME,\"client\":ADDRESS})"}})x");
  EXPECT_EQ(server->admin_post("/admin/reset", R"({"consumer":"key-pro","key":"x"})").status, 400);
}

}  // namespace
}  // namespace sluice::test
