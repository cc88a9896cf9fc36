// Quotas in layers (a limit with its own `key:`) and penalties that grow
// (`block: {first, factor, max, forget_after}`) through the real server. The
// exact arithmetic of both, on every store with an injected clock, is in the
// unit tests (layers_test.cc) and the store conformance table.
#include "test_support.h"
#include "wait_until.h"

namespace sluice::test {
namespace {

const std::string kYaml = R"(
headers: [legacy]
routes:
  - match: POST /v1/chat
    key: header:x-user
    limits:
      - {name: user, capacity: 2, refill_rate: 1/d}
      - {name: org, key: header:x-org, capacity: 3, refill_rate: 1/d}
  - match: POST /login
    key: header:x-user
    limits:
      - {algorithm: fixed_window, limit: 1, window: 1d,
         block: {first: 1s, factor: 3, max: 1h, forget_after: 1h}}
)";

using Headers = std::vector<std::pair<std::string, std::string>>;

TEST(Layers, TwoUsersShareTheirOrgsQuotaAndADenialChargesNothingElse) {
  auto server = SluiceProcess::start(kYaml);
  ASSERT_NE(server, nullptr);
  auto c = server->connect();
  const Headers alice{{"X-User", "alice"}, {"X-Org", "acme"}};
  const Headers bob{{"X-User", "bob"}, {"X-Org", "acme"}};
  const Headers bob_elsewhere{{"X-User", "bob"}, {"X-Org", "other"}};
  EXPECT_EQ(c->request("POST", "/v1/chat", alice, "{}").status, 200);
  EXPECT_EQ(c->request("POST", "/v1/chat", alice, "{}").status, 200);
  // Alice's own limit denies; the org's is not charged...
  const HttpResponse third = c->request("POST", "/v1/chat", alice, "{}");
  EXPECT_EQ(third.status, 429);
  EXPECT_EQ(third.body, rate_limited_body("user"));
  // ...so Bob gets its last one, then the org denies him.
  const HttpResponse last = c->request("POST", "/v1/chat", bob, "{}");
  EXPECT_EQ(last.status, 200);
  EXPECT_EQ(last.header("X-RateLimit-Limit"), "3");
  EXPECT_EQ(last.header("X-RateLimit-Remaining"), "0");
  const HttpResponse org = c->request("POST", "/v1/chat", bob, "{}");
  EXPECT_EQ(org.status, 429);
  EXPECT_EQ(org.body, rate_limited_body("org"));
  EXPECT_EQ(org.header("Retry-After"), "86400");
  // Bob's own limit was not charged by that denial: one left.
  EXPECT_EQ(count_allowed(*server, "POST", "/v1/chat", 3, bob_elsewhere, "{}"), 1);
}

TEST(Layers, ABlockGrowsForARepeatOffenderAndAResetForgetsIt) {
  auto server = SluiceProcess::start(kYaml);
  ASSERT_NE(server, nullptr);
  auto c = server->connect();
  const Headers mallory{{"X-User", "mallory"}};
  EXPECT_EQ(c->request("POST", "/login", mallory, "x").status, 200);
  const HttpResponse first = c->request("POST", "/login", mallory, "x");
  EXPECT_EQ(first.status, 429);
  EXPECT_EQ(first.header("Retry-After"), "1");
  // The window stays full for a day: the first request after the 1 s block
  // ends is denied again, and starts a block 3 times as long.
  HttpResponse r;
  ASSERT_TRUE(wait_until([&] {
    r = c->request("POST", "/login", mallory, "x");
    return r.header("Retry-After") != "1";
  }));
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(r.header("Retry-After"), "3");
  // /admin/reset lifts the block and forgets its history.
  const HttpResponse reset =
      server->admin_post("/admin/reset", R"({"route":"POST /login","client":"mallory"})");
  EXPECT_EQ(reset.status, 200) << reset.body;
  EXPECT_EQ(c->request("POST", "/login", mallory, "x").status, 200);
  const HttpResponse again = c->request("POST", "/login", mallory, "x");
  EXPECT_EQ(again.status, 429);
  EXPECT_EQ(again.header("Retry-After"), "1");
}

}  // namespace
}  // namespace sluice::test
