// Who may ask for decisions. /v1/check spends any key's limit, so a public
// client must never reach it: a gateway's public port routes and proxies
// /v1/check and /v1/auth like any other path; decision_api.listen serves
// them (and only them) on a port of their own; decision_api.token_file
// requires a bearer token there.
#include "gateway_support.h"
#include "test_support.h"

namespace sluice::test {
namespace {

const Headers kJson = {{"Content-Type", "application/json"}};

// The login policy keyed by client address, as in the seed.
std::string gateway_yaml(const TestUpstream& upstream, const std::string& extra = "") {
  return "upstream: " + upstream.url() + R"(
headers: [legacy]
policies:
  login: {capacity: 3, refill_rate: 1/h}
routes:
  - match: POST /api/auth/login
    limits: [login]
)" + extra;
}

// The attack of the report: one client spends the victim's login attempts
// through /v1/check. On a gateway's public port that path is the API's.
TEST(DecisionAccess, AGatewaysPublicPortProxiesTheDecisionPathsAndNoClientSpendsAnothersLimit) {
  TestUpstream upstream;
  auto server = SluiceProcess::start(gateway_yaml(upstream));
  ASSERT_NE(server, nullptr);
  EXPECT_TRUE(server->wait_for_log("/v1/check and /v1/auth are not served"));
  const HttpResponse attack =
      server->post("/v1/check", R"({"policy":"login","key":"ip:127.0.0.1","cost":3})", kJson);
  EXPECT_EQ(attack.status, 200);
  EXPECT_EQ(attack.body, R"({"n":1})");  // the upstream's answer
  const HttpResponse auth = server->get(
      "/v1/auth", {{"X-Original-Method", "POST"}, {"X-Original-URI", "/api/auth/login"}});
  EXPECT_EQ(auth.body, R"({"n":2})");
  ASSERT_EQ(upstream.request_heads().size(), 2u);
  EXPECT_EQ(upstream.request_heads()[0].rfind("POST /v1/check HTTP/1.1\r\n", 0), 0u);
  EXPECT_EQ(upstream.request_heads()[1].rfind("GET /v1/auth HTTP/1.1\r\n", 0), 0u);
  // The victim (this client, 127.0.0.1) still has all 3 attempts.
  EXPECT_EQ(count_allowed(*server, "POST", "/api/auth/login", 5), 3);
}

TEST(DecisionAccess, DecisionApiListenServesTheDecisionPathsThereAndOnlyThere) {
  TestUpstream upstream;
  auto server =
      SluiceProcess::start(gateway_yaml(upstream, "decision_api:\n  listen: 127.0.0.1:0\n"));
  ASSERT_NE(server, nullptr);
  ASSERT_NE(server->decision_port(), 0);
  const HttpResponse check =
      server->decision_request("POST", "/v1/check", kJson, R"({"policy":"login","key":"user:42"})");
  EXPECT_EQ(check.status, 200);
  EXPECT_EQ(
      check.body,
      R"({"allowed":true,"limit":3,"remaining":2,"reset_after_ms":3600000,"retry_after_ms":0})");
  const HttpResponse auth = server->decision_request(
      "GET", "/v1/auth", {{"X-Original-Method", "POST"}, {"X-Original-URI", "/api/auth/login"}});
  EXPECT_EQ(auth.status, 204);
  EXPECT_EQ(auth.header("X-RateLimit-Remaining"), "2");
  // Anything else on the decision port is not found, never proxied.
  const HttpResponse other = server->decision_request("GET", "/api/items", {});
  EXPECT_EQ(other.status, 404);
  EXPECT_NE(other.body.find(R"("code":"NOT_FOUND")"), std::string::npos) << other.body;
  // The public port proxies /v1/check.
  EXPECT_EQ(server->post("/v1/check", R"({"policy":"login","key":"x"})", kJson).body, R"({"n":1})");
  EXPECT_EQ(upstream.requests(), 1);
}

// Without an upstream and without decision_api.listen, the listen port is a
// decision service: the decision API is served there.
TEST(DecisionAccess, APureDecisionServiceServesTheDecisionApiOnListen) {
  auto server = SluiceProcess::start(R"(
policies:
  login: {capacity: 3, refill_rate: 1/h}
)");
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->post("/v1/check", R"({"policy":"login","key":"k"})", kJson).status, 200);
}

TEST(DecisionAccess, ATokenFileRequiresTheBearerTokenOnEveryDecisionRequest) {
  TestUpstream upstream;
  auto server = SluiceProcess::start(
      gateway_yaml(upstream,
                   "decision_api:\n  listen: 127.0.0.1:0\n  token_file: decision.token\n"),
      "127.0.0.1", {{"decision.token", "d3c1s10n-t0ken\n"}});
  ASSERT_NE(server, nullptr);
  const std::string body = R"({"policy":"login","key":"user:1"})";
  const HttpResponse none = server->decision_request("POST", "/v1/check", kJson, body);
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(none.header("WWW-Authenticate"), "Bearer");
  EXPECT_NE(none.body.find(R"("code":"UNAUTHORIZED")"), std::string::npos) << none.body;
  Headers wrong = kJson;
  wrong.emplace_back("Authorization", "Bearer d3c1s10n-t0keN");
  EXPECT_EQ(server->decision_request("POST", "/v1/check", wrong, body).status, 401);
  Headers right = kJson;
  right.emplace_back("Authorization", "Bearer d3c1s10n-t0ken");  // the file's newline is not part
  const HttpResponse ok = server->decision_request("POST", "/v1/check", right, body);
  EXPECT_EQ(ok.status, 200);
  EXPECT_NE(ok.body.find(R"("remaining":2)"), std::string::npos) << ok.body;
  // The scheme is case-insensitive; /v1/auth needs the token too.
  const HttpResponse auth = server->decision_request("GET", "/v1/auth",
                                                     {{"X-Original-Method", "GET"},
                                                      {"X-Original-URI", "/x"},
                                                      {"Authorization", "bearer d3c1s10n-t0ken"}});
  EXPECT_EQ(auth.status, 204);
  EXPECT_EQ(server
                ->decision_request("GET", "/v1/auth",
                                   {{"X-Original-Method", "GET"}, {"X-Original-URI", "/x"}})
                .status,
            401);
}

}  // namespace
}  // namespace sluice::test
