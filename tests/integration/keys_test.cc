// Client keys from cookies, query parameters and JWT claims, through the
// real binary: one value is one key however it is spelled, and a value given
// twice (or a token that does not verify) is no key at all (the client
// address counts instead).
#include "../unit/jwt_tokens.h"
#include "test_support.h"

namespace sluice::test {
namespace {

TEST(Keys, AQueryParameterKeysTheRouteWhateverItsEncoding) {
  auto server = SluiceProcess::start(R"(
routes:
  - match: GET /search
    key: query:api_key
    limits: [{capacity: 2, refill_rate: 1/h}]
)");
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->get("/search?api_key=abc&q=1").status, 200);
  EXPECT_EQ(server->get("/search?q=2&api_key=%61bc").status, 200);
  EXPECT_EQ(server->get("/search?api%5Fkey=abc").status, 429);
  EXPECT_EQ(server->get("/search?api_key=other").status, 200);
  // Ambiguous: keyed by the client address (127.0.0.1), which has 2 to spend.
  EXPECT_EQ(server->get("/search?api_key=abc&api_key=fresh1").status, 200);
  EXPECT_EQ(server->get("/search?api_key=abc&api_key=fresh2").status, 200);
  EXPECT_EQ(server->get("/search?api_key=abc&api_key=fresh3").status, 429);
}

TEST(Keys, ACookieKeysTheRoute) {
  auto server = SluiceProcess::start(R"(
routes:
  - match: GET /a
    key: cookie:sid
    limits: [{capacity: 1, refill_rate: 1/h}]
)");
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->get("/a", {{"Cookie", "theme=dark; sid=s1"}}).status, 200);
  EXPECT_EQ(server->get("/a", {{"Cookie", "sid=s1"}}).status, 429);
  EXPECT_EQ(server->get("/a", {{"Cookie", "sid=s2; theme=light"}}).status, 200);
  // Two Cookie fields naming sid: the client address counts (1 to spend).
  EXPECT_EQ(server->get("/a", {{"Cookie", "sid=s1"}, {"Cookie", "sid=s3"}}).status, 200);
  EXPECT_EQ(server->get("/a", {{"Cookie", "sid=s1"}, {"Cookie", "sid=s4"}}).status, 429);
  // The same client key reset as the cookie value is written.
  EXPECT_EQ(server->admin_post("/admin/reset", R"({"route":"GET /a","client":"s1"})").status, 200);
  EXPECT_EQ(server->get("/a", {{"Cookie", "sid=s1"}}).status, 200);
}

TEST(Keys, AVerifiedJwtClaimKeysTheRouteAndAForgedOneCountsAsTheAddress) {
  const SigningKey key = SigningKey::ec("k1");
  auto server = SluiceProcess::start(R"(
jwt:
  jwks_file: jwks.json
  issuer: https://auth.example.com
  audience: api
routes:
  - match: GET /a
    key: jwt:sub
    limits: [{capacity: 2, refill_rate: 1/h}]
)",
                                     "127.0.0.1", {{"jwks.json", jwks({key.jwk()})}});
  ASSERT_NE(server, nullptr);
  auto bearer = [](const std::string& token) {
    return std::vector<std::pair<std::string, std::string>>{{"Authorization", "Bearer " + token}};
  };
  const std::string claims = R"(,"iss":"https://auth.example.com","aud":"api","exp":4102444800})";
  const std::string alice = key.token(R"({"sub":"alice")" + claims);
  EXPECT_EQ(server->get("/a", bearer(alice)).status, 200);
  EXPECT_EQ(server->get("/a", bearer(alice)).status, 200);
  EXPECT_EQ(server->get("/a", bearer(alice)).status, 429);
  EXPECT_EQ(server->get("/a", bearer(key.token(R"({"sub":"bob")" + claims))).status, 200);
  // Tokens that do not verify (another key, expired, another audience) all
  // count as the client address, 127.0.0.1: 2 to spend, then 429.
  const SigningKey stranger = SigningKey::ec("k1");
  EXPECT_EQ(server->get("/a", bearer(stranger.token(R"({"sub":"new1")" + claims))).status, 200);
  EXPECT_EQ(server
                ->get("/a", bearer(key.token(
                                R"({"sub":"new2","iss":"https://auth.example.com","aud":"api",)"
                                R"("exp":1000000000})")))
                .status,
            200);
  EXPECT_EQ(
      server
          ->get("/a",
                bearer(key.token(R"({"sub":"new3","iss":"https://auth.example.com","aud":"web"})")))
          .status,
      429);
  EXPECT_EQ(server->get("/a").status, 429);
}

// Long values are stored as their digest: the same long value is still one
// key, so one over its limit stays denied, and /admin/reset finds it.
TEST(Keys, AnExhaustedLongKeyStaysDeniedAndResetsByItsValue) {
  auto server = SluiceProcess::start(R"(
headers: none
policies:
  report: {capacity: 2, refill_rate: 1/h}
routes:
  - match: GET /a
    key: header:x-api-key
    limits: [{capacity: 3, refill_rate: 1/h}]
)");
  ASSERT_NE(server, nullptr);
  const std::string long_key = std::string(15'000, 'k') + "1";
  auto connection = server->connect();
  std::vector<int> statuses;
  for (int i = 0; i < 5; ++i)
    statuses.push_back(connection->request("GET", "/a", {{"X-Api-Key", long_key}}).status);
  EXPECT_EQ(statuses, (std::vector<int>{200, 200, 200, 429, 429}));
  EXPECT_EQ(server->get("/a", {{"X-Api-Key", std::string(15'000, 'k') + "2"}}).status, 200);
  EXPECT_EQ(
      server->admin_post("/admin/reset", R"({"route":"GET /a","client":")" + long_key + R"("})")
          .status,
      200);
  EXPECT_EQ(server->get("/a", {{"X-Api-Key", long_key}}).status, 200);

  // /v1/check: a 10 KB key spends one quota too.
  const Headers json = {{"Content-Type", "application/json"}};
  const std::string check = R"({"policy":"report","key":")" + std::string(10'000, 'u') + R"("})";
  EXPECT_EQ(server->post("/v1/check", check, json).status, 200);
  EXPECT_EQ(server->post("/v1/check", check, json).status, 200);
  EXPECT_EQ(server->post("/v1/check", check, json).status, 429);
}

}  // namespace
}  // namespace sluice::test
