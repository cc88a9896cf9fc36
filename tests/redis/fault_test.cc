// Failures: Redis killed, restarted, paused, unreachable or overloaded. Every
// call completes with kStoreUnavailable, at once or when its timeout ends
// (within the timeout and kLateMargin, what a loaded machine needs: never
// hung), and service resumes once Redis is back. Calls that timed out charge
// nothing when a paused Redis gets them later.
#include <atomic>

#include "store/redis/scripts.h"
#include "test_util.h"

namespace sluice::testing {
namespace {

constexpr auto kTimeout = 50ms;
// Redis answers again: a call succeeds within the longest reconnection
// backoff (200 ms here) and this much more on a loaded machine.
constexpr auto kRecovery = 2s;

class FaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SLUICE_REQUIRE_REDIS();
    ASSERT_TRUE(server_.start());
    RedisStoreOptions o = local_options(server_.address());
    o.timeout = kTimeout;
    o.reconnect_min = 10ms;
    o.reconnect_max = 200ms;
    o.time_source = RedisTimeSource::kRedis;
    store_ = make_store(o);
    ASSERT_NE(store_, nullptr);
    driver_ = std::make_unique<AsyncDriver>(store_);
  }
  void TearDown() override { driver_.reset(); }

  // `calls` calls one after another; each must fail with kStoreUnavailable
  // in time.
  void expect_failing(int calls) {
    for (int i = 0; i < calls; ++i) {
      auto o = driver_->call(limit_, "fault:" + std::to_string(i % 7), us(kEpochUs));
      ASSERT_FALSE(o.status.ok()) << "call " << i << " succeeded while Redis was away";
      EXPECT_EQ(o.status.error().code, ErrorCode::kStoreUnavailable);
      EXPECT_LE(o.latency, kTimeout + kLateMargin)
          << "call " << i << ": " << o.status.error().message;
    }
  }

  // Time until a call succeeds again (calls every 5 ms), up to `limit`.
  std::chrono::milliseconds time_to_recover(std::chrono::milliseconds limit) {
    const auto start = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - start < limit) {
      auto o = driver_->call(limit_, "recover", us(kEpochUs));
      if (o.status.ok()) break;
      EXPECT_LE(o.latency, kTimeout + kLateMargin);
      std::this_thread::sleep_for(5ms);
    }
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 start);
  }

  RedisServer server_;
  std::shared_ptr<RedisStore> store_;
  std::unique_ptr<AsyncDriver> driver_;
  const Limit limit_ = must(Limit::token_bucket(1'000'000, 1'000'000, 1s));
};

TEST_F(FaultTest, KilledRedisFailsWithinTheTimeoutAndRestartedRedisServesAgain) {
  ASSERT_TRUE(driver_->call(limit_, "before", us(kEpochUs)).status.ok());
  server_.kill();
  expect_failing(50);  // refused at once: the connection is down
  EXPECT_GT(store_->stats().connection_errors, 0u);
  const auto reloads = store_->stats().script_loads;

  ASSERT_TRUE(server_.start());  // same port, empty, no scripts cached
  EXPECT_LT(time_to_recover(10s), kRecovery);
  // The script was sent again, and limits are enforced on the new Redis.
  EXPECT_GT(store_->stats().script_loads, reloads);
  const Limit three = must(Limit::token_bucket(3, 1, 1h));
  int allowed = 0;
  for (int i = 0; i < 5; ++i) {
    auto o = driver_->call(three, "after-restart", us(kEpochUs));
    ASSERT_TRUE(o.status.ok());
    allowed += o.decision.allowed;
  }
  EXPECT_EQ(allowed, 3);
}

TEST_F(FaultTest, KilledUnderLoadEveryCallIsAnsweredInTime) {
  // Rounds of 400 calls in flight; Redis dies during one of the rounds from
  // the third on, and before the eleventh. Each call completes, none late.
  std::vector<std::string> keys;
  for (int i = 0; i < 400; ++i) keys.push_back("load:" + std::to_string(i));
  std::vector<AsyncDriver::Outcome> outcomes;
  std::atomic<int> round{0};
  std::thread killer([&] {
    EXPECT_TRUE(wait_until([&] { return round.load() >= 2; }, 30s));
    server_.kill();
  });
  for (int r = 0; r < 20; ++r) {
    if (r == 10) killer.join();  // rounds 10 to 19 run on a dead Redis
    round.store(r);
    for (auto& o : driver_->calls(limit_, keys, us(kEpochUs))) outcomes.push_back(o);
  }
  size_t failed = 0;
  for (const auto& o : outcomes) {
    EXPECT_LE(o.latency, kTimeout + kLateMargin);
    if (!o.status.ok()) {
      ++failed;
      EXPECT_EQ(o.status.error().code, ErrorCode::kStoreUnavailable);
    }
  }
  EXPECT_GE(failed, 10u * 400u);
  EXPECT_EQ(outcomes.size(), 8'000u);
}

TEST_F(FaultTest, PausedRedisTimesOutThenServesAgain) {
  ASSERT_TRUE(driver_->call(limit_, "before", us(kEpochUs)).status.ok());
  const auto timeouts = store_->stats().timeouts;
  ASSERT_TRUE(server_.pause());
  expect_failing(4);  // each waits for its 50 ms timeout
  EXPECT_EQ(store_->stats().timeouts, timeouts + 4);
  ASSERT_TRUE(server_.resume());
  EXPECT_LT(time_to_recover(10s), kRecovery);
}

TEST_F(FaultTest, TooManyCallsInFlightFailAtOnce) {
  RedisStoreOptions o = local_options(server_.address());
  o.timeout = kTimeout;
  o.max_in_flight = 8;
  auto store = make_store(o);
  ASSERT_NE(store, nullptr);
  AsyncDriver driver(store);
  ASSERT_TRUE(driver.call(limit_, "warm", us(kEpochUs)).status.ok());
  ASSERT_TRUE(server_.pause());
  std::vector<std::string> keys(50, "crowd");
  const auto outcomes = driver.calls(limit_, keys, us(kEpochUs));
  ASSERT_TRUE(server_.resume());
  // 8 wait (and time out); the other 42 are refused before acquire_async
  // returns, without waiting.
  size_t refused = 0;
  for (const auto& out : outcomes) {
    ASSERT_FALSE(out.status.ok());
    EXPECT_EQ(out.status.error().code, ErrorCode::kStoreUnavailable);
    if (out.at_once) ++refused;
  }
  EXPECT_EQ(refused, 42u);
  EXPECT_EQ(store->stats().overloaded, 42u);
  EXPECT_EQ(store->stats().timeouts, 8u);
}

TEST_F(FaultTest, UnreachableRedisFailsFastAndIsNotReady) {
  RedisStoreOptions o = local_options("127.0.0.1:" + std::to_string(free_port()));
  o.timeout = kTimeout;
  auto created = RedisStore::create(o);
  ASSERT_TRUE(created.ok());
  auto store = *created;
  EXPECT_FALSE(store->wait_ready(200ms));
  const Limit limit = must(Limit::token_bucket(1, 1, 1s));
  for (int i = 0; i < 10; ++i) {
    const auto start = std::chrono::steady_clock::now();
    auto d = acquire_one(*store, limit, "k", us(kEpochUs));
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.error().code, ErrorCode::kStoreUnavailable);
    EXPECT_LE(std::chrono::steady_clock::now() - start, kTimeout + kLateMargin);
  }
  EXPECT_GT(store->stats().connection_errors, 0u);
}

TEST_F(FaultTest, ReadinessFollowsRedis) {
  EXPECT_TRUE(store_->ready());
  server_.kill();
  EXPECT_TRUE(wait_until([&] { return !store_->ready(); }, 10s));
  ASSERT_TRUE(server_.start());
  EXPECT_TRUE(store_->wait_ready(10s));
}

TEST_F(FaultTest, StalledConnectionIsDroppedAndReplaced) {
  // A Redis that stops answering without closing the socket (SIGSTOP). The
  // stall timeout is above what a call may take, so that calls are seen to
  // end by their own timeout.
  RedisStoreOptions o = local_options(server_.address());
  o.timeout = kTimeout;
  o.stall_timeout = 1s;
  o.reconnect_min = 10ms;
  auto store = make_store(o);
  ASSERT_NE(store, nullptr);
  AsyncDriver driver(store);
  ASSERT_TRUE(driver.call(limit_, "warm", us(kEpochUs)).status.ok());
  const auto reconnects = store->stats().reconnects;
  const auto connection_errors = store->stats().connection_errors;
  ASSERT_TRUE(server_.pause());
  // Calls fail in time until a connection has waited a second for a reply
  // and is dropped.
  const auto until = std::chrono::steady_clock::now() + 30s;
  while (store->stats().connection_errors == connection_errors &&
         std::chrono::steady_clock::now() < until) {
    auto out = driver.call(limit_, "stalled", us(kEpochUs));
    EXPECT_FALSE(out.status.ok());
    EXPECT_LE(out.latency, kTimeout + kLateMargin);
  }
  EXPECT_GT(store->stats().connection_errors, connection_errors) << "nothing was dropped";
  ASSERT_TRUE(server_.resume());
  EXPECT_TRUE(
      wait_until([&] { return driver.call(limit_, "after", us(kEpochUs)).status.ok(); }, 10s));
  EXPECT_GT(store->stats().reconnects, reconnects) << "the stalled connection was kept";
}

// Calls that Redis receives after Sluice gave up on them must charge nothing:
// their callers already had their on_failure answer. These tests count units:
// a token bucket of a million that refills one per hour allows every call
// Redis applies, and the units consumed are read back on the same connection
// (so after every late reply). Their timeout is generous, so that on a loaded
// machine only the pause makes calls time out: a call Redis applied in time
// but answered late would be charged though it failed (see late_applied).
// Redis stays stopped while kHeldWaves waves of 100 calls time out.
constexpr auto kPauseTimeout = 200ms;
constexpr size_t kHeldWaves = 3;
const Limit& million() {
  static const Limit limit = must(Limit::token_bucket(1'000'000, 1, 1h));
  return limit;
}
// The same count on the fixed window's fast path (fast_fixed_window.lua),
// whose deadline is the batch's: a million per window of 8 years (aligned to
// the epoch: the current one ends in late 2033).
const Limit& million_fixed_window() {
  static const Limit limit = must(Limit::fixed_window(1'000'000, 24h * 365 * 8));
  return limit;
}

std::shared_ptr<RedisStore> pause_store(const RedisServer& server, RedisTimeSource time_source) {
  RedisStoreOptions o = local_options(server.address());
  o.timeout = kPauseTimeout;
  o.time_source = time_source;
  // The connection waits for Redis however long the test holds it stopped,
  // so that the calls sent meanwhile reach it when it resumes.
  o.stall_timeout = 10min;
  return make_store(o);
}

// Units consumed so far, with one more call on `driver`'s connection.
uint64_t consumed_after_one_more(AsyncDriver& driver, const Limit& limit = million()) {
  auto last = driver.call(limit, "paid", us(kEpochUs));
  EXPECT_TRUE(last.status.ok()) << last.status.error().message;
  EXPECT_TRUE(last.decision.allowed);
  return 1'000'000 - last.decision.remaining - 1;
}

// Redis is stopped between two waves of calls, so every call sent before has
// had its reply; waves go on while it is stopped, each timing out; then it
// resumes and meets the backlog.
void expect_paused_backlog_charges_nothing(RedisServer& server, RedisTimeSource time_source,
                                           const Limit& limit = million()) {
  auto store = pause_store(server, time_source);
  ASSERT_NE(store, nullptr);
  AsyncDriver driver(store);
  const std::vector<std::string> wave(100, "paid");
  size_t allowed = 0;
  size_t failed = 0;
  const auto run_wave = [&] {
    for (const auto& out : driver.calls(limit, wave, us(kEpochUs))) {
      if (out.status.ok()) {
        EXPECT_TRUE(out.decision.allowed);
        allowed += out.decision.allowed ? 1 : 0;
      } else {
        EXPECT_EQ(out.status.error().code, ErrorCode::kStoreUnavailable);
        ++failed;
      }
    }
  };
  for (int i = 0; i < 5; ++i) run_wave();
  ASSERT_EQ(failed, 0u);
  ASSERT_EQ(allowed, 500u);

  ASSERT_TRUE(server.pause());
  for (size_t i = 0; i < kHeldWaves; ++i) run_wave();
  ASSERT_TRUE(server.resume());
  EXPECT_EQ(failed, kHeldWaves * 100);
  // Served again: a wave with allowed calls.
  const size_t before_resume = allowed;
  for (int i = 0; i < 100 && allowed == before_resume; ++i) run_wave();
  ASSERT_GT(allowed, before_resume);

  const uint64_t consumed = consumed_after_one_more(driver, limit);
  EXPECT_EQ(consumed, allowed) << failed << " calls failed";
  ::testing::Test::RecordProperty("consumed", std::to_string(consumed));
  ::testing::Test::RecordProperty("allowed", std::to_string(allowed));
  ::testing::Test::RecordProperty("failed", std::to_string(failed));
  // Each call that timed out reached Redis past its deadline and was skipped.
  const RedisStoreStats stats = store->stats();
  EXPECT_EQ(stats.timeouts, failed);
  EXPECT_EQ(stats.expired, failed);
  EXPECT_EQ(stats.late_applied, 0u);
}

TEST_F(FaultTest, PausedRedisChargesNothingForCallsThatTimedOutRedisTime) {
  expect_paused_backlog_charges_nothing(server_, RedisTimeSource::kRedis);
}

TEST_F(FaultTest, PausedRedisChargesNothingForCallsThatTimedOutLocalTime) {
  expect_paused_backlog_charges_nothing(server_, RedisTimeSource::kLocal);
}

TEST_F(FaultTest, PausedRedisChargesNothingOnTheFixedWindowFastPathRedisTime) {
  const long long scripts = server_.script_calls();
  expect_paused_backlog_charges_nothing(server_, RedisTimeSource::kRedis, million_fixed_window());
  // Every wave went out as fast-path calls: the decision script never ran.
  Reply r = server_.command({"SCRIPT", "EXISTS", std::string(redis::kLuaScriptSha1),
                             std::string(redis::kFastFixedWindowScriptSha1)});
  ASSERT_TRUE(r && r->elements == 2);
  EXPECT_EQ(r->element[0]->integer, 0);
  EXPECT_EQ(r->element[1]->integer, 1);
  EXPECT_GT(server_.script_calls(), scripts);
}

TEST_F(FaultTest, PausedRedisChargesNothingOnTheFixedWindowFastPathLocalTime) {
  expect_paused_backlog_charges_nothing(server_, RedisTimeSource::kLocal, million_fixed_window());
  Reply r = server_.command({"SCRIPT", "EXISTS", std::string(redis::kLuaScriptSha1)});
  ASSERT_TRUE(r && r->elements == 1);
  EXPECT_EQ(r->element[0]->integer, 0);
}

// The same, with Redis stopped at whatever moment a steady load is at. Then
// Redis may have run calls whose replies it had not written yet: they time
// out although Redis charged them, the one case a deadline cannot prevent.
// The store counts them (late_applied), and nothing else is charged.
void expect_stopped_at_any_moment_charges_only_allowed_and_late(RedisServer& server,
                                                                const Limit& limit) {
  auto store = pause_store(server, RedisTimeSource::kRedis);
  ASSERT_NE(store, nullptr);
  AsyncDriver driver(store);
  std::atomic<bool> stop{false};
  std::atomic<size_t> allowed{0};
  std::atomic<size_t> failed{0};
  std::thread load([&] {
    const std::vector<std::string> wave(100, "paid");
    while (!stop.load()) {
      for (const auto& out : driver.calls(limit, wave, us(kEpochUs))) {
        if (out.status.ok()) {
          EXPECT_TRUE(out.decision.allowed);
          if (out.decision.allowed) ++allowed;
        } else {
          EXPECT_EQ(out.status.error().code, ErrorCode::kStoreUnavailable);
          ++failed;
        }
      }
    }
  });
  EXPECT_TRUE(wait_until([&] { return allowed.load() >= 1'000; }, 30s));
  const bool paused = server.pause();
  EXPECT_TRUE(paused);
  EXPECT_TRUE(wait_until([&] { return failed.load() >= kHeldWaves * 100; }, 60s));
  EXPECT_TRUE(server.resume());
  const size_t at_resume = allowed.load();
  EXPECT_TRUE(wait_until([&] { return allowed.load() >= at_resume + 200; }, 30s));
  stop.store(true);
  load.join();
  ASSERT_TRUE(paused);

  const uint64_t consumed = consumed_after_one_more(driver, limit);
  const RedisStoreStats stats = store->stats();
  ::testing::Test::RecordProperty("consumed", std::to_string(consumed));
  ::testing::Test::RecordProperty("allowed", std::to_string(allowed.load()));
  ::testing::Test::RecordProperty("failed", std::to_string(failed.load()));
  ::testing::Test::RecordProperty("late_applied", std::to_string(stats.late_applied));
  EXPECT_EQ(consumed, allowed.load() + stats.late_applied);
  // At most the wave in flight when Redis stopped.
  EXPECT_LE(stats.late_applied, 100u);
  EXPECT_GE(failed.load(), kHeldWaves * 100);
  // Every call that failed had its reply by now: skipped, or applied late.
  EXPECT_EQ(failed.load(), stats.expired + stats.late_applied);
  EXPECT_LE(stats.late_replies, failed.load());
}

TEST_F(FaultTest, RedisStoppedAtAnyMomentChargesOnlyTheAllowedAndTheCountedLateCalls) {
  expect_stopped_at_any_moment_charges_only_allowed_and_late(server_, million());
}

TEST_F(FaultTest, RedisStoppedAtAnyMomentOnTheFixedWindowFastPath) {
  expect_stopped_at_any_moment_charges_only_allowed_and_late(server_, million_fixed_window());
}

}  // namespace
}  // namespace sluice::testing
