// Redis refusing writes: a real redis-server with a small maxmemory and
// maxmemory-policy noeviction, filled past it. Redis then answers OOM to the
// rate limit script's first write (nothing is applied) and to the health
// check's write probe: the store is not ready (writes_refused()), its calls
// fail (kStoreUnavailable: the caller's on_failure), counted and logged;
// once memory is freed, the next health check finds writes accepted and the
// store ready again, limits enforced from where they were.

#include "test_util.h"

namespace sluice::testing {
namespace {

// More than the maxmemory below: a script that has begun writing may go on
// past maxmemory (Redis checks before a script's first write only).
const std::vector<std::string> kFill = {
    "EVAL",
    "for i = 1, 40000 do redis.call('SET', 'fill:' .. i, string.rep('x', 100)) end return 1", "0"};

class OutOfMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SLUICE_REQUIRE_REDIS();
    ASSERT_TRUE(redis_.start());
  }

  RedisStoreOptions options() const {
    RedisStoreOptions o = local_options(redis_.address());
    o.deny_cache = false;
    return o;
  }

  bool fill() {
    Reply r = redis_.command(kFill);
    return r && r->type == REDIS_REPLY_INTEGER &&
           std::stoll(redis_.info("memory", "used_memory")) >
               std::stoll(redis_.info("memory", "maxmemory"));
  }

  RedisServer redis_{{"--maxmemory", "2mb", "--maxmemory-policy", "noeviction"}};
  const Limit five_ = must(Limit::token_bucket(5, 1, 1h));
};

TEST_F(OutOfMemoryTest, AFullRedisMakesTheStoreNotReadyUntilMemoryIsFreed) {
  LogCapture log;
  std::shared_ptr<RedisStore> store = make_store(options());
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(acquire_one(*store, five_, "k", us(kEpochUs))->allowed);  // 4 left
  ASSERT_TRUE(fill());

  // With no call at all, the health check's write probe finds it.
  EXPECT_TRUE(wait_until([&] { return store->writes_refused(); }, 10s));
  EXPECT_FALSE(store->ready());
  EXPECT_NE(log.line_with("refuses writes"), "") << log.all();

  // Every call fails, and charges nothing.
  const std::string key = store->redis_key(five_, "k");
  const std::string before = redis_.text({"GET", key});
  for (int i = 0; i < 3; ++i) {
    Result<Decision> d = acquire_one(*store, five_, "k", us(kEpochUs));
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.error().code, ErrorCode::kStoreUnavailable);
    EXPECT_EQ(d.error().message.rfind("Redis refused the call: OOM", 0), 0u) << d.error().message;
  }
  EXPECT_EQ(store->stats().out_of_memory, 3u);
  EXPECT_EQ(store->stats().server_errors, 0u);
  EXPECT_EQ(redis_.text({"GET", key}), before);

  // Memory freed (the fill, and the state: it starts full again).
  ASSERT_EQ(redis_.text({"FLUSHALL"}), "OK");
  EXPECT_TRUE(store->wait_ready(10s));
  EXPECT_FALSE(store->writes_refused());
  EXPECT_NE(log.line_with("accepts writes again"), "") << log.all();
  int allowed = 0;
  for (int i = 0; i < 7; ++i) {
    Result<Decision> d = acquire_one(*store, five_, "k", us(kEpochUs));
    ASSERT_TRUE(d.ok()) << d.error().message;
    allowed += d->allowed ? 1 : 0;
  }
  EXPECT_EQ(allowed, 5);
}

// An OOM answer to a call makes the store not ready at once, before any
// health check (none comes in this test after the first).
TEST_F(OutOfMemoryTest, AnOomAnswerToACallMakesTheStoreNotReadyAtOnce) {
  RedisStoreOptions o = options();
  o.health_interval = std::chrono::hours(1);
  std::shared_ptr<RedisStore> store = make_store(o);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(fill());
  ASSERT_TRUE(store->ready());
  AsyncDriver driver(store);
  const AsyncDriver::Outcome refused = driver.call(five_, "k", us(kEpochUs));
  ASSERT_FALSE(refused.status.ok());
  EXPECT_NE(refused.status.error().message.find("OOM"), std::string::npos)
      << refused.status.error().message;
  EXPECT_TRUE(store->writes_refused());
  EXPECT_FALSE(store->ready());
  EXPECT_EQ(store->stats().out_of_memory, 1u);
}

}  // namespace
}  // namespace sluice::testing
