// The request and upstream series of /metrics (sluice_http_request_duration_seconds,
// sluice_upstream_responses_total, sluice_upstream_failures_total,
// sluice_upstream_duration_seconds) through the real binary: a gateway in
// front of a TestUpstream that answers, fails and misbehaves in a known
// order, and the decision API.
#include <cstdlib>
#include <sstream>
#include <string>

#include "gateway_support.h"
#include "test_support.h"

namespace sluice::test {
namespace {

const std::string kRoute = "GET /r";

// The value of `series` in the scrape `text` (a histogram's _sum is a
// fraction); -1 when absent.
double sample(const std::string& text, const std::string& series) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 &&
        line[series.size()] == ' ') {
      return std::strtod(line.c_str() + series.size() + 1, nullptr);
    }
  }
  return -1;
}

std::string responses(const std::string& code) {
  return "sluice_upstream_responses_total{route=\"" + kRoute + "\",code=\"" + code + "\"}";
}
std::string failures(const std::string& reason) {
  return "sluice_upstream_failures_total{route=\"" + kRoute + "\",reason=\"" + reason + "\"}";
}
std::string request_duration(const std::string& part, const std::string& route,
                             const std::string& result, const std::string& le = "") {
  return "sluice_http_request_duration_seconds_" + part + "{route=\"" + route + "\",result=\"" +
         result + "\"" + (le.empty() ? "" : ",le=\"" + le + "\"") + "}";
}
const std::string kUpstreamCount = "sluice_upstream_duration_seconds_count{route=\"GET /r\"}";
const std::string kUpstreamSum = "sluice_upstream_duration_seconds_sum{route=\"GET /r\"}";

std::string gateway(const std::string& upstream_url) {
  // Nine requests allowed, the tenth denied; upstream.timeout short enough
  // for the timeout case, long enough for a sanitized build's answers.
  return "upstream:\n  url: " + upstream_url +
         "\n  timeout: 1s\n  connect_timeout: 5s\nserver:\n  threads: 1\nroutes:\n"
         "  - match: " +
         kRoute + "\n    limits: [{capacity: 9, refill_rate: 1/h}]\n";
}

TEST(RedMetrics, EveryUpstreamOutcomeIsCountedOnceWithItsReason) {
  TestUpstream upstream;
  RefusingPort nobody;
  ASSERT_NE(upstream.port(), 0);
  ASSERT_NE(nobody.port(), 0);
  auto server = SluiceProcess::start(gateway(upstream.url()));
  ASSERT_NE(server, nullptr);

  // Every series of the route is there before any traffic, at zero.
  const std::string before = server->admin_get("/metrics").body;
  for (const char* code : {"2xx", "3xx", "4xx", "5xx"})
    EXPECT_EQ(sample(before, responses(code)), 0);
  for (const char* reason : {"connect", "timeout", "reset", "bad_response", "tls"}) {
    EXPECT_EQ(sample(before, failures(reason)), 0) << reason;
  }
  EXPECT_EQ(sample(before, kUpstreamCount), 0);
  for (const char* result : {"allowed", "denied", "error"}) {
    EXPECT_EQ(sample(before, request_duration("count", kRoute, result)), 0) << result;
  }
  EXPECT_EQ(sample(before, request_duration("count", "none", "allowed")), 0);
  EXPECT_EQ(sample(before, "sluice_upstream_failures_total{route=\"none\",reason=\"reset\"}"), 0);

  auto c = server->connect();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(c->request("GET", "/r").status, 200);
  upstream.answer_with(503);
  for (int i = 0; i < 2; ++i) EXPECT_EQ(c->request("GET", "/r").status, 503);

  // The upstream reads the request and holds its answer past upstream.timeout.
  upstream.hold();
  const HttpResponse timed_out = c->request("GET", "/r");
  upstream.release();
  EXPECT_EQ(timed_out.status, 504);
  EXPECT_EQ(
      timed_out.body,
      R"({"error":{"code":"UPSTREAM_TIMEOUT","message":"the upstream did not answer within 1000 ms"}})");

  // Reset before answering: the pooled connection's failure is retried once
  // on a new one, which is reset too; one failure is counted.
  upstream.switch_to(TestUpstream::Mode::kResetUnanswered);
  const HttpResponse reset = c->request("GET", "/r");
  EXPECT_EQ(reset.status, 502);
  EXPECT_NE(reset.body.find("closed the connection before responding"), std::string::npos)
      << reset.body;

  upstream.switch_to(TestUpstream::Mode::kGarbage);
  const HttpResponse garbage = c->request("GET", "/r");
  EXPECT_EQ(garbage.status, 502);
  EXPECT_NE(garbage.body.find("malformed response"), std::string::npos) << garbage.body;

  // The same route, now in front of a port that refuses connections.
  server->rewrite_config(gateway(nobody.url()));
  EXPECT_EQ(server->admin_post("/admin/reload").status, 200);
  const HttpResponse refused = c->request("GET", "/r");
  EXPECT_EQ(refused.status, 502);
  EXPECT_NE(refused.body.find("cannot be reached"), std::string::npos) << refused.body;

  EXPECT_EQ(c->request("GET", "/r").status, 429);  // the tenth: denied, never proxied

  // Counted when the last byte of each response has been written.
  EXPECT_TRUE(server->wait_for_metric(request_duration("count", kRoute, "denied"), 1));
  EXPECT_TRUE(server->wait_for_metric(request_duration("count", kRoute, "allowed"), 9));
  const std::string after = server->admin_get("/metrics").body;
  EXPECT_EQ(sample(after, responses("2xx")), 3);
  EXPECT_EQ(sample(after, responses("3xx")), 0);
  EXPECT_EQ(sample(after, responses("4xx")), 0);
  EXPECT_EQ(sample(after, responses("5xx")), 2);
  EXPECT_EQ(sample(after, failures("connect")), 1);
  EXPECT_EQ(sample(after, failures("timeout")), 1);
  EXPECT_EQ(sample(after, failures("reset")), 1);
  EXPECT_EQ(sample(after, failures("bad_response")), 1);
  // Only responses are timed upstream.
  EXPECT_EQ(sample(after, kUpstreamCount), 5);
  EXPECT_GT(sample(after, kUpstreamSum), 0);
  EXPECT_EQ(sample(after, "sluice_upstream_duration_seconds_bucket{route=\"GET /r\",le=\"+Inf\"}"),
            5);
  EXPECT_EQ(sample(after, request_duration("bucket", kRoute, "allowed", "+Inf")), 9);
  // The timed-out request took upstream.timeout at least.
  EXPECT_GE(sample(after, request_duration("sum", kRoute, "allowed")), 1.0);
  EXPECT_LT(sample(after, request_duration("bucket", kRoute, "allowed", "0.5")), 9);
  EXPECT_GT(sample(after, request_duration("sum", kRoute, "denied")), 0);
  EXPECT_EQ(sample(after, request_duration("count", kRoute, "error")), 0);
  // Beside the decisions, as sluice_requests_total counts them.
  EXPECT_EQ(sample(after, "sluice_requests_total{route=\"GET /r\",result=\"allowed\"}"), 9);
  EXPECT_EQ(sample(after, "sluice_requests_total{route=\"GET /r\",result=\"denied\"}"), 1);
}

TEST(RedMetrics, DecisionApiCallsAreTimedByPolicyAndResult) {
  auto server = SluiceProcess::start(
      "policies:\n  login: {capacity: 1, refill_rate: 1/h}\n"
      "routes:\n  - match: GET /a\n    limits: [{capacity: 5, refill_rate: 1/h}]\n");
  ASSERT_NE(server, nullptr);
  const std::string check = R"({"policy":"login","key":"u1"})";
  const std::vector<std::pair<std::string, std::string>> json = {
      {"Content-Type", "application/json"}};
  EXPECT_EQ(server->post("/v1/check", check, json).status, 200);
  EXPECT_EQ(server->post("/v1/check", check, json).status, 429);
  EXPECT_EQ(
      server->get("/v1/auth", {{"X-Original-Method", "GET"}, {"X-Original-URI", "/a"}}).status,
      204);
  EXPECT_TRUE(server->wait_for_metric(request_duration("count", "policy:login", "allowed"), 1));
  EXPECT_TRUE(server->wait_for_metric(request_duration("count", "policy:login", "denied"), 1));
  EXPECT_TRUE(server->wait_for_metric(request_duration("count", "GET /a", "allowed"), 1));
  const std::string text = server->admin_get("/metrics").body;
  EXPECT_GT(sample(text, request_duration("sum", "policy:login", "allowed")), 0);
  // No upstream, no upstream series.
  EXPECT_EQ(text.find("sluice_upstream_"), std::string::npos);
}

}  // namespace
}  // namespace sluice::test
