// The admin port: health, readiness, Prometheus metrics, stats (docs/DESIGN.md §6).
#include <chrono>
#include <csignal>
#include <regex>
#include <sstream>
#include <thread>

#include "test_support.h"

namespace sluice::test {
namespace {

const std::string kYaml = R"(
headers: [legacy]
policies:
  login: {capacity: 2, refill_rate: 1/h}
routes:
  - match: GET /api/search
    limits: [{capacity: 3, refill_rate: 1/h}]
  - match: POST /api/auth/login
    limits: [login, {algorithm: sliding_window, limit: 10, window: 1h}]
)";

class Admin : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = SluiceProcess::start(kYaml);
    ASSERT_NE(server_, nullptr);
  }
  std::unique_ptr<SluiceProcess> server_;
};

TEST_F(Admin, HealthAndReadiness) {
  const HttpResponse health = server_->admin_get("/healthz");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body, "ok\n");
  const HttpResponse ready = server_->admin_get("/readyz");
  EXPECT_EQ(ready.status, 200);
  EXPECT_EQ(server_->admin_get("/nope").status, 404);
}

TEST_F(Admin, MetricsCountRequestsAndDecisionsByRouteAlgorithmAndResult) {
  EXPECT_EQ(count_allowed(*server_, "GET", "/api/search", 5), 3);
  EXPECT_EQ(count_allowed(*server_, "POST", "/api/auth/login", 3, {}, "x"), 2);
  EXPECT_EQ(server_->metric(R"(sluice_requests_total{route="GET /api/search",result="allowed"})"),
            3);
  EXPECT_EQ(server_->metric(R"(sluice_requests_total{route="GET /api/search",result="denied"})"),
            2);
  EXPECT_EQ(server_->metric(R"(sluice_requests_total{route="GET /api/search",result="error"})"), 0);
  EXPECT_EQ(
      server_->metric(
          R"(sluice_decisions_total{route="GET /api/search",algorithm="token_bucket",result="denied"})"),
      2);
  // The login route has two limits; the third request is denied by login
  // (token_bucket) while the sliding window would have allowed it.
  const std::string login = R"(route="POST /api/auth/login",algorithm=")";
  EXPECT_EQ(
      server_->metric("sluice_decisions_total{" + login + R"(token_bucket",result="allowed"})"), 2);
  EXPECT_EQ(
      server_->metric("sluice_decisions_total{" + login + R"(token_bucket",result="denied"})"), 1);
  EXPECT_EQ(
      server_->metric("sluice_decisions_total{" + login + R"(sliding_window",result="allowed"})"),
      3);
  EXPECT_EQ(
      server_->metric("sluice_decisions_total{" + login + R"(sliding_window",result="denied"})"),
      0);
  // Keys: search/ip, login/ip, the sliding window/ip.
  EXPECT_EQ(server_->metric("sluice_keys_held"), 3);
  EXPECT_EQ(server_->metric("sluice_store_latency_seconds_count"), 8);
  EXPECT_EQ(server_->metric(R"(sluice_store_latency_seconds_bucket{le="+Inf"})"), 8);
  EXPECT_EQ(server_->metric("sluice_store_errors_total"), 0);
  const HttpResponse r = server_->admin_get("/metrics");
  EXPECT_EQ(r.header("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(r.body.find("# TYPE sluice_store_latency_seconds histogram"), std::string::npos);
  EXPECT_NE(r.body.find("# TYPE sluice_requests_total counter"), std::string::npos);
}

TEST_F(Admin, MetricsCountRejectedRequests) {
  auto c = server_->connect();
  c->send_raw("NOT HTTP\r\n\r\n");
  EXPECT_EQ(c->read_response().status, 400);
  EXPECT_EQ(server_->metric(R"(sluice_http_rejected_total{reason="bad_request"})"), 1);
}

TEST_F(Admin, StatsListRoutesAndTopDeniedKeys) {
  EXPECT_EQ(count_allowed(*server_, "GET", "/api/search", 6), 3);
  const HttpResponse r = server_->admin_get("/admin/stats");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("Content-Type"), "application/json");
  EXPECT_NE(r.body.find(R"({"route":"GET /api/search","allowed":3,"denied":3,"errors":0})"),
            std::string::npos)
      << r.body;
  EXPECT_NE(
      r.body.find(
          R"("top_denied_keys":[{"key":"route:GET /api/search|ip:127.0.0.1","count":3,"error":0}])"),
      std::string::npos)
      << r.body;
  EXPECT_NE(r.body.find(R"("generation":1)"), std::string::npos);
}

TEST_F(Admin, DenialsAreLoggedAtABoundedRate) {
  // 1 line per second by default: a burst of 50 denials logs one line, and
  // the next logged line (if any) counts the others.
  EXPECT_EQ(count_allowed(*server_, "GET", "/api/search", 53), 3);
  const std::string log = server_->log();
  size_t lines = 0;
  for (size_t at = log.find("denied: route"); at != std::string::npos;
       at = log.find("denied: route", at + 1)) {
    ++lines;
  }
  EXPECT_GE(lines, 1u);
  EXPECT_LE(lines, 3u) << log;  // the burst takes well under 3 s
  const HttpResponse stats = server_->admin_get("/admin/stats");
  EXPECT_NE(stats.body.find(R"("denials_logged":)" + std::to_string(lines) + ","),
            std::string::npos)
      << stats.body;
  EXPECT_NE(stats.body.find(R"("denials_not_logged":)" + std::to_string(50 - lines) + "}"),
            std::string::npos)
      << stats.body;
}

TEST(KeysHeld, MemoryKeysWhoseStateIsFullAgainAreDroppedPeriodically) {
  // `brief` is full again 5 s after a request, `lasting` an hour after.
  auto server = SluiceProcess::start(R"(
policies:
  brief: {capacity: 1, refill_rate: 1/5s}
  lasting: {capacity: 1, refill_rate: 1/h}
)");
  ASSERT_NE(server, nullptr);
  for (const std::string body :
       {R"({"policy":"brief","key":"a"})", R"({"policy":"brief","key":"b"})",
        R"({"policy":"brief","key":"c"})"}) {
    EXPECT_EQ(server->post("/v1/check", body).status, 200);
  }
  EXPECT_EQ(server->post("/v1/check", R"({"policy":"lasting","key":"z"})").status, 200);
  EXPECT_EQ(server->metric("sluice_keys_held"), 4);
  // No request comes after these: only the periodic collection (once a
  // second) can drop the three brief states, 5 to 7 s from now. The bound
  // leaves a loaded machine its margin.
  EXPECT_TRUE(server->wait_for_metric("sluice_keys_held", 1, std::chrono::seconds(30)))
      << server->metric("sluice_keys_held");
  // The lasting state was kept: its one request is still spent.
  EXPECT_EQ(server->post("/v1/check", R"({"policy":"lasting","key":"z"})").status, 429);
}

// Two limits deny: the first in the route's order fired (small), though
// tiny is the more restrictive (its retry is longer, and the headers say so).
// Each denial names it in the 429 body, the access log and
// sluice_limit_denials_total, whose series show from the load, at zero.
const std::string kNamedLimits = R"(
logging: {access_log: true}
headers: [legacy]
routes:
  - match: GET /two
    limits: [{name: small, capacity: 1, refill_rate: 1/h}, {name: tiny, capacity: 1, refill_rate: 1/2h}]
)";

TEST(LimitNames, ADenialNamesTheFirstDenyingLimitInBodyLogAndMetric) {
  auto server = SluiceProcess::start(kNamedLimits);
  ASSERT_NE(server, nullptr);
  const std::string small = R"(sluice_limit_denials_total{route="GET /two",limit="small"})";
  const std::string tiny = R"(sluice_limit_denials_total{route="GET /two",limit="tiny"})";
  EXPECT_EQ(server->metric(small), 0);
  EXPECT_EQ(server->metric(tiny), 0);
  EXPECT_EQ(server->get("/two").status, 200);
  for (int i = 0; i < 3; ++i) {
    const HttpResponse r = server->get("/two");
    EXPECT_EQ(r.status, 429);
    EXPECT_EQ(r.body, rate_limited_body("small"));
    EXPECT_EQ(r.header("Retry-After"), "7200");  // tiny's: the most restrictive
  }
  EXPECT_EQ(server->metric(small), 3);
  EXPECT_EQ(server->metric(tiny), 0);
  const std::string denied =
      " route=\"GET /two\" key=ip:127.0.0.1 decision=denied limit=small status=429 bytes=123 ";
  const std::string log = server->wait_for_access_log({denied});
  EXPECT_NE(log.find(denied), std::string::npos) << log;

  // Renamed by a reload: the next denial names the new name, and the count
  // goes on (the store keys do not depend on `name:`).
  std::string renamed = kNamedLimits;
  renamed.replace(renamed.find("name: small"), 11, "name: first");
  server->rewrite_config(renamed);
  ASSERT_EQ(server->admin_post("/admin/reload").status, 200);
  const std::string first = R"(sluice_limit_denials_total{route="GET /two",limit="first"})";
  EXPECT_EQ(server->metric(first), 0);
  const HttpResponse r = server->get("/two");
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(r.body, rate_limited_body("first"));
  EXPECT_EQ(server->metric(first), 1);
  EXPECT_EQ(server->metric(small), 3);
}

TEST(AccessLog, OneLinePerRequestWithRouteKeyAndDecisionWhenEnabled) {
  auto server = SluiceProcess::start(R"(
logging: {access_log: true}
routes:
  - match: GET /a
    limits: [{capacity: 1, refill_rate: 1/h}]
  - match: GET /k
    key: header:x-api-key
    limits: [{capacity: 1, refill_rate: 1/h}]
)");
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->get("/a?x=1").status, 200);
  EXPECT_EQ(server->get("/a").status, 429);
  EXPECT_EQ(server->get("/k", {{"X-Api-Key", "s3cr3t-v4lue"}}).status, 200);
  EXPECT_EQ(server->get("/k", {{"X-Api-Key", "s3cr3t-v4lue"}}).status, 429);
  EXPECT_EQ(server->get("/nowhere").status, 200);
  // A line is written once its response is sent. (Connections may be served
  // by two worker threads: the lines in either order.)
  // FNV-1a of the value (tests/unit/redact_test.cc pins the function).
  const std::string hashed = "h:x-api-key=~c07a2bb3b2af";
  const std::vector<std::string> lines = {
      " client=127.0.0.1 peer=127.0.0.1 method=GET path=/a route=\"GET /a\" key=ip:127.0.0.1 "
      "decision=allowed limit=- status=200 bytes=16 upstream_ms=- ms=",
      " client=127.0.0.1 peer=127.0.0.1 method=GET path=/a route=\"GET /a\" key=ip:127.0.0.1 "
      "decision=denied limit=\"GET /a\" status=429 bytes=124 upstream_ms=- ms=",
      " client=127.0.0.1 peer=127.0.0.1 method=GET path=/k route=\"GET /k\" key=\"" + hashed +
          "\" decision=allowed limit=- status=200 ",
      " client=127.0.0.1 peer=127.0.0.1 method=GET path=/k route=\"GET /k\" key=\"" + hashed +
          "\" decision=denied limit=\"GET /k\" status=429 ",
      " client=127.0.0.1 peer=127.0.0.1 method=GET path=/nowhere route=none key=- decision=none "
      "limit=- status=200 "};
  const std::string log = server->wait_for_access_log(lines);
  for (const std::string& line : lines) EXPECT_NE(log.find(line), std::string::npos) << line << log;
  EXPECT_EQ(log.find("s3cr3t"), std::string::npos) << log;
  // Each line starts with an RFC 3339 time with its zone.
  const std::regex rfc3339(
      R"(^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}(Z|[+-]\d\d:\d\d) client=\S+ peer=)");
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);)
    EXPECT_TRUE(std::regex_search(line, rfc3339)) << line;
  // The same hash in /admin/stats (and so the dashboard), never the value.
  const HttpResponse stats = server->admin_get("/admin/stats");
  EXPECT_NE(stats.body.find(hashed), std::string::npos) << stats.body;
  EXPECT_EQ(stats.body.find("s3cr3t"), std::string::npos) << stats.body;
}

// A query may hold credentials (?api_key=...): the access log writes the
// path without it, whatever the route's key. `client` is the client as
// resolved through trusted proxies (also for a request refused before any
// decision), `peer` the TCP peer.
TEST(AccessLog, ThePathHasNoQueryAndTheClientIsTheResolvedOne) {
  auto server = SluiceProcess::start(R"(
logging: {access_log: true}
client_ip: {trusted_proxies: [127.0.0.1/32]}
access: {deny: [203.0.113.9/32]}
routes:
  - match: GET /q
    key: query:api_key
    limits: [{capacity: 1, refill_rate: 1/h}]
)");
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(
      server->get("/q?api_key=sk_live_SECRET123", {{"X-Forwarded-For", "198.51.100.7"}}).status,
      200);
  EXPECT_EQ(server->get("/q?token=SECRET456&api_key=sk_live_SECRET123").status, 429);
  EXPECT_EQ(server->get("/q?api_key=x", {{"X-Forwarded-For", "203.0.113.9"}}).status, 403);
  const std::string key = "key=\"q:api_key=~5871ac2ac2e8\"";
  const std::vector<std::string> lines = {
      " client=198.51.100.7 peer=127.0.0.1 method=GET path=/q route=\"GET /q\" " + key +
          " decision=allowed limit=- status=200 ",
      " client=127.0.0.1 peer=127.0.0.1 method=GET path=/q route=\"GET /q\" " + key +
          " decision=denied limit=\"GET /q\" status=429 ",
      " client=203.0.113.9 peer=127.0.0.1 method=GET path=/q route=- key=- decision=- limit=- "
      "status=403 "};
  const std::string log = server->wait_for_access_log(lines);
  for (const std::string& line : lines) EXPECT_NE(log.find(line), std::string::npos) << line << log;
  EXPECT_EQ(log.find("SECRET"), std::string::npos) << log;
  EXPECT_EQ(log.find('?'), std::string::npos) << log;
}

TEST(AccessLog, RedactKeysOffShowsTheValues) {
  auto server = SluiceProcess::start(R"(
logging: {access_log: true, redact_keys: false}
routes:
  - match: GET /k
    key: header:x-api-key
    limits: [{capacity: 1, refill_rate: 1/h}]
)");
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->get("/k", {{"X-Api-Key", "v4lue"}}).status, 200);
  EXPECT_EQ(server->get("/k", {{"X-Api-Key", "v4lue"}}).status, 429);
  const std::string line =
      " key=\"h:x-api-key=v4lue\" decision=denied limit=\"GET /k\" status=429 ";
  EXPECT_NE(server->wait_for_access_log({line}).find(line), std::string::npos);
  EXPECT_NE(server->admin_get("/admin/stats").body.find("h:x-api-key=v4lue"), std::string::npos);
}

TEST(AccessLog, OffByDefault) {
  auto server = SluiceProcess::start("");
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->get("/a").status, 200);
  // Once the process has exited, everything it would have written is there.
  server->send_signal(SIGTERM);
  ASSERT_EQ(server->wait_exit(std::chrono::seconds(30)), 0);
  EXPECT_EQ(server->access_log(), "");
}

TEST(Startup, InvalidConfigPrintsEveryErrorAndExits1) {
  std::string err;
  const int code = SluiceProcess::run_and_capture(R"(listen: 127.0.0.1:0
admin: 127.0.0.1:0
routes:
  - match: GET /a
    limits: [{capacity: 0, refill_rate: 1/s}]
  - match: GET /b
    limits: [{capacity: 5, refil_rate: 1/s}]
)",
                                                  &err);
  EXPECT_EQ(code, 1) << err;
  EXPECT_NE(err.find("sluice.yaml:5:"), std::string::npos) << err;
  EXPECT_NE(err.find("sluice.yaml:7:"), std::string::npos) << err;
}

TEST(Startup, PortInUseExits1WithTheAddress) {
  auto first = SluiceProcess::start("");
  ASSERT_NE(first, nullptr);
  std::string err;
  const int code = SluiceProcess::run_and_capture(
      "listen: 127.0.0.1:" + std::to_string(first->port()) + "\nadmin: 127.0.0.1:0\n", &err);
  EXPECT_EQ(code, 1) << err;
  EXPECT_NE(err.find("127.0.0.1:" + std::to_string(first->port())), std::string::npos) << err;
}

}  // namespace
}  // namespace sluice::test
