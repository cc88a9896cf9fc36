// `sluice serve` with the Redis store run like infrastructure: the real binary
// against real redis-server (and redis-sentinel) processes started here on
// free loopback ports and stopped by PID.
//
//   - the store connects at start: with rediss:// and an ACL user, through a
//     relay that takes 300 ms to let a new connection's bytes through (a
//     Redis far away) and a 100 ms timeout, the first decisions after start
//     are Redis's: exactly the capacity allowed, none per on_failure;
//   - an unreachable Redis: /readyz 503, /healthz 200, decisions per
//     on_failure, the connections counted down;
//   - a Redis that refuses writes (maxmemory reached, noeviction): /readyz
//     503, a log line and a metric, until memory is freed;
//   - Sentinel: the master found by asking the sentinels, decisions exact;
//     a sentinel config naming an unknown master stops the start.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "http_client.h"
#include "redis_server.h"
#include "slow_start_proxy.h"
#include "sluice_process.h"
#include "tls/test_certs.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::RedisServer;

const std::vector<std::pair<std::string, std::string>> kJson = {
    {"Content-Type", "application/json"}};

const std::string kTwoPolicy = R"(
policies:
  p: {algorithm: token_bucket, capacity: 2, refill_rate: 1/d}
)";

int check(const SluiceProcess& server, const std::string& key) {
  return server.post("/v1/check", R"({"policy":"p","key":")" + key + R"("})", kJson).status;
}

TEST(RedisReadiness, TheFirstDecisionsAfterStartAreRedissOverASlowTlsConnection) {
  SLUICE_REQUIRE_REDIS();
  const testing::TestCerts certs;
  ASSERT_TRUE(certs.ok()) << certs.error();
  RedisServer redis;
  redis.use_tls({&certs, false});
  ASSERT_TRUE(redis.start());
  ASSERT_TRUE(redis.command({"ACL", "SETUSER", "alice", "on", ">s3cret", "~*", "&*", "+@all"}));
  testing::SlowStartProxy far(redis.tls_port(), 300ms);
  auto server = SluiceProcess::start(
      "store:\n  backend: redis\n  redis:\n    url: rediss://alice:s3cret@127.0.0.1:" +
      std::to_string(far.port()) + "\n    tls: {ca_file: " + certs.ca() +
      "}\n    timeout: 100ms\n    on_failure: deny\nserver:\n  threads: 2\n" + kTwoPolicy);
  ASSERT_NE(server, nullptr);
  // No wait for /readyz: a client that comes at once gets Redis's answers.
  EXPECT_EQ(check(*server, "k"), 200);
  EXPECT_EQ(check(*server, "k"), 200);
  EXPECT_EQ(check(*server, "k"), 429);
  EXPECT_EQ(server->metric("sluice_store_errors_total"), 0) << server->log();
  EXPECT_EQ(server->admin_get("/readyz").status, 200);
  // Two worker threads' and the store's own, all up.
  EXPECT_EQ(server->metric(R"(sluice_redis_connections{peer="node",state="up"})"), 3)
      << server->admin_get("/metrics").body;
  EXPECT_EQ(server->metric(R"(sluice_redis_connections{peer="node",state="down"})"), 0);
}

TEST(RedisReadiness, AnUnreachableRedisLeavesReadyz503AndHealthz200) {
  SLUICE_REQUIRE_REDIS();
  const int nothing = testing::free_port();
  auto server = SluiceProcess::start(
      "store:\n  backend: redis\n  redis:\n    addresses: [127.0.0.1:" + std::to_string(nothing) +
      "]\n    on_failure: allow\nserver:\n  threads: 2\n" + kTwoPolicy);
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->admin_get("/healthz").status, 200);
  EXPECT_EQ(server->admin_get("/readyz").status, 503);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(check(*server, "k"), 200);  // on_failure: allow
  EXPECT_EQ(server->metric(R"(sluice_requests_total{route="policy:p",result="error"})"), 3);
  EXPECT_EQ(server->metric(R"(sluice_redis_connections{peer="node",state="up"})"), 0);
  EXPECT_EQ(server->metric(R"(sluice_redis_connections{peer="node",state="down"})"), 3);
  EXPECT_TRUE(server->wait_for_log("redis is not answering yet")) << server->log();
  EXPECT_EQ(server->admin_get("/readyz").status, 503);
  EXPECT_EQ(server->admin_get("/healthz").status, 200);
}

TEST(RedisReadiness, ARedisThatRefusesWritesMakesReadyz503UntilMemoryIsFreed) {
  SLUICE_REQUIRE_REDIS();
  RedisServer redis({"--maxmemory", "2mb", "--maxmemory-policy", "noeviction"});
  ASSERT_TRUE(redis.start());
  auto server = SluiceProcess::start("store:\n  backend: redis\n  redis:\n    addresses: [" +
                                     redis.address() +
                                     "]\n    timeout: 2s\n    on_failure: allow\n"
                                     "    deny_cache: false\nserver:\n  threads: 2\n" +
                                     kTwoPolicy);
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(server->wait_for_readyz(200, 10s)) << server->log();
  EXPECT_EQ(server->metric("sluice_redis_writes_refused"), 0);

  testing::Reply filled = redis.command(
      {"EVAL",
       "for i = 1, 40000 do redis.call('SET', 'fill:' .. i, string.rep('x', 100)) end return 1",
       "0"});
  ASSERT_TRUE(filled && filled->type == REDIS_REPLY_INTEGER);
  EXPECT_TRUE(server->wait_for_readyz(503, 10s)) << server->log();
  EXPECT_EQ(server->metric("sluice_redis_writes_refused"), 1);
  EXPECT_TRUE(server->wait_for_log("refuses writes")) << server->log();
  // Decisions are on_failure's (allow): every one, counted as oom errors.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(check(*server, "k"), 200);
  EXPECT_EQ(server->metric(R"(sluice_requests_total{route="policy:p",result="error"})"), 3);
  EXPECT_EQ(server->metric(R"(sluice_redis_errors_total{kind="oom"})"), 3);
  EXPECT_EQ(server->admin_get("/healthz").status, 200);

  ASSERT_EQ(redis.text({"FLUSHALL"}), "OK");
  EXPECT_TRUE(server->wait_for_readyz(200, 10s)) << server->log();
  EXPECT_EQ(server->metric("sluice_redis_writes_refused"), 0);
  EXPECT_TRUE(server->wait_for_log("accepts writes again")) << server->log();
  EXPECT_EQ(check(*server, "k"), 200);
  EXPECT_EQ(check(*server, "k"), 200);
  EXPECT_EQ(check(*server, "k"), 429);
}

class RedisSentinelServe : public ::testing::Test {
 protected:
  void SetUp() override {
    SLUICE_REQUIRE_REDIS();
    ASSERT_TRUE(group_.start());
  }

  std::string sentinel_yaml(const std::string& master) const {
    std::string list;
    for (const std::string& a : group_.sentinel_addresses()) list += (list.empty() ? "" : ", ") + a;
    return "store:\n  backend: redis\n  redis:\n    sentinel:\n      master: " + master +
           "\n      addresses: [" + list +
           "]\n    timeout: 2s\n    on_failure: deny\nserver:\n  threads: 2\n" + kTwoPolicy;
  }

  testing::RedisSentinelGroup group_;
};

TEST_F(RedisSentinelServe, TheMasterIsAskedFromTheSentinels) {
  auto server = SluiceProcess::start(sentinel_yaml(testing::RedisSentinelGroup::kMasterName));
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(check(*server, "k"), 200);
  EXPECT_EQ(check(*server, "k"), 200);
  EXPECT_EQ(check(*server, "k"), 429);
  EXPECT_EQ(server->admin_get("/readyz").status, 200);
  EXPECT_TRUE(server->wait_for_log("master 'mymaster' at " + group_.master_address()))
      << server->log();
  // The decisions were written on the master.
  EXPECT_GE(group_.master().script_calls(), 3);
}

TEST_F(RedisSentinelServe, AnUnknownMasterStopsTheStart) {
  const std::string yaml = sentinel_yaml("nosuchmaster");
  // SluiceProcess::start fails the test when the server exits: run it by hand.
  const std::string dir = ::testing::TempDir();
  const std::string config = dir + "/sluice-unknown-master.yaml";
  {
    FILE* f = std::fopen(config.c_str(), "w");
    ASSERT_NE(f, nullptr);
    const std::string text = "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\n" + yaml;
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  }
  const std::string command = std::string(SLUICE_BINARY) + " serve --config " + config + " 2>&1";
  FILE* out = ::popen(command.c_str(), "r");
  ASSERT_NE(out, nullptr);
  std::string log;
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, out)) > 0;) log.append(buffer, n);
  const int status = ::pclose(out);
  std::remove(config.c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << log;
  EXPECT_NE(log.find("store.redis.sentinel.master: redis store: the sentinels (" +
                     group_.sentinel_addresses().front()),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("know no master named 'nosuchmaster'"), std::string::npos) << log;
}

}  // namespace
}  // namespace sluice::test
