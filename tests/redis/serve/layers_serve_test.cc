// Quotas in layers and penalties that grow with `store.backend: redis`: the
// real binary on a redis-server started here (tests/redis/redis_server.h).
// Two servers share one org's quota, each user's own, all-or-nothing; a
// block grows in Redis and /admin/reset forgets it. The exact traces on a
// Redis store are the store conformance table's (tests/redis).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "redis_server.h"
#include "test_support.h"
#include "wait_until.h"

namespace sluice::test {
namespace {

using testing::RedisServer;
using Headers = std::vector<std::pair<std::string, std::string>>;

std::string yaml_on(const RedisServer& redis) {
  return "store:\n  backend: redis\n  redis:\n    addresses: [" + redis.address() +
         "]\n    timeout: 2s\n    on_failure: deny\nheaders: [legacy]\n" + R"(
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
}

TEST(LayersOnRedis, TwoServersShareAnOrgsQuotaAndADenialChargesNothingElse) {
  SLUICE_REQUIRE_REDIS();
  RedisServer redis;
  ASSERT_TRUE(redis.start());
  auto a = SluiceProcess::start(yaml_on(redis));
  auto b = SluiceProcess::start(yaml_on(redis));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const Headers alice{{"X-User", "alice"}, {"X-Org", "acme"}};
  const Headers bob{{"X-User", "bob"}, {"X-Org", "acme"}};
  const Headers bob_elsewhere{{"X-User", "bob"}, {"X-Org", "other"}};
  EXPECT_EQ(count_allowed(*a, "POST", "/v1/chat", 2, alice, "{}"), 2);
  // Alice's own limit denies on the other server too; the org is not charged.
  const HttpResponse third = b->connect()->request("POST", "/v1/chat", alice, "{}");
  EXPECT_EQ(third.status, 429);
  EXPECT_EQ(third.body, rate_limited_body("user"));
  // Bob gets the org's last one, then the org denies him.
  EXPECT_EQ(count_allowed(*b, "POST", "/v1/chat", 1, bob, "{}"), 1);
  const HttpResponse org = a->connect()->request("POST", "/v1/chat", bob, "{}");
  EXPECT_EQ(org.status, 429);
  EXPECT_EQ(org.body, rate_limited_body("org"));
  // That denial charged nothing to Bob's own limit: one left.
  EXPECT_EQ(count_allowed(*a, "POST", "/v1/chat", 3, bob_elsewhere, "{}"), 1);
}

TEST(LayersOnRedis, ABlockGrowsInRedisAndAResetForgetsIt) {
  SLUICE_REQUIRE_REDIS();
  RedisServer redis;
  ASSERT_TRUE(redis.start());
  auto server = SluiceProcess::start(yaml_on(redis));
  ASSERT_NE(server, nullptr);
  auto c = server->connect();
  const Headers mallory{{"X-User", "mallory"}};
  EXPECT_EQ(c->request("POST", "/login", mallory, "x").status, 200);
  const HttpResponse first = c->request("POST", "/login", mallory, "x");
  EXPECT_EQ(first.status, 429);
  EXPECT_EQ(first.header("Retry-After"), "1");
  // The first request after the 1 s block is denied by the full window
  // again: a block of 3 s.
  HttpResponse r;
  ASSERT_TRUE(wait_until([&] {
    r = c->request("POST", "/login", mallory, "x");
    return r.header("Retry-After") != "1";
  }));
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(r.header("Retry-After"), "3");
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
