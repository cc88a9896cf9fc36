// Exact rate-limit headers and 429 bodies (docs/DESIGN.md §6, docs/HEADERS.md).
#include <chrono>
#include <cmath>
#include <cstdint>

#include "test_support.h"

namespace sluice::test {
namespace {

const std::string kBothModesYaml = R"(
headers: [legacy, draft]
policies:
  login: {capacity: 2, refill_rate: 1/h}
routes:
  - match: GET /api/search
    limits: [{capacity: 3, refill_rate: 1/h}]
  - match: GET /api/window
    limits: [{algorithm: fixed_window, limit: 2, window: 1h}]
  - match: POST /api/auth/login
    limits: [login, {algorithm: fixed_window, limit: 100, window: 1h}]
)";

double epoch_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

int64_t header_int(const HttpResponse& r, const std::string& name) {
  const auto v = r.header(name);
  EXPECT_TRUE(v.has_value()) << "missing " << name;
  return v ? std::stoll(*v) : -1;
}

TEST(Headers, AllowedResponseCarriesLegacyAndDraftFields) {
  auto server = SluiceProcess::start(kBothModesYaml);
  ASSERT_NE(server, nullptr);
  const double before = epoch_seconds();
  const HttpResponse r = server->get("/api/search");
  const double after = epoch_seconds();
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body, R"({"allowed":true})");
  EXPECT_EQ(r.header("Content-Type"), "application/json");
  EXPECT_EQ(r.header("X-RateLimit-Limit"), "3");
  EXPECT_EQ(r.header("X-RateLimit-Remaining"), "2");
  // One token used at one per hour: fully restored 3600 s after the request,
  // as a Unix second rounded up.
  const int64_t reset = header_int(r, "X-RateLimit-Reset");
  EXPECT_GE(reset, static_cast<int64_t>(std::floor(before)) + 3600);
  EXPECT_LE(reset, static_cast<int64_t>(std::ceil(after)) + 3600);
  EXPECT_EQ(r.header("RateLimit-Policy"), R"("GET /api/search";q=3;w=10800)");
  EXPECT_EQ(r.header("RateLimit"), R"("GET /api/search";r=2;t=3600)");
  EXPECT_FALSE(r.has_header("Retry-After"));
}

TEST(Headers, DeniedResponseIsTheSeeds429WithRetryAfter) {
  auto server = SluiceProcess::start(kBothModesYaml);
  ASSERT_NE(server, nullptr);
  auto connection = server->connect();
  const auto start = std::chrono::steady_clock::now();
  const double before = epoch_seconds();
  for (int i = 0; i < 3; ++i) ASSERT_EQ(connection->request("GET", "/api/search").status, 200);
  const HttpResponse r = connection->request("GET", "/api/search");
  const double after = epoch_seconds();
  const auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_EQ(r.status, 429);
  EXPECT_EQ(r.body, rate_limited_body("GET /api/search"));
  EXPECT_EQ(r.header("Content-Type"), "application/json");
  EXPECT_EQ(r.header("X-RateLimit-Limit"), "3");
  EXPECT_EQ(r.header("X-RateLimit-Remaining"), "0");
  // Three tokens used: full again 3 h after the first request.
  const int64_t reset = header_int(r, "X-RateLimit-Reset");
  EXPECT_GE(reset, static_cast<int64_t>(std::floor(before)) + 10800);
  EXPECT_LE(reset, static_cast<int64_t>(std::ceil(after)) + 10800);
  EXPECT_EQ(r.header("RateLimit-Policy"), R"("GET /api/search";q=3;w=10800)");
  // The next token arrives 3600 s after the first request: less than that
  // remains, rounded up to whole seconds, so exactly 3600 while under a second passed.
  if (elapsed < std::chrono::milliseconds(900)) {
    EXPECT_EQ(r.header("Retry-After"), "3600");
    EXPECT_EQ(r.header("RateLimit"), R"("GET /api/search";r=0;t=3600)");
  } else {
    const int64_t retry = header_int(r, "Retry-After");
    EXPECT_GE(retry, 3600 - std::chrono::duration_cast<std::chrono::seconds>(elapsed).count() - 1);
    EXPECT_LE(retry, 3600);
  }
  // The denial consumed nothing: still denied, same Remaining.
  const HttpResponse again = connection->request("GET", "/api/search");
  EXPECT_EQ(again.status, 429);
  EXPECT_EQ(again.header("X-RateLimit-Remaining"), "0");
}

TEST(Headers, FixedWindowResetsAndRetriesAtTheWindowEnd) {
  auto server = SluiceProcess::start(kBothModesYaml);
  ASSERT_NE(server, nullptr);
  auto connection = server->connect();
  const double before = epoch_seconds();
  ASSERT_EQ(connection->request("GET", "/api/window").status, 200);
  ASSERT_EQ(connection->request("GET", "/api/window").status, 200);
  const HttpResponse r = connection->request("GET", "/api/window");
  const double after = epoch_seconds();
  ASSERT_EQ(r.status, 429);
  const int64_t window_end_early = (static_cast<int64_t>(before) / 3600 + 1) * 3600;
  const int64_t window_end_late = (static_cast<int64_t>(after) / 3600 + 1) * 3600;
  if (window_end_early != window_end_late) GTEST_SKIP() << "the test straddled a window boundary";
  // Windows are aligned to the epoch: the limit is restored at the next full hour.
  EXPECT_EQ(header_int(r, "X-RateLimit-Reset"), window_end_early);
  const int64_t retry = header_int(r, "Retry-After");
  EXPECT_GE(retry, static_cast<int64_t>(std::ceil(window_end_early - after)));
  EXPECT_LE(retry, static_cast<int64_t>(std::ceil(window_end_early - before)));
  EXPECT_GE(retry, 1);
  EXPECT_EQ(r.header("RateLimit-Policy"), R"("GET /api/window";q=2;w=3600)");
}

TEST(Headers, SeveralLimitsAreListedAndTheMostRestrictiveIsReported) {
  auto server = SluiceProcess::start(kBothModesYaml);
  ASSERT_NE(server, nullptr);
  const HttpResponse r = server->post("/api/auth/login", "user=a");
  ASSERT_EQ(r.status, 200);
  // login has 1 left, the window 99: the legacy fields report login.
  EXPECT_EQ(r.header("X-RateLimit-Limit"), "2");
  EXPECT_EQ(r.header("X-RateLimit-Remaining"), "1");
  EXPECT_EQ(r.header("RateLimit-Policy"),
            R"("login";q=2;w=7200, "POST /api/auth/login";q=100;w=3600)");
  const std::string rate = r.header("RateLimit").value_or("");
  EXPECT_EQ(rate.rfind(R"("login";r=1;t=3600, "POST /api/auth/login";r=99;t=)", 0), 0u) << rate;
}

TEST(Headers, LegacyOnlyConfigSendsNoDraftFields) {
  auto server = SluiceProcess::start(R"(
headers: [legacy]
routes:
  - match: GET /a
    limits: [{capacity: 1, refill_rate: 1/h}]
)");
  ASSERT_NE(server, nullptr);
  const HttpResponse ok = server->get("/a");
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.header("X-RateLimit-Remaining"), "0");
  EXPECT_FALSE(ok.has_header("RateLimit"));
  EXPECT_FALSE(ok.has_header("RateLimit-Policy"));
  const HttpResponse denied = server->get("/a");
  EXPECT_EQ(denied.status, 429);
  EXPECT_TRUE(denied.has_header("Retry-After"));
  EXPECT_FALSE(denied.has_header("RateLimit"));
}

TEST(Headers, DraftOnlyConfigSendsNoLegacyFieldsButRetryAfter) {
  auto server = SluiceProcess::start(R"(
headers: [draft]
routes:
  - match: GET /a
    limits: [{capacity: 1, refill_rate: 1/h}]
)");
  ASSERT_NE(server, nullptr);
  const HttpResponse ok = server->get("/a");
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.header("RateLimit"), R"("GET /a";r=0;t=3600)");
  EXPECT_FALSE(ok.has_header("X-RateLimit-Limit"));
  const HttpResponse denied = server->get("/a");
  EXPECT_EQ(denied.status, 429);
  EXPECT_EQ(denied.body, rate_limited_body("GET /a"));
  EXPECT_TRUE(denied.has_header("Retry-After"));
  EXPECT_FALSE(denied.has_header("X-RateLimit-Remaining"));
}

TEST(Headers, UnlimitedRequestsCarryNoRateLimitFields) {
  auto server = SluiceProcess::start(R"(
headers: [legacy, draft]
routes:
  - match: GET /a
    limits: [{capacity: 1, refill_rate: 1/h}]
)");
  ASSERT_NE(server, nullptr);
  // No route matches and there is no default: not limited.
  const HttpResponse r = server->get("/not-limited");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, R"({"allowed":true})");
  EXPECT_FALSE(r.has_header("X-RateLimit-Limit"));
  EXPECT_FALSE(r.has_header("RateLimit"));
}

TEST(Headers, GatewayWithoutAProxyAnswers502WithTheRateFields) {
  // An upstream nobody listens on (port 1 needs root to bind).
  auto server = SluiceProcess::start(R"(
upstream: http://127.0.0.1:1
headers: [legacy]
routes:
  - match: GET /a
    limits: [{capacity: 1, refill_rate: 1/h}]
)");
  ASSERT_NE(server, nullptr);
  const HttpResponse allowed = server->get("/a");
  EXPECT_EQ(allowed.status, 502);
  EXPECT_EQ(allowed.header("X-RateLimit-Remaining"), "0");
  // Limited before proxying: the next request is denied without reaching the upstream.
  const HttpResponse denied = server->get("/a");
  EXPECT_EQ(denied.status, 429);
  EXPECT_EQ(denied.body, rate_limited_body("GET /a"));
}

}  // namespace
}  // namespace sluice::test
