// What a client sends never sizes what Redis keeps: `sluice serve` on a real
// redis-server with a small maxmemory, flooded with a fresh 15 KB API key per
// request (the header-keyed route of an attack that used to fill Redis, after
// which every decision failed and on_failure: allow let every client through).
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "http_client.h"
#include "redis_server.h"
#include "sluice_process.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;
using testing::RedisServer;

long long used_memory(const RedisServer& redis) {
  const std::string info = redis.text({"INFO", "memory"});
  const std::string field = "used_memory:";
  const size_t at = info.find(field);
  if (at == std::string::npos) return -1;
  return std::stoll(info.substr(at + field.size()));
}

bool ready_within(const SluiceProcess& server, std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (server.admin_get("/readyz").status == 200) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

TEST(RedisServeKeys, AFloodOfLongKeysNeitherFillsRedisNorOpensTheLimit) {
  SLUICE_REQUIRE_REDIS();
  // 4 MB leaves Redis room for about 190 keys of 15 KB.
  RedisServer redis({"--maxmemory", "4mb", "--maxmemory-policy", "noeviction"});
  ASSERT_TRUE(redis.start());
  auto server = SluiceProcess::start("store:\n  backend: redis\n  redis:\n    addresses: [" +
                                     redis.address() +
                                     "]\n    timeout: 2s\n    on_failure: allow\n"
                                     "headers: none\n"
                                     "routes:\n"
                                     "  - match: GET /reports\n"
                                     "    key: header:x-api-key\n"
                                     "    limits: [{capacity: 3, refill_rate: 1/h}]\n");
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(ready_within(*server, 10s)) << server->log();

  const long long before = used_memory(redis);
  ASSERT_GT(before, 0);
  constexpr int kKeys = 400;
  auto connection = server->connect();
  for (int i = 0; i < kKeys; ++i) {
    const std::string key = std::to_string(i) + std::string(15'000, 'k');
    ASSERT_EQ(connection->request("GET", "/reports", {{"X-Api-Key", key}}).status, 200) << i;
  }
  // Every key decided in Redis, none refused for memory.
  EXPECT_EQ(server->metric("sluice_store_errors_total"), 0);
  EXPECT_EQ(redis.integer({"DBSIZE"}), kKeys);
  const long long per_key = (used_memory(redis) - before) / kKeys;
  EXPECT_LT(per_key, 1024) << "bytes of Redis memory per distinct client key";

  // A new client on the 3-per-hour route still gets exactly 3.
  const std::string fresh = "fresh" + std::string(15'000, 'k');
  int allowed = 0;
  for (int i = 0; i < 6; ++i) {
    const HttpResponse r = connection->request("GET", "/reports", {{"X-Api-Key", fresh}});
    if (r.status == 200) ++allowed;
  }
  EXPECT_EQ(allowed, 3);
}

}  // namespace
}  // namespace sluice::test
