// POST /v1/check and GET /v1/auth, including their errors (docs/DESIGN.md §6).
#include "test_support.h"

namespace sluice::test {
namespace {

const std::string kYaml = R"(
headers: [legacy]
policies:
  login: {capacity: 5, refill_rate: 1/h}
routes:
  - match: GET /api/search
    limits: [{capacity: 2, refill_rate: 1/h}]
)";

class DecisionApi : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = SluiceProcess::start(kYaml);
    ASSERT_NE(server_, nullptr);
  }
  HttpResponse check(const std::string& body) const {
    return server_->post("/v1/check", body, {{"Content-Type", "application/json"}});
  }
  HttpResponse auth(const Headers& headers) const { return server_->get("/v1/auth", headers); }

  std::unique_ptr<SluiceProcess> server_;
};

// The "code" and "message" of an error body, crudely but exactly enough.
std::string error_code(const HttpResponse& r) {
  const std::string marker = R"({"error":{"code":")";
  if (r.body.rfind(marker, 0) != 0) return "<not an error body: " + r.body + ">";
  return r.body.substr(marker.size(), r.body.find('"', marker.size()) - marker.size());
}

void expect_bad_request(const HttpResponse& r, const std::string& message_part) {
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(error_code(r), "BAD_REQUEST");
  EXPECT_NE(r.body.find(message_part), std::string::npos)
      << "message should mention '" << message_part << "': " << r.body;
  EXPECT_EQ(r.header("Content-Type"), "application/json");
}

TEST_F(DecisionApi, CheckAllowsThePolicysCapacityThenDenies) {
  const HttpResponse first = check(R"({"policy":"login","key":"user:42"})");
  ASSERT_EQ(first.status, 200);
  // One token of five used; at one per hour it is back in exactly 3600 s.
  EXPECT_EQ(
      first.body,
      R"({"allowed":true,"limit":5,"remaining":4,"reset_after_ms":3600000,"retry_after_ms":0})");
  EXPECT_EQ(first.header("X-RateLimit-Limit"), "5");
  EXPECT_EQ(first.header("X-RateLimit-Remaining"), "4");
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(check(R"({"policy":"login","key":"user:42"})").status, 200);
  }
  const HttpResponse denied = check(R"({"policy":"login","key":"user:42"})");
  ASSERT_EQ(denied.status, 429);
  EXPECT_EQ(denied.body.rfind(R"({"allowed":false,"limit":5,"remaining":0,"reset_after_ms":)", 0),
            0u)
      << denied.body;
  EXPECT_NE(denied.body.find(R"("retry_after_ms":)"), std::string::npos);
  EXPECT_EQ(denied.body.find(R"("retry_after_ms":0})"), std::string::npos) << denied.body;
  EXPECT_EQ(denied.header("Content-Type"), "application/json");
  EXPECT_TRUE(denied.has_header("Retry-After"));
  EXPECT_EQ(denied.header("X-RateLimit-Remaining"), "0");
}

TEST_F(DecisionApi, CheckKeysAreIndependent) {
  for (int i = 0; i < 5; ++i) EXPECT_EQ(check(R"({"policy":"login","key":"a"})").status, 200);
  EXPECT_EQ(check(R"({"policy":"login","key":"a"})").status, 429);
  EXPECT_EQ(check(R"({"policy":"login","key":"b"})").status, 200);
}

TEST_F(DecisionApi, CheckCostIsWeighted) {
  const HttpResponse two = check(R"({"policy":"login","key":"w","cost":2})");
  EXPECT_EQ(two.status, 200);
  EXPECT_NE(two.body.find(R"("remaining":3,)"), std::string::npos) << two.body;
  const HttpResponse three = check(R"({"policy":"login","key":"w","cost":3})");
  EXPECT_EQ(three.status, 200);
  EXPECT_NE(three.body.find(R"("remaining":0,)"), std::string::npos) << three.body;
  EXPECT_EQ(check(R"({"policy":"login","key":"w","cost":1})").status, 429);
}

TEST_F(DecisionApi, CheckRejectsMalformedJson) {
  expect_bad_request(check(R"({"policy":"login","key":)"), "malformed JSON");
  expect_bad_request(check("not json"), "malformed JSON");
  expect_bad_request(check(""), "malformed JSON");
  expect_bad_request(check(R"(["login","user"])"), "JSON object");
}

TEST_F(DecisionApi, CheckRejectsMissingOrInvalidFields) {
  expect_bad_request(check(R"({"key":"user:42"})"), "\\\"policy\\\"");
  expect_bad_request(check(R"({"policy":"login"})"), "\\\"key\\\"");
  expect_bad_request(check(R"({"policy":"login","key":42})"), "\\\"key\\\"");
  expect_bad_request(check(R"({"policy":"login","key":""})"), "\\\"key\\\"");
  expect_bad_request(check(R"({"policy":"login","key":"k","cost":0})"), "\\\"cost\\\"");
  expect_bad_request(check(R"({"policy":"login","key":"k","cost":-1})"), "\\\"cost\\\"");
  expect_bad_request(check(R"({"policy":"login","key":"k","cost":1.5})"), "\\\"cost\\\"");
  expect_bad_request(check(R"({"policy":"login","key":"k","cost":"1"})"), "\\\"cost\\\"");
  expect_bad_request(check(R"({"policy":"login","key":"k","cots":1})"), "unknown field");
  // A cost above the limit could never be allowed: an error, not a 429.
  expect_bad_request(check(R"({"policy":"login","key":"k","cost":6})"), "could never be allowed");
  // None of these consumed anything.
  EXPECT_EQ(check(R"({"policy":"login","key":"k","cost":5})").status, 200);
}

TEST_F(DecisionApi, CheckUnknownPolicyIs404) {
  const HttpResponse r = check(R"({"policy":"nope","key":"user:42"})");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(error_code(r), "UNKNOWN_POLICY");
  EXPECT_NE(r.body.find("nope"), std::string::npos);
}

TEST_F(DecisionApi, CheckNeedsPost) {
  const HttpResponse r = server_->get("/v1/check");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.header("Allow"), "POST");
}

TEST_F(DecisionApi, CheckBodySentAfter100Continue) {
  auto connection = server_->connect();
  const std::string body = R"({"policy":"login","key":"slow"})";
  connection->send_raw(
      "POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Expect: 100-continue\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n");
  const HttpResponse interim = connection->read_response();
  EXPECT_EQ(interim.status, 100);
  connection->send_raw(body);
  const HttpResponse r = connection->read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find(R"("remaining":4)"), std::string::npos) << r.body;
}

TEST_F(DecisionApi, AuthAllowsWith204AndTheHeaders) {
  const HttpResponse r =
      auth({{"X-Original-Method", "GET"}, {"X-Original-URI", "/api/search?q=shoes"}});
  EXPECT_EQ(r.status, 204);
  EXPECT_EQ(r.body, "");
  EXPECT_EQ(r.header("X-RateLimit-Limit"), "2");
  EXPECT_EQ(r.header("X-RateLimit-Remaining"), "1");
  EXPECT_TRUE(r.has_header("X-RateLimit-Reset"));
}

TEST_F(DecisionApi, AuthDeniesWith429AndTheSeedsBody) {
  const Headers h = {{"X-Original-Method", "GET"}, {"X-Original-URI", "/api/search"}};
  EXPECT_EQ(auth(h).status, 204);
  EXPECT_EQ(auth(h).status, 204);
  const HttpResponse r = auth(h);
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(r.body, rate_limited_body("GET /api/search"));
  EXPECT_TRUE(r.has_header("Retry-After"));
  EXPECT_EQ(r.header("X-RateLimit-Remaining"), "0");
}

TEST_F(DecisionApi, AuthAndTheGatewayShareTheRoutesLimit) {
  EXPECT_EQ(auth({{"X-Original-Method", "GET"}, {"X-Original-URI", "/api/search"}}).status, 204);
  EXPECT_EQ(server_->get("/api/search").status, 200);
  EXPECT_EQ(server_->get("/api/search").status, 429);
  EXPECT_EQ(auth({{"X-Original-Method", "GET"}, {"X-Original-URI", "/api/search/"}}).status, 429);
}

TEST_F(DecisionApi, AuthMethodSelectsTheRoute) {
  // POST /api/search matches no route and there is no default: not limited.
  const HttpResponse r = auth({{"X-Original-Method", "POST"}, {"X-Original-URI", "/api/search"}});
  EXPECT_EQ(r.status, 204);
  EXPECT_FALSE(r.has_header("X-RateLimit-Limit"));
}

// nginx's $request_method of a HEAD request is HEAD: it spends the GET
// route's limit, under the same key as GET.
TEST_F(DecisionApi, AuthOfAHeadSpendsTheGetRoutesLimit) {
  const HttpResponse head =
      auth({{"X-Original-Method", "HEAD"}, {"X-Original-URI", "/api/search"}});
  EXPECT_EQ(head.status, 204);
  EXPECT_EQ(head.header("X-RateLimit-Limit"), "2");
  EXPECT_EQ(head.header("X-RateLimit-Remaining"), "1");
  EXPECT_EQ(auth({{"X-Original-Method", "GET"}, {"X-Original-URI", "/api/search"}}).status, 204);
  EXPECT_EQ(auth({{"X-Original-Method", "HEAD"}, {"X-Original-URI", "/api/search"}}).status, 429);
  EXPECT_EQ(server_->metric(R"(sluice_requests_total{route="GET /api/search",result="denied"})"),
            1);
}

// Methods are case-sensitive: "get" is no GET, and would match no GET route.
TEST_F(DecisionApi, AuthRefusesAnOriginalMethodThatIsNotAnUpperCaseToken) {
  for (const std::string method : {"get", "Get", "GET /x", "G\"ET"}) {
    expect_bad_request(auth({{"X-Original-Method", method}, {"X-Original-URI", "/api/search"}}),
                       "X-Original-Method must be an upper-case method token");
  }
  // Nothing was spent.
  EXPECT_EQ(auth({{"X-Original-Method", "GET"}, {"X-Original-URI", "/api/search"}})
                .header("X-RateLimit-Remaining"),
            "1");
}

TEST_F(DecisionApi, AuthNeedsTheOriginalRequestHeaders) {
  expect_bad_request(auth({{"X-Original-URI", "/api/search"}}), "X-Original-Method");
  expect_bad_request(auth({{"X-Original-Method", "GET"}}), "X-Original-URI");
}

// A server with one route of capacity 1 and `settings` (top level and
// route keys), after a first /v1/auth of it (204): the second answer.
struct SecondAuth {
  std::unique_ptr<SluiceProcess> server;
  HttpResponse response;
};
SecondAuth second_auth(const std::string& top, const std::string& route) {
  SecondAuth out;
  out.server = SluiceProcess::start(top + "routes:\n  - match: GET /api/search\n" + route +
                                    "    limits: [{capacity: 1, refill_rate: 1/h}]\n");
  if (out.server == nullptr) return out;
  const Headers h = {{"X-Original-Method", "GET"}, {"X-Original-URI", "/api/search"}};
  EXPECT_EQ(out.server->get("/v1/auth", h).status, 204);
  out.response = out.server->get("/v1/auth", h);
  return out;
}

TEST(DecisionApiDenyStatus, AuthDenyStatusIsConfigurable) {
  const SecondAuth a = second_auth("auth_deny_status: 403\n", "");
  ASSERT_NE(a.server, nullptr);
  EXPECT_EQ(a.response.status, 403);
  EXPECT_TRUE(a.response.has_header("Retry-After"));
  EXPECT_EQ(a.response.header("X-RateLimit-Remaining"), "0");
}

// A shadow route never denies: /v1/auth answers 204 with the real headers
// (nginx then lets the request through) and counts shadow_denied.
TEST(DecisionApiShadow, AuthOnAShadowRouteAllowsWithTheRealHeaders) {
  const SecondAuth a = second_auth("headers: [legacy]\n", "    shadow: true\n");
  ASSERT_NE(a.server, nullptr);
  EXPECT_EQ(a.response.status, 204);
  EXPECT_EQ(a.response.header("X-RateLimit-Remaining"), "0");
  EXPECT_EQ(
      a.server->metric(R"(sluice_requests_total{route="GET /api/search",result="shadow_denied"})"),
      1);
}

}  // namespace
}  // namespace sluice::test
