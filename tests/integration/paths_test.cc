// Every spelling of a resource shares its limit (docs/DESIGN.md §5): no path
// variant may bypass a limit.
#include "test_support.h"

namespace sluice::test {
namespace {

const std::string kYaml = R"(
headers: [legacy]
default:
  limits: [{capacity: 1000, refill_rate: 1/h}]
routes:
  - match: GET /api/search
    limits: [{capacity: 7, refill_rate: 1/h}]
)";

TEST(PathVariants, AllSpellingsShareOneLimit) {
  auto server = SluiceProcess::start(kYaml);
  ASSERT_NE(server, nullptr);
  const std::vector<std::string> variants = {
      "/api/search/",         // trailing slash
      "//api//search",        // repeated slashes
      "/api/./search",        // a "." segment
      "/api/x/../search",     // a ".." segment
      "/api/%73earch",        // a percent-encoded unreserved letter ('s')
      "/api/search?q=shoes",  // a query string
      "/api/search",
  };
  auto connection = server->connect();
  int64_t expected_remaining = 6;
  for (const std::string& v : variants) {
    const HttpResponse r = connection->request("GET", v);
    EXPECT_EQ(r.status, 200) << v;
    // The route's limit (7), not the default's (1000), counts each variant.
    EXPECT_EQ(r.header("X-RateLimit-Limit"), "7") << v;
    EXPECT_EQ(r.header("X-RateLimit-Remaining"), std::to_string(expected_remaining--)) << v;
  }
  for (const std::string& v : variants) {
    EXPECT_EQ(connection->request("GET", v).status, 429) << v;
  }
}

TEST(PathVariants, PathsAreCaseSensitiveByDefault) {
  auto server = SluiceProcess::start(kYaml);
  ASSERT_NE(server, nullptr);
  // A different case is a different resource: the default applies.
  const HttpResponse r = server->get("/API/SEARCH");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("X-RateLimit-Limit"), "1000");
}

TEST(PathVariants, CaseInsensitivePathsShareOneLimit) {
  auto server = SluiceProcess::start("case_insensitive_paths: true\n" + kYaml);
  ASSERT_NE(server, nullptr);
  auto connection = server->connect();
  EXPECT_EQ(connection->request("GET", "/API/Search").header("X-RateLimit-Limit"), "7");
  EXPECT_EQ(connection->request("GET", "/api/SEARCH/").header("X-RateLimit-Remaining"), "5");
}

}  // namespace
}  // namespace sluice::test
