// Failures: Redis killed, restarted, paused, unreachable or overloaded. Every
// call completes with kStoreUnavailable within the timeout (+ 50 ms), none
// hangs, and service resumes within a second of Redis coming back. Calls that
// timed out charge nothing when a paused Redis gets them later.
#include <signal.h>

#include <atomic>

#include "test_util.h"

namespace sluice::testing {
namespace {

constexpr auto kTimeout = 50ms;
constexpr auto kSlack = 50ms;

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

  // Calls one after another for `span`; all must fail with kStoreUnavailable
  // in time, and at least `min_calls` are made.
  void expect_failing_for(std::chrono::milliseconds span, int min_calls) {
    const auto until = std::chrono::steady_clock::now() + span;
    int calls = 0;
    while (std::chrono::steady_clock::now() < until) {
      auto o = driver_->call(limit_, "fault:" + std::to_string(calls % 7), us(kEpochUs));
      ++calls;
      ASSERT_FALSE(o.status.ok()) << "call " << calls << " succeeded while Redis was away";
      EXPECT_EQ(o.status.error().code, ErrorCode::kStoreUnavailable);
      EXPECT_LE(o.latency, kTimeout + kSlack)
          << "call " << calls << ": " << o.status.error().message;
      std::this_thread::sleep_for(2ms);
    }
    EXPECT_GE(calls, min_calls);
  }

  // Time until a call succeeds again (calls every 5 ms), up to `limit`.
  std::chrono::milliseconds time_to_recover(std::chrono::milliseconds limit) {
    const auto start = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - start < limit) {
      auto o = driver_->call(limit_, "recover", us(kEpochUs));
      if (o.status.ok()) break;
      EXPECT_LE(o.latency, kTimeout + kSlack);
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

TEST_F(FaultTest, KilledRedisFailsWithinTheTimeoutAndRestartedRedisServesWithinASecond) {
  ASSERT_TRUE(driver_->call(limit_, "before", us(kEpochUs)).status.ok());
  server_.kill();
  expect_failing_for(300ms, 50);  // refused at once: the connection is down
  EXPECT_GT(store_->stats().connection_errors, 0u);
  const auto reloads = store_->stats().script_loads;

  ASSERT_TRUE(server_.start());  // same port, empty, no scripts cached
  EXPECT_LT(time_to_recover(2s), 1s);
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
  // 400 calls in flight when Redis dies: each completes, none late.
  std::vector<std::string> keys;
  for (int i = 0; i < 400; ++i) keys.push_back("load:" + std::to_string(i));
  std::vector<AsyncDriver::Outcome> outcomes;
  std::thread killer([&] {
    std::this_thread::sleep_for(1ms);
    server_.kill();
  });
  for (int round = 0; round < 20; ++round) {
    for (auto& o : driver_->calls(limit_, keys, us(kEpochUs))) outcomes.push_back(o);
  }
  killer.join();
  size_t failed = 0;
  for (const auto& o : outcomes) {
    EXPECT_LE(o.latency, kTimeout + kSlack);
    if (!o.status.ok()) {
      ++failed;
      EXPECT_EQ(o.status.error().code, ErrorCode::kStoreUnavailable);
    }
  }
  EXPECT_GT(failed, 0u);
  EXPECT_EQ(outcomes.size(), 8'000u);
}

TEST_F(FaultTest, PausedRedisTimesOutThenServesAgain) {
  ASSERT_TRUE(driver_->call(limit_, "before", us(kEpochUs)).status.ok());
  const auto timeouts = store_->stats().timeouts;
  ASSERT_EQ(server_.text({"CLIENT", "PAUSE", "400", "ALL"}), "OK");
  const auto paused_at = std::chrono::steady_clock::now();
  expect_failing_for(250ms, 4);  // each waits for its 50 ms timeout
  EXPECT_GT(store_->stats().timeouts, timeouts);
  const auto pause_end = paused_at + 400ms;
  std::this_thread::sleep_until(pause_end);
  EXPECT_LT(time_to_recover(2s), 1s);
}

TEST_F(FaultTest, TooManyCallsInFlightFailAtOnce) {
  RedisStoreOptions o = local_options(server_.address());
  o.timeout = kTimeout;
  o.max_in_flight = 8;
  auto store = make_store(o);
  AsyncDriver driver(store);
  ASSERT_TRUE(driver.call(limit_, "warm", us(kEpochUs)).status.ok());
  ASSERT_EQ(server_.text({"CLIENT", "PAUSE", "300", "ALL"}), "OK");
  std::vector<std::string> keys(50, "crowd");
  const auto outcomes = driver.calls(limit_, keys, us(kEpochUs));
  size_t fast = 0;
  for (const auto& out : outcomes) {
    ASSERT_FALSE(out.status.ok());
    EXPECT_EQ(out.status.error().code, ErrorCode::kStoreUnavailable);
    if (out.latency < 10ms) ++fast;
  }
  // 8 wait (and time out); the other 42 are refused without waiting.
  EXPECT_EQ(fast, 42u);
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
    EXPECT_LE(std::chrono::steady_clock::now() - start, kTimeout + kSlack);
  }
  EXPECT_GT(store->stats().connection_errors, 0u);
}

TEST_F(FaultTest, ReadinessFollowsRedis) {
  EXPECT_TRUE(store_->ready());
  server_.kill();
  const auto down = std::chrono::steady_clock::now();
  while (store_->ready() && std::chrono::steady_clock::now() - down < 2s)
    std::this_thread::sleep_for(5ms);
  EXPECT_FALSE(store_->ready());
  ASSERT_TRUE(server_.start());
  EXPECT_TRUE(store_->wait_ready(1s));
}

TEST_F(FaultTest, StalledConnectionIsDroppedAndReplaced) {
  // A Redis that stops answering without closing the socket (SIGSTOP).
  RedisStoreOptions o = local_options(server_.address());
  o.timeout = kTimeout;
  o.stall_timeout = 200ms;
  o.reconnect_min = 10ms;
  auto store = make_store(o);
  AsyncDriver driver(store);
  ASSERT_TRUE(driver.call(limit_, "warm", us(kEpochUs)).status.ok());
  const auto reconnects = store->stats().reconnects;
  ::kill(server_.pid(), SIGSTOP);
  for (int i = 0; i < 30; ++i) {
    auto out = driver.call(limit_, "stalled", us(kEpochUs));
    EXPECT_FALSE(out.status.ok());
    EXPECT_LE(out.latency, kTimeout + kSlack);
    std::this_thread::sleep_for(10ms);
  }
  ::kill(server_.pid(), SIGCONT);
  std::this_thread::sleep_for(100ms);
  ASSERT_TRUE(driver.call(limit_, "after", us(kEpochUs)).status.ok());
  EXPECT_GT(store->stats().reconnects, reconnects) << "the stalled connection was kept";
}

// Calls that Redis receives after Sluice gave up on them must charge nothing:
// their callers already had their on_failure answer. These tests count units:
// a token bucket of a million that refills one per hour allows every call
// Redis applies, and the units consumed are read back on the same connection
// (so after every late reply). Their timeout is generous, so that on a loaded
// machine only the pause makes calls time out: a call Redis applied in time
// but answered late would be charged though it failed (see late_applied).
constexpr auto kPauseTimeout = 200ms;
constexpr auto kHeld = 5 * kPauseTimeout;  // Redis stays stopped this long
const Limit& million() {
  static const Limit limit = must(Limit::token_bucket(1'000'000, 1, 1h));
  return limit;
}

std::shared_ptr<RedisStore> pause_store(const RedisServer& server, RedisTimeSource time_source) {
  RedisStoreOptions o = local_options(server.address());
  o.timeout = kPauseTimeout;
  o.time_source = time_source;
  return make_store(o);
}

// Units consumed so far, with one more call on `driver`'s connection.
uint64_t consumed_after_one_more(AsyncDriver& driver) {
  auto last = driver.call(million(), "paid", us(kEpochUs));
  EXPECT_TRUE(last.status.ok()) << last.status.error().message;
  EXPECT_TRUE(last.decision.allowed);
  return 1'000'000 - last.decision.remaining - 1;
}

// Redis is stopped between two waves of calls, so every call sent before has
// had its reply; waves go on while it is stopped, each timing out; then it
// resumes and meets the backlog.
void expect_paused_backlog_charges_nothing(RedisServer& server, RedisTimeSource time_source) {
  auto store = pause_store(server, time_source);
  ASSERT_NE(store, nullptr);
  AsyncDriver driver(store);
  const std::vector<std::string> wave(100, "paid");
  size_t allowed = 0;
  size_t failed = 0;
  const auto run_wave = [&] {
    for (const auto& out : driver.calls(million(), wave, us(kEpochUs))) {
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
  const auto resume_at = std::chrono::steady_clock::now() + kHeld;
  while (std::chrono::steady_clock::now() < resume_at) run_wave();
  ASSERT_TRUE(server.resume());
  EXPECT_GE(failed, 300u);
  // Served again: a wave with allowed calls.
  const size_t before_resume = allowed;
  for (int i = 0; i < 100 && allowed == before_resume; ++i) run_wave();
  ASSERT_GT(allowed, before_resume);

  const uint64_t consumed = consumed_after_one_more(driver);
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

// The same, with Redis stopped at whatever moment a steady load is at. Then
// Redis may have run calls whose replies it had not written yet: they time
// out although Redis charged them, the one case a deadline cannot prevent.
// The store counts them (late_applied), and nothing else is charged.
TEST_F(FaultTest, RedisStoppedAtAnyMomentChargesOnlyTheAllowedAndTheCountedLateCalls) {
  auto store = pause_store(server_, RedisTimeSource::kRedis);
  ASSERT_NE(store, nullptr);
  AsyncDriver driver(store);
  std::atomic<bool> stop{false};
  std::atomic<size_t> allowed{0};
  std::atomic<size_t> failed{0};
  std::thread load([&] {
    const std::vector<std::string> wave(100, "paid");
    while (!stop.load()) {
      for (const auto& out : driver.calls(million(), wave, us(kEpochUs))) {
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
  const bool paused = server_.pause();
  EXPECT_TRUE(paused);
  std::this_thread::sleep_for(kHeld);
  EXPECT_TRUE(server_.resume());
  const size_t at_resume = allowed.load();
  EXPECT_TRUE(wait_until([&] { return allowed.load() >= at_resume + 200; }, 30s));
  stop.store(true);
  load.join();
  ASSERT_TRUE(paused);

  const uint64_t consumed = consumed_after_one_more(driver);
  const RedisStoreStats stats = store->stats();
  RecordProperty("consumed", std::to_string(consumed));
  RecordProperty("allowed", std::to_string(allowed.load()));
  RecordProperty("failed", std::to_string(failed.load()));
  RecordProperty("late_applied", std::to_string(stats.late_applied));
  EXPECT_EQ(consumed, allowed.load() + stats.late_applied);
  // At most the wave in flight when Redis stopped.
  EXPECT_LE(stats.late_applied, 100u);
  EXPECT_GE(failed.load(), 300u);
  // Every call that failed had its reply by now: skipped, or applied late.
  EXPECT_EQ(failed.load(), stats.expired + stats.late_applied);
  EXPECT_LE(stats.late_replies, failed.load());
}

}  // namespace
}  // namespace sluice::testing
