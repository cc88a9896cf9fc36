// A route's `cost:` with `store.backend: redis`, through two `sluice serve`
// processes on one redis-server (tests/redis/redis_server.h): admission by
// estimate is exact across instances, and a settle made by one instance
// (one script call) is what the other sees next.
#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <string>
#include <vector>

#include "gateway_support.h"
#include "http_client.h"
#include "redis_server.h"
#include "scripted_upstream.h"
#include "sluice_process.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;
using testing::RedisServer;

const std::string kSettled = R"(sluice_cost_settled_total{route="POST /v1/chat/completions"})";

// Two gateways on `redis` whose route charges `estimate` on a bucket of 600
// that refills a token a day.
std::vector<std::unique_ptr<SluiceProcess>> two_gateways(const RedisServer& redis,
                                                         const std::string& upstream,
                                                         int estimate) {
  const std::string yaml =
      "store:\n  backend: redis\n  redis:\n    addresses: [" + redis.address() +
      "]\n    timeout: 2s\n    on_failure: deny\nserver:\n  threads: 2\nupstream: " + upstream +
      "\nheaders: [legacy]\nroutes:\n  - match: POST /v1/chat/completions\n    cost: {header: "
      "x-usage, estimate: " +
      std::to_string(estimate) + "}\n    limits: [{capacity: 600, refill_rate: 1/d}]\n";
  std::vector<std::unique_ptr<SluiceProcess>> servers;
  for (int i = 0; i < 2; ++i) {
    servers.push_back(SluiceProcess::start(yaml));
    if (servers.back() == nullptr) return {};
    EXPECT_TRUE(servers.back()->wait_for_readyz(200, 10s)) << servers.back()->log();
  }
  return servers;
}

TEST(RedisCost, TwentyConcurrentRequestsFromTwoInstancesAdmitExactlyTwelve) {
  SLUICE_REQUIRE_REDIS();
  RedisServer redis;
  ASSERT_TRUE(redis.start());
  ScriptedUpstream upstream;
  ASSERT_NE(upstream.port(), 0);
  upstream.answer_body("x-usage: 50\r\n", "ok");
  const auto servers = two_gateways(redis, upstream.url(), 50);
  ASSERT_EQ(servers.size(), 2u);
  std::vector<std::future<int>> statuses;
  for (int i = 0; i < 20; ++i) {
    statuses.push_back(std::async(std::launch::async, [s = servers[i % 2].get()] {
      return s->post("/v1/chat/completions", "{}").status;
    }));
  }
  int admitted = 0;
  int denied = 0;
  for (auto& f : statuses) {
    const int status = f.get();
    admitted += status == 200;
    denied += status == 429;
  }
  // 600 / 50.
  EXPECT_EQ(admitted, 12);
  EXPECT_EQ(denied, 8);
  EXPECT_EQ(upstream.requests(), 12);
  for (const auto& s : servers) EXPECT_EQ(s->metric("sluice_store_errors_total"), 0) << s->log();
}

TEST(RedisCost, OneInstancesSettleIsWhatTheOtherSeesNext) {
  SLUICE_REQUIRE_REDIS();
  RedisServer redis;
  ASSERT_TRUE(redis.start());
  ScriptedUpstream upstream;
  ASSERT_NE(upstream.port(), 0);
  const auto servers = two_gateways(redis, upstream.url(), 10);
  ASSERT_EQ(servers.size(), 2u);
  // 600 - 10 admitted, 110 used: 100 more, 490 left.
  upstream.answer_body("x-usage: 110\r\n", "ok");
  EXPECT_EQ(servers[0]->post("/v1/chat/completions", "{}").header("X-RateLimit-Remaining"), "590");
  // 490 - 10 admitted, none used: 10 back, 490.
  upstream.answer_body("x-usage: 0\r\n", "ok");
  EXPECT_EQ(servers[1]->post("/v1/chat/completions", "{}").header("X-RateLimit-Remaining"), "480");
  // 490 - 10 admitted; then 1000 used: 990 more, 510 in debt.
  upstream.answer_body("x-usage: 1000\r\n", "ok");
  EXPECT_EQ(servers[0]->post("/v1/chat/completions", "{}").header("X-RateLimit-Remaining"), "480");
  // It waits for 510 + 10 at a token a day: 520 days.
  const HttpResponse denied = servers[1]->post("/v1/chat/completions", "{}");
  EXPECT_EQ(denied.status, 429);
  // Less the refill of the seconds the test took.
  const long retry_after = std::stol(denied.header("Retry-After").value_or("0"));
  EXPECT_LE(retry_after, 520L * 86400);
  EXPECT_GT(retry_after, 520L * 86400 - 60);
  EXPECT_EQ(servers[0]->metric(kSettled) + servers[1]->metric(kSettled), 3);
  for (const auto& s : servers) EXPECT_EQ(s->metric("sluice_store_errors_total"), 0) << s->log();
}

}  // namespace
}  // namespace sluice::test
