// The Envoy RLS v3 API of the real `sluice serve` on `store.backend: redis`,
// against redis-server processes started here on free loopback ports and
// stopped by PID (tests/redis/redis_server.h):
//
//   - global exactness: two servers share one Redis; ShouldRateLimit calls
//     from several clients on one descriptor of requests_per_unit N are
//     answered OK exactly N times in total, every other one OVER_LIMIT;
//   - faults: Redis killed, then restarted; Redis stopped (SIGSTOP) longer
//     than the timeout. Every call is answered per store.redis.on_failure
//     (not with a gRPC error) within the timeout (and the margin a loaded
//     machine needs), the server keeps running, and limits hold again once
//     Redis answers.
//
// The hourly window is aligned to the wall clock, which the binary reads, so
// a test may run across the end of an hour: each answer that depends on it
// is checked against the window it was decided in (decision_window), never
// by waiting for a fresh hour.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
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
                           const std::string& on_failure, const std::string& timeout,
                           const std::string& shutdown_grace = "2s") {
  return "grpc: 127.0.0.1:0\nrls:\n  config_dir: " + dir.path() +
         "\nstore:\n  backend: redis\n  redis:\n    addresses: [" + address +
         "]\n    timeout: " + timeout + "\n    on_failure: " + on_failure +
         "\nserver:\n  threads: 2\n  shutdown_grace: " + shutdown_grace + "\n";
}

pb::RateLimitRequest tenant(const std::string& name) {
  return request("edge", {{{"tenant", name}}});
}

// Each test: a Redis of its own on a free port, and the descriptor folder.
class RlsRedis : public ::testing::Test {
 protected:
  void SetUp() override {
    SLUICE_REQUIRE_REDIS();
    ASSERT_TRUE(redis_.start());
    dir_.write("edge.yaml", kDescriptors);
  }

  // A server on this Redis, ready (null, with a test failure, otherwise).
  std::unique_ptr<SluiceProcess> start_server(const std::string& on_failure,
                                              const std::string& timeout,
                                              const std::string& shutdown_grace = "2s") {
    auto server = SluiceProcess::start(
        rls_redis_yaml(dir_, redis_.address(), on_failure, timeout, shutdown_grace));
    if (server != nullptr && !server->wait_for_readyz(200, 10s)) {
      ADD_FAILURE() << "not ready: " << server->log();
      return nullptr;
    }
    return server;
  }

  RedisServer redis_;
  DescriptorDir dir_;
};

// ---------------------------------------------------------------- exactness

// One call's answer and when it was made (wall-clock ns), to tell the hour
// it was decided in.
struct Answer {
  int64_t before = 0;
  int64_t after = 0;
  bool ok = false;  // a gRPC OK with one status
  Code code = OK;
  uint32_t remaining = 0;
  int64_t reset_seconds = 0;
};

Answer timed_call(RlsClient& client, const pb::RateLimitRequest& r) {
  Answer a;
  pb::RateLimitResponse response;
  a.before = wall_ns();
  const bool ok = client.call(r, &response).ok();
  a.after = wall_ns();
  a.ok = ok && response.statuses_size() == 1;
  if (a.ok) {
    a.code = response.overall_code();
    a.remaining = response.statuses(0).limit_remaining();
    a.reset_seconds = response.statuses(0).duration_until_reset().seconds();
  }
  return a;
}

int64_t hour_of(const Answer& a) {
  return decision_window(a.before, a.after, 3600, a.reset_seconds);
}

TEST_F(RlsRedis, TwoServersOnOneRedisAnswerOkExactlyRequestsPerUnitTimes) {
  std::vector<std::unique_ptr<SluiceProcess>> servers;
  for (int i = 0; i < 2; ++i) {
    servers.push_back(start_server("deny", "2s"));
    ASSERT_NE(servers.back(), nullptr);
  }

  // 600 calls on one descriptor from 8 clients (4 per server, each on its
  // own channel), all at once.
  constexpr int kCalls = 600;
  std::vector<Answer> answers(kCalls);
  std::atomic<int> next{0};
  std::vector<std::thread> threads;
  for (const auto& server : servers) {
    const int port = grpc_port(server->log());
    ASSERT_GT(port, 0) << server->log();
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, port] {
        RlsClient client(port);
        for (int i = next.fetch_add(1); i < kCalls; i = next.fetch_add(1))
          answers[static_cast<size_t>(i)] = timed_call(client, tenant("hot"));
      });
    }
  }
  for (std::thread& t : threads) t.join();

  // In each hour the calls were decided in (one, unless the test ran across
  // the end of an hour), the first 40 are OK, the rest OVER_LIMIT.
  struct Hour {
    int ok = 0;
    int over = 0;
  };
  std::map<int64_t, Hour> hours;
  int errors = 0;
  for (const Answer& a : answers) {
    if (!a.ok) {
      ++errors;
      continue;
    }
    Hour& h = hours[hour_of(a)];
    (a.code == OK ? h.ok : h.over) += 1;
  }
  EXPECT_EQ(errors, 0);
  long long within = 0, beyond = 0;
  for (const auto& [hour, h] : hours) {
    EXPECT_EQ(h.ok, std::min(h.ok + h.over, static_cast<int>(kPerHour))) << "hour " << hour;
    within += h.ok;
    beyond += h.over;
  }

  // Every answer was Redis's decision, none came from on_failure.
  long long metric_within = 0, metric_beyond = 0;
  for (const auto& s : servers) {
    EXPECT_EQ(s->metric("sluice_rls_store_errors_total"), 0) << s->log();
    EXPECT_EQ(s->metric("sluice_rls_request_errors_total"), 0);
    metric_within += s->metric(R"(sluice_rls_descriptors_total{result="ok"})");
    metric_beyond += s->metric(R"(sluice_rls_descriptors_total{result="over_limit"})");
  }
  EXPECT_EQ(metric_within, within);
  EXPECT_EQ(metric_beyond, beyond);

  // Either server, afterwards: what its hour has left.
  RlsClient late(grpc_port(servers[1]->log()));
  const Answer last = timed_call(late, tenant("hot"));
  ASSERT_TRUE(last.ok);
  const Hour before_last = hours[hour_of(last)];
  const int decided = before_last.ok + before_last.over;
  if (decided >= static_cast<int>(kPerHour)) {
    EXPECT_EQ(last.code, OVER);
    EXPECT_EQ(last.remaining, 0u);
  } else {
    EXPECT_EQ(last.code, OK);
    EXPECT_EQ(last.remaining, kPerHour - static_cast<uint32_t>(decided) - 1);
  }
}

// The connections Redis has from others than the connection asking.
int other_clients(const RedisServer& redis) {
  const std::string list = redis.text({"CLIENT", "LIST"});
  int n = 0;
  for (size_t at = 0; (at = list.find("cmd=", at)) != std::string::npos; ++at) {
    if (list.compare(at, 15, "cmd=client|list") != 0) ++n;
  }
  return n;
}

// The connections Redis has from others than the connection asking whose
// last command was `command`.
int clients_last_running(const RedisServer& redis, const std::string& command) {
  const std::string list = redis.text({"CLIENT", "LIST"});
  int n = 0;
  for (size_t at = 0; (at = list.find("cmd=" + command + " ", at)) != std::string::npos; ++at) ++n;
  return n;
}

// The store's connections are made at start, one per thread that issues
// calls: the internal thread's (health checks) and one per worker loop. RLS
// calls are decided on the worker loops, as /v1/check calls are, each on its
// loop's connection; not all of them funnelled through the internal thread's.
TEST_F(RlsRedis, CallsAreDecidedOnEachWorkerLoopWithItsOwnConnection) {
  auto server = start_server("deny", "2s");
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(other_clients(redis_), 3);  // the internal thread's (for /readyz) and 2 workers'
  const int port = grpc_port(server->log());
  // 4 clients, 10 calls each on a descriptor of its own: 40 calls, spread
  // round robin over the 2 workers.
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      RlsClient client(port);
      for (int i = 0; i < 10; ++i) {
        const Answer a = timed_call(client, tenant("spread" + std::to_string(t)));
        // 10 of its 40 per hour: OK, whenever the hour ends.
        if (a.ok && a.code == OK) ++ok;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok.load(), 40);
  EXPECT_EQ(server->metric("sluice_rls_store_errors_total"), 0);
  EXPECT_EQ(other_clients(redis_), 3) << redis_.text({"CLIENT", "LIST"});
  // The script calls came on both workers' connections; the internal
  // thread's last ran a health check.
  EXPECT_EQ(clients_last_running(redis_, "evalsha"), 2) << redis_.text({"CLIENT", "LIST"});
}

// ---------------------------------------------------------------- faults

constexpr auto kTimeout = 100ms;
// What a call may take beyond the store's timeout on a loaded machine
// (sanitizers, ctest -j): a bound that tells a call ended by the timeout
// from one that hung.
constexpr auto kLateMargin = 500ms;
// Redis answers again: the server decides within its longest reconnection
// backoff (500 ms) and this much more on a loaded machine.
constexpr auto kRecovery = 3s;

// `count` calls on fresh descriptors while the store cannot answer: each is
// answered per on_failure within the timeout (and kLateMargin), never with a
// gRPC error.
void expect_on_failure(RlsClient& client, bool allow, int count, const std::string& prefix) {
  for (int i = 0; i < count; ++i) {
    const auto start = SteadyClock::now();
    pb::RateLimitResponse r;
    const grpc::Status status = client.call(tenant(prefix + std::to_string(i)), &r);
    const auto took =
        std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - start);
    EXPECT_LE(took, kTimeout + kLateMargin) << "call " << i;
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
// 39 of 40, in any hour; on_failure answers say 0); how long that took, or a
// minute.
std::chrono::milliseconds time_until_enforced(RlsClient& client, const std::string& prefix) {
  const auto start = SteadyClock::now();
  for (int i = 0; SteadyClock::now() - start < 10s; ++i) {
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
  // Counted where the HTTP doors' store failures are.
  EXPECT_EQ(server_->metric("sluice_store_errors_total"), 20);
  EXPECT_TRUE(server_->wait_for_log("store failed on route \"rls\": ", 2s)) << server_->log();
  EXPECT_TRUE(server_->wait_for_log(allow ? "on_failure=allow" : "on_failure=deny", 2s));

  // Redis comes back empty: every descriptor starts full.
  ASSERT_TRUE(redis_.start());
  EXPECT_LT(time_until_enforced(*client_, "back-"), kRecovery);
  expect_clean_exit();
}

TEST_P(RlsRedisFaults, StoppedRedisIsAnsweredPerOnFailureWithinTheTimeout) {
  const bool allow = GetParam();
  // Longer than the timeout, shorter than the store's stall timeout (2 s):
  // the connection stays and the late replies are dropped.
  ASSERT_TRUE(redis_.pause());
  expect_on_failure(*client_, allow, 5, "paused-");
  EXPECT_EQ(server_->metric("sluice_rls_store_errors_total"), 5);
  EXPECT_GT(server_->metric(R"(sluice_redis_errors_total{kind="timeout"})"), 0);
  ASSERT_TRUE(redis_.resume());

  EXPECT_LT(time_until_enforced(*client_, "resumed-"), kRecovery);
  expect_clean_exit();
}

INSTANTIATE_TEST_SUITE_P(OnFailure, RlsRedisFaults, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("Allow") : std::string("Deny");
                         });

// ---------------------------------------------------------------- shutdown

TEST_F(RlsRedis, SigtermStillAnswersACallInFlightThenExitsPromptly) {
  // A Redis call may take 5 s, well within the 10 s grace.
  constexpr auto kGrace = 10s;
  auto server = start_server("deny", "5s", "10s");
  ASSERT_NE(server, nullptr);
  const int port = grpc_port(server->log());
  // An idle client: its connection stays open through the shutdown.
  RlsClient idle(port);
  EXPECT_EQ(idle.call(tenant("idle")).overall_code(), OK);

  // A call held in flight by a stopped Redis when SIGTERM comes: the server
  // has taken it (counted it) and waits for Redis.
  ASSERT_TRUE(redis_.pause());
  pb::RateLimitResponse held;
  grpc::Status held_status;
  std::thread caller([&] {
    RlsClient client(port);
    held_status = client.call(tenant("held"), &held);
  });
  const bool taken = server->wait_for_metric("sluice_rls_requests_total", 2, 5s);
  const auto signalled = SteadyClock::now();
  server->send_signal(SIGTERM);
  EXPECT_TRUE(redis_.resume());
  caller.join();
  ASSERT_TRUE(taken) << "the server did not take the call";
  // Answered by Redis once it resumed: the idle connections are cut only
  // after the calls in flight are done, so this one is not cancelled.
  ASSERT_TRUE(held_status.ok()) << held_status.error_code() << ": " << held_status.error_message();
  EXPECT_EQ(held.overall_code(), OK);
  ASSERT_EQ(held.statuses_size(), 1);
  EXPECT_EQ(held.statuses(0).limit_remaining(), kPerHour - 1);

  std::string how;
  const std::optional<int> code = server->wait_exit(2 * kGrace, &how);
  ASSERT_TRUE(code.has_value()) << how;
  EXPECT_EQ(*code, 0);
  // Once the call is answered, not when the grace runs out.
  EXPECT_LT(SteadyClock::now() - signalled, kGrace / 2);
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
