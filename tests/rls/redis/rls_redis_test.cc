// The Envoy RLS v3 API of the real `sluice serve` on `store.backend: redis`,
// against redis-server processes started here on free loopback ports and
// stopped by PID (tests/redis/redis_server.h):
//
//   - global exactness: two servers share one Redis; ShouldRateLimit calls
//     from several clients on one descriptor of requests_per_unit N are
//     answered OK exactly N times in total, every other one OVER_LIMIT;
//   - faults: Redis killed, then restarted; Redis paused (CLIENT PAUSE)
//     longer than the timeout. Every call is answered per
//     store.redis.on_failure (not with a gRPC error) within timeout + 50 ms,
//     the server keeps running, and limits hold again once Redis answers.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "redis_server.h"
#include "rls_serve_util.h"
#include "sluice_process.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;
using testing::RedisServer;

constexpr uint32_t kPerHour = 40;

const std::string kDescriptors = R"(domain: edge
descriptors:
  - key: tenant
    rate_limit:
      name: per_tenant
      unit: hour
      requests_per_unit: 40
)";

// RLS on a free port, deciding in the Redis at `address`.
std::string rls_redis_yaml(const DescriptorDir& dir, const std::string& address,
                           const std::string& on_failure, const std::string& timeout) {
  return "grpc: 127.0.0.1:0\nrls:\n  config_dir: " + dir.path() +
         "\nstore:\n  backend: redis\n  redis:\n    addresses: [" + address +
         "]\n    timeout: " + timeout + "\n    on_failure: " + on_failure +
         "\nserver:\n  threads: 2\n  shutdown_grace: 2s\n";
}

bool wait_ready(const SluiceProcess& server, bool want_ready, std::chrono::milliseconds timeout) {
  const auto until = SteadyClock::now() + timeout;
  while (SteadyClock::now() < until) {
    if (server.admin_get("/readyz").status == (want_ready ? 200 : 503)) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

pb::RateLimitRequest tenant(const std::string& name) {
  return request("edge", {{{"tenant", name}}});
}

// Each test: a Redis of its own on a free port, the descriptor folder, and
// enough of the hour left that the hourly window stays put.
class RlsRedis : public ::testing::Test {
 protected:
  void SetUp() override {
    SLUICE_REQUIRE_REDIS();
    ASSERT_TRUE(redis_.start());
    dir_.write("edge.yaml", kDescriptors);
    ensure_hour_left(60);
  }

  // A server on this Redis, ready (null, with a test failure, otherwise).
  std::unique_ptr<SluiceProcess> start_server(const std::string& on_failure,
                                              const std::string& timeout) {
    auto server = SluiceProcess::start(rls_redis_yaml(dir_, redis_.address(), on_failure, timeout));
    if (server != nullptr && !wait_ready(*server, true, 10s)) {
      ADD_FAILURE() << "not ready: " << server->log();
      return nullptr;
    }
    return server;
  }

  RedisServer redis_;
  DescriptorDir dir_;
};

// ---------------------------------------------------------------- exactness

TEST_F(RlsRedis, TwoServersOnOneRedisAnswerOkExactlyRequestsPerUnitTimes) {
  std::vector<std::unique_ptr<SluiceProcess>> servers;
  for (int i = 0; i < 2; ++i) {
    servers.push_back(start_server("deny", "2s"));
    ASSERT_NE(servers.back(), nullptr);
  }

  // 600 calls on one descriptor from 8 clients (4 per server, each on its
  // own channel), all at once.
  constexpr int kCalls = 600;
  std::atomic<int> next{0}, ok{0}, over{0}, errors{0};
  std::vector<std::thread> threads;
  for (const auto& server : servers) {
    const int port = grpc_port(server->log());
    ASSERT_GT(port, 0) << server->log();
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, port] {
        RlsClient client(port);
        while (next.fetch_add(1) < kCalls) {
          pb::RateLimitResponse response;
          if (!client.call(tenant("hot"), &response).ok()) {
            errors.fetch_add(1);
          } else if (response.overall_code() == OK) {
            ok.fetch_add(1);
          } else if (response.overall_code() == OVER) {
            over.fetch_add(1);
          }
        }
      });
    }
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok.load(), static_cast<int>(kPerHour));
  EXPECT_EQ(over.load(), kCalls - static_cast<int>(kPerHour));
  EXPECT_EQ(errors.load(), 0);

  // Every answer was Redis's decision, none came from on_failure.
  long long within = 0, beyond = 0;
  for (const auto& s : servers) {
    EXPECT_EQ(s->metric("sluice_rls_store_errors_total"), 0) << s->log();
    EXPECT_EQ(s->metric("sluice_rls_request_errors_total"), 0);
    within += s->metric(R"(sluice_rls_descriptors_total{result="ok"})");
    beyond += s->metric(R"(sluice_rls_descriptors_total{result="over_limit"})");
  }
  EXPECT_EQ(within, kPerHour);
  EXPECT_EQ(beyond, kCalls - kPerHour);

  // Either server, afterwards: nothing left.
  RlsClient late(grpc_port(servers[1]->log()));
  const pb::RateLimitResponse last = late.call(tenant("hot"));
  EXPECT_EQ(last.overall_code(), OVER);
  ASSERT_EQ(last.statuses_size(), 1);
  EXPECT_EQ(last.statuses(0).limit_remaining(), 0u);
  EXPECT_EQ(last.statuses(0).current_limit().name(), "per_tenant");
}

// ---------------------------------------------------------------- faults

constexpr auto kTimeout = 100ms;

// `count` calls on fresh descriptors while the store cannot answer: each is
// answered per on_failure within timeout + 50 ms, never with a gRPC error.
void expect_on_failure(RlsClient& client, bool allow, int count, const std::string& prefix) {
  for (int i = 0; i < count; ++i) {
    const auto start = SteadyClock::now();
    pb::RateLimitResponse r;
    const grpc::Status status = client.call(tenant(prefix + std::to_string(i)), &r);
    const auto took =
        std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - start);
    EXPECT_LE(took, kTimeout + 50ms) << "call " << i;
    ASSERT_TRUE(status.ok()) << status.error_code() << ": " << status.error_message();
    EXPECT_EQ(r.overall_code(), allow ? OK : OVER) << "call " << i;
    ASSERT_EQ(r.statuses_size(), 1);
    const auto& s = r.statuses(0);
    EXPECT_EQ(s.code(), allow ? OK : OVER);
    EXPECT_EQ(s.current_limit().requests_per_unit(), kPerHour);
    EXPECT_EQ(s.limit_remaining(), 0u);
    EXPECT_EQ(s.duration_until_reset().seconds(), allow ? 0 : 1);
  }
}

// Polls fresh descriptors until one gets a real decision (a first call leaves
// 39 of 40; on_failure answers say 0); how long that took, or a minute.
std::chrono::milliseconds time_until_enforced(RlsClient& client, const std::string& prefix) {
  const auto start = SteadyClock::now();
  for (int i = 0; SteadyClock::now() - start < 5s; ++i) {
    pb::RateLimitResponse r;
    if (client.call(tenant(prefix + std::to_string(i)), &r).ok() && r.statuses_size() == 1 &&
        r.statuses(0).limit_remaining() == kPerHour - 1) {
      return std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - start);
    }
    std::this_thread::sleep_for(5ms);
  }
  return 1min;
}

class RlsRedisFaults : public RlsRedis, public ::testing::WithParamInterface<bool> {
 protected:
  void SetUp() override {
    RlsRedis::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    server_ = start_server(GetParam() ? "allow" : "deny", "100ms");
    ASSERT_NE(server_, nullptr);
    client_ = std::make_unique<RlsClient>(grpc_port(server_->log()));
    // 40 -> 39: Redis decides.
    const pb::RateLimitResponse first = client_->call(tenant("before"));
    EXPECT_EQ(first.overall_code(), OK);
    ASSERT_EQ(first.statuses_size(), 1);
    EXPECT_EQ(first.statuses(0).limit_remaining(), kPerHour - 1);
  }

  // SIGTERM after the faults: the process survived them and exits 0.
  void expect_clean_exit() {
    server_->send_signal(SIGTERM);
    std::string how;
    const std::optional<int> code = server_->wait_exit(10s, &how);
    ASSERT_TRUE(code.has_value()) << how << "\n" << server_->log();
    EXPECT_EQ(*code, 0);
  }

  std::unique_ptr<SluiceProcess> server_;
  std::unique_ptr<RlsClient> client_;
};

TEST_P(RlsRedisFaults, KilledRedisIsAnsweredPerOnFailureAndRestartedRedisEnforcesAgain) {
  const bool allow = GetParam();
  redis_.kill();
  expect_on_failure(*client_, allow, 20, "down-");
  EXPECT_EQ(server_->metric("sluice_rls_store_errors_total"), 20);
  EXPECT_EQ(server_->metric("sluice_rls_request_errors_total"), 0);
  EXPECT_TRUE(server_->wait_for_log("RLS: store failed: ", 2s)) << server_->log();
  EXPECT_TRUE(server_->wait_for_log(allow ? "on_failure=allow" : "on_failure=deny", 2s));

  // Redis comes back empty: every descriptor starts full.
  ASSERT_TRUE(redis_.start());
  EXPECT_LE(time_until_enforced(*client_, "back-"), 1000ms);
  expect_clean_exit();
}

TEST_P(RlsRedisFaults, PausedRedisIsAnsweredPerOnFailureWithinTheTimeout) {
  const bool allow = GetParam();
  // Longer than the timeout, shorter than the store's stall timeout (2 s):
  // the connection stays and the late replies are dropped.
  const auto paused_at = SteadyClock::now();
  ASSERT_EQ(redis_.text({"CLIENT", "PAUSE", "1500", "ALL"}), "OK");
  expect_on_failure(*client_, allow, 5, "paused-");
  EXPECT_EQ(server_->metric("sluice_rls_store_errors_total"), 5);
  EXPECT_GT(server_->metric(R"(sluice_redis_errors_total{kind="timeout"})"), 0);
  std::this_thread::sleep_until(paused_at + 1500ms);

  EXPECT_LE(time_until_enforced(*client_, "resumed-"), 1000ms);
  expect_clean_exit();
}

INSTANTIATE_TEST_SUITE_P(OnFailure, RlsRedisFaults, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("Allow") : std::string("Deny");
                         });

// ---------------------------------------------------------------- shutdown

TEST_F(RlsRedis, SigtermStillAnswersACallInFlightThenExitsPromptly) {
  // shutdown_grace 2 s; a Redis call may take up to 1.5 s.
  auto server = start_server("deny", "1500ms");
  ASSERT_NE(server, nullptr);
  const int port = grpc_port(server->log());
  // An idle client: its connection stays open through the shutdown.
  RlsClient idle(port);
  EXPECT_EQ(idle.call(tenant("idle")).overall_code(), OK);

  // A call held in flight by a paused Redis when SIGTERM comes.
  ASSERT_EQ(redis_.text({"CLIENT", "PAUSE", "500", "ALL"}), "OK");
  pb::RateLimitResponse held;
  grpc::Status held_status;
  std::thread caller([&] {
    RlsClient client(port);
    held_status = client.call(tenant("held"), &held);
  });
  std::this_thread::sleep_for(150ms);
  const auto signalled = SteadyClock::now();
  server->send_signal(SIGTERM);
  caller.join();
  // Answered by Redis once the pause ended: the idle connections are cut only
  // after the calls in flight are done, so this one is not cancelled.
  ASSERT_TRUE(held_status.ok()) << held_status.error_code() << ": " << held_status.error_message();
  EXPECT_EQ(held.overall_code(), OK);
  ASSERT_EQ(held.statuses_size(), 1);
  EXPECT_EQ(held.statuses(0).limit_remaining(), kPerHour - 1);

  std::string how;
  const std::optional<int> code = server->wait_exit(10s, &how);
  ASSERT_TRUE(code.has_value()) << how;
  EXPECT_EQ(*code, 0);
  // The pause (at most 350 ms more) plus a prompt exit: well before the 2 s grace.
  EXPECT_LT(SteadyClock::now() - signalled, 1200ms);
}

// ---------------------------------------------------------------- config

TEST(RlsRedisConfig, ADescriptorLimitRedisCannotCountExactlyStopsStartup) {
  DescriptorDir dir;
  dir.write("big.yaml", R"(domain: big
descriptors:
  - key: k
    rate_limit:
      algorithm: token_bucket
      capacity: 53000
      refill_rate: 1/d
)");
  std::string err;
  const int code =
      SluiceProcess::run_and_capture("listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\n" +
                                         rls_redis_yaml(dir, "127.0.0.1:1", "deny", "100ms"),
                                     &err);
  EXPECT_EQ(code, 1);
  EXPECT_NE(err.find(dir.file("big.yaml") + ":3:5: domain big, descriptor k: with store.backend "
                                            "redis: the Redis store cannot count"),
            std::string::npos)
      << err;
}

}  // namespace
}  // namespace sluice::test
