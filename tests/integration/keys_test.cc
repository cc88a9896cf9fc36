// Client keys from cookies and query parameters, through the real binary:
// one value is one key however it is spelled, and a value given twice is
// no key at all (the client address counts instead).
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

}  // namespace
}  // namespace sluice::test
