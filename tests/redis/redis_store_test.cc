// RedisStore against a real redis-server: what the conformance table
// (tests/conformance, run on Redis by store_conformance_test.cc) cannot
// show: host names, TTLs, the sliding log's members, NOSCRIPT, Redis time,
// size(), credentials, limits the scripts cannot count, pipelining and
// batching, threads, and the global count across stores.
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "sluice/memory_store.h"
#include "store/redis/scripts.h"
#include "test_util.h"

namespace sluice::testing {
namespace {

class RedisStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SLUICE_REQUIRE_REDIS();
    ASSERT_TRUE(server_.start());
    store_ = make_store(local_options(server_.address()));
    ASSERT_NE(store_, nullptr);
  }

  RedisServer server_;
  std::shared_ptr<RedisStore> store_;
};

TEST_F(RedisStoreTest, AHostNameIsResolvedAndConnectedTo) {
  // "localhost" is looked up asynchronously (never by hiredis on the loop);
  // a call made during the lookup fails fast like one made while reconnecting.
  store_ = make_store(local_options("localhost:" + std::to_string(server_.port())));
  ASSERT_NE(store_, nullptr);
  const uint64_t errors_when_ready = store_->stats().connection_errors;
  for (uint64_t i = 0; i < 3; ++i) {
    auto d = acquire_one(*store_, must(Limit::fixed_window(2, 1h)), "named", us(kEpochUs));
    ASSERT_TRUE(d.ok()) << d.error().message;
    EXPECT_EQ(d->allowed, i < 2);
  }
  EXPECT_EQ(store_->stats().connection_errors, errors_when_ready);
}

// The PTTL read back runs down in real time from the write: a test reading it
// is allowed this much of a loaded machine's time in between.
constexpr long long kPttlMarginMs = 10'000;

// A state's TTL is set to twice its time until full (sliding_log: its time
// until empty, exactly, with PEXPIRE), so that a busy key rewrites it about
// once per time to full (entry.lua).
TEST_F(RedisStoreTest, AFirstWriteSetsTheTtlToTwiceTheTimeUntilFull) {
  RedisStoreOptions o = local_options(server_.address());
  o.ttl_extra = 0ms;
  store_ = make_store(o);
  // Each limit is full again 100 s after one request (or its window ends).
  const Limit bucket = must(Limit::token_bucket(10, 10, 1'000s));
  const Limit gcra = must(Limit::gcra(10, 10, 1'000s));
  const Limit fixed = must(Limit::fixed_window(10, 100s));
  const Limit log = must(Limit::sliding_log(10, 100s));
  const Limit window = must(Limit::sliding_window(10, 100s));
  const int64_t aligned = (kEpochUs / 100'000'000) * 100'000'000;  // start of a 100 s window
  for (const Limit* limit : {&bucket, &gcra, &fixed, &log, &window}) {
    auto d = acquire_one(*store_, *limit, "ttl", us(aligned));
    ASSERT_TRUE(d.ok());
    const std::string key = limit == &fixed ? store_->redis_window_key(fixed, "ttl", us(aligned))
                                            : store_->redis_key(*limit, "ttl");
    const long long pttl = server_.integer({"PTTL", key});
    // sliding_window keeps its count for one more window after this one.
    const long long expected = limit == &window ? 200'000 : 100'000;
    EXPECT_EQ(d->reset_after, std::chrono::milliseconds(expected)) << limit->describe();
    // A sliding log's entries and a fixed window's counter need no later
    // expiry than their first one's; a counter lives 100 ms past its window
    // (another instance's reading of the clock may lag).
    const long long ttl = limit == &log     ? expected
                          : limit == &fixed ? expected + 100
                                            : 2 * expected;
    EXPECT_GT(pttl, ttl - kPttlMarginMs) << limit->describe();
    EXPECT_LE(pttl, ttl) << limit->describe();
  }
}

TEST_F(RedisStoreTest, AWriteThatNeedsNoLaterExpiryKeepsTheTtlAndOneThatDoesDoublesIt) {
  RedisStoreOptions o = local_options(server_.address());
  o.ttl_extra = 0ms;
  store_ = make_store(o);
  const Limit bucket = must(Limit::token_bucket(10, 10, 1'000s));  // 100 s per token
  const std::string key = store_->redis_key(bucket, "keep");
  // 1 token taken: full in 100 s, TTL 200 s.
  ASSERT_TRUE(acquire_one(*store_, bucket, "keep", us(kEpochUs))->allowed);
  ASSERT_EQ(server_.integer({"PEXPIRE", key, "150000"}), 1);  // marks the TTL: 150 s left
  // 2 taken: full in 200 s, beyond what the first write set (by its record,
  // 200 s): a new TTL of 400 s.
  ASSERT_TRUE(acquire_one(*store_, bucket, "keep", us(kEpochUs))->allowed);
  long long pttl = server_.integer({"PTTL", key});
  EXPECT_GT(pttl, 400'000 - kPttlMarginMs);
  EXPECT_LE(pttl, 400'000);
  ASSERT_EQ(server_.integer({"PEXPIRE", key, "390000"}), 1);  // marks it: 390 s left
  // 3 taken: full in 300 s, within the 400 s recorded: the TTL is kept.
  ASSERT_TRUE(acquire_one(*store_, bucket, "keep", us(kEpochUs))->allowed);
  pttl = server_.integer({"PTTL", key});
  EXPECT_GT(pttl, 390'000 - kPttlMarginMs);
  EXPECT_LE(pttl, 390'000);
}

// A fixed window's counter lives to its window's end by the request's time
// (time_source local) and by Redis's clock, whichever is later: a request
// stamped ahead of Redis's clock (an instance whose clock runs ahead) keeps
// its window's counter until Redis's clock reaches that window's end too.
TEST_F(RedisStoreTest, AFixedWindowsCounterLivesToItsWindowsEndByEitherClock) {
  RedisStoreOptions o = local_options(server_.address());
  o.ttl_extra = 0ms;
  store_ = make_store(o);
  const Limit window = must(Limit::fixed_window(10, 100s));
  const Limit roomy = must(Limit::token_bucket(10, 10, 1s));
  constexpr int64_t kWindowUs = 100'000'000;
  const int64_t wall = std::chrono::duration_cast<std::chrono::microseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
  // 1 s into a window, in the past (kEpochUs) and an hour ahead of Redis.
  const int64_t past = (kEpochUs / kWindowUs) * kWindowUs + 1'000'000;
  const int64_t ahead = ((wall + 3'600'000'000) / kWindowUs) * kWindowUs + 1'000'000;
  for (const int64_t at : {past, ahead}) {
    // Plus the 100 ms a counter outlives its window by.
    const long long expected_ms = 99'100 + (at > wall ? (at - wall + 999) / 1'000 : 0);
    // Alone (the fast path), then with a second limit (the general script).
    for (const std::string key : {"alone", "with-another"}) {
      SCOPED_TRACE(key + (at == past ? " past" : " ahead"));
      AcquireRequest requests[2] = {{&window, key, 1}, {&roomy, key, 1}};
      Decision out[2];
      const size_t n = key == "alone" ? 1 : 2;
      const Status status = store_->acquire({requests, n}, us(at), {out, n});
      ASSERT_TRUE(status.ok()) << status.error().message;
      ASSERT_TRUE(out[0].allowed);
      EXPECT_EQ(out[0].reset_after, 99s);
      const long long pttl =
          server_.integer({"PTTL", store_->redis_window_key(window, key, us(at))});
      EXPECT_GT(pttl, expected_ms - kPttlMarginMs);
      EXPECT_LE(pttl, expected_ms);
    }
  }
}

TEST_F(RedisStoreTest, TtlExtraIsAddedToEveryTtl) {
  RedisStoreOptions o = local_options(server_.address());
  o.ttl_extra = 60s;
  auto store = make_store(o);
  const Limit limit = must(Limit::token_bucket(10, 10, 1'000s));
  // 100 s until full, plus 60 s, twice.
  ASSERT_TRUE(acquire_one(*store, limit, "extra", us(kEpochUs)).ok());
  const long long pttl = server_.integer({"PTTL", store->redis_key(limit, "extra")});
  EXPECT_GT(pttl, 320'000 - kPttlMarginMs);
  EXPECT_LE(pttl, 320'000);
}

TEST_F(RedisStoreTest, IdleKeysDisappear) {
  RedisStoreOptions o = local_options(server_.address());
  o.ttl_extra = 0ms;
  store_ = make_store(o);
  // Each request takes the whole limit, so each state is full again 100 ms
  // later (sliding_window: one window more), and its key gone at most that
  // long again later.
  const Limit limits[] = {must(Limit::token_bucket(5, 5, 100ms)), must(Limit::gcra(5, 5, 100ms)),
                          must(Limit::fixed_window(5, 100ms)), must(Limit::sliding_log(5, 100ms)),
                          must(Limit::sliding_window(5, 100ms))};
  const int64_t aligned = (kEpochUs / 100'000) * 100'000;
  const auto key_of = [&](const Limit& l) {
    return l.algorithm() == Algorithm::kFixedWindow
               ? store_->redis_window_key(l, "idle", us(aligned))
               : store_->redis_key(l, "idle");
  };
  for (const Limit& l : limits) {
    ASSERT_TRUE(acquire_one(*store_, l, "idle", us(aligned), 5)->allowed);
    EXPECT_EQ(server_.integer({"EXISTS", key_of(l)}), 1) << l.describe();
  }
  for (const Limit& l : limits) {
    const std::string key = key_of(l);
    EXPECT_TRUE(wait_until(
        [&] {
          return server_.integer({"EXISTS", key}) == 0;
        },
        5s))
        << l.describe();
  }
}

TEST_F(RedisStoreTest, SlidingLogKeepsOneUniqueMemberPerUnitOfCost) {
  const Limit limit = must(Limit::sliding_log(10, 1s));
  ASSERT_TRUE(acquire_one(*store_, limit, "log", us(kEpochUs), 3)->allowed);
  ASSERT_TRUE(acquire_one(*store_, limit, "log", us(kEpochUs), 2)->allowed);  // same time
  ASSERT_TRUE(acquire_one(*store_, limit, "log", us(kEpochUs + 5), 4)->allowed);
  const std::string key = store_->redis_key(limit, "log");
  EXPECT_EQ(server_.integer({"ZCARD", key}), 9);
  EXPECT_EQ(server_.integer({"ZCOUNT", key, std::to_string(kEpochUs), std::to_string(kEpochUs)}),
            5);
  auto denied = acquire_one(*store_, limit, "log", us(kEpochUs + 10), 2);
  EXPECT_FALSE(denied->allowed);
  EXPECT_EQ(denied->remaining, 1u);
  // One more unit must leave: the first ones leave 1 s after kEpochUs.
  EXPECT_EQ(denied->retry_after, us(1'000'000 - 10));
}

TEST_F(RedisStoreTest, ASlidingLogRefundRemovesTheHighestNumberedMembersOfItsTime) {
  // The members at one time stay "<time>:1" to "<time>:<count>", so that
  // the next request there, which numbers its own from the count up,
  // overwrites none. Costs above 256 go in several ZADD and ZREM.
  const Limit limit = must(Limit::sliding_log(2'000, 1s));
  const std::string t = std::to_string(kEpochUs);
  const std::string key = store_->redis_key(limit, "log");
  ASSERT_TRUE(acquire_one(*store_, limit, "log", us(kEpochUs), 700)->allowed);
  ASSERT_TRUE(acquire_one(*store_, limit, "log", us(kEpochUs), 600)->allowed);
  const RefundRequest back{&limit, "log", 1'000, us(kEpochUs)};
  ASSERT_TRUE(store_->refund({&back, 1}, us(kEpochUs + 10)).ok());
  EXPECT_EQ(server_.integer({"ZCARD", key}), 300);
  EXPECT_EQ(server_.command({"ZSCORE", key, t + ":300"})->type, REDIS_REPLY_STRING);
  EXPECT_EQ(server_.command({"ZSCORE", key, t + ":301"})->type, REDIS_REPLY_NIL);
  // A refund keeps the key's expiry (ZREM).
  EXPECT_GT(server_.integer({"PTTL", key}), 0);

  // Numbered 301 to 1,300: all new.
  auto d = acquire_one(*store_, limit, "log", us(kEpochUs), 1'000);
  ASSERT_TRUE(d->allowed);
  EXPECT_EQ(d->remaining, 700u);
  EXPECT_EQ(server_.integer({"ZCARD", key}), 1'300);
  ASSERT_TRUE(acquire_one(*store_, limit, "log", us(kEpochUs + 5), 5)->allowed);
  // More than the time holds: the rest comes from the next time's newest.
  const RefundRequest more{&limit, "log", 1'304, us(kEpochUs)};
  ASSERT_TRUE(store_->refund({&more, 1}, us(kEpochUs + 10)).ok());
  EXPECT_EQ(server_.integer({"ZCARD", key}), 1);
  EXPECT_EQ(server_.command({"ZSCORE", key, std::to_string(kEpochUs + 5) + ":1"})->type,
            REDIS_REPLY_STRING);
}

TEST_F(RedisStoreTest, ScriptIsSentAgainAfterScriptFlush) {
  const Limit limit = must(Limit::token_bucket(3, 1, 1h));
  ASSERT_TRUE(acquire_one(*store_, limit, "k", us(kEpochUs))->allowed);
  const std::string sha(redis::kLuaScriptSha1);
  Reply exists = server_.command({"SCRIPT", "EXISTS", sha});
  ASSERT_TRUE(exists && exists->elements == 1);
  EXPECT_EQ(exists->element[0]->integer, 1) << "the SHA1 computed at build time is Redis's";
  ASSERT_EQ(server_.text({"SCRIPT", "FLUSH"}), "OK");
  const uint64_t loads = store_->stats().script_loads;
  auto d = acquire_one(*store_, limit, "k", us(kEpochUs));
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_TRUE(d->allowed);
  EXPECT_EQ(d->remaining, 1u);
  EXPECT_EQ(store_->stats().script_loads, loads + 1);
  exists = server_.command({"SCRIPT", "EXISTS", sha});
  EXPECT_EQ(exists->element[0]->integer, 1);
  // Cached again: the next call needs no reload.
  ASSERT_TRUE(acquire_one(*store_, limit, "k", us(kEpochUs)).ok());
  EXPECT_EQ(store_->stats().script_loads, loads + 1);
}

TEST_F(RedisStoreTest, RedisTimeMakesSkewedCallersAgree) {
  RedisStoreOptions o = local_options(server_.address());
  o.time_source = RedisTimeSource::kRedis;
  auto a = make_store(o);
  auto b = make_store(o);
  // Refill of 1 token per hour: the callers' clocks, a decade apart, are ignored.
  const Limit limit = must(Limit::token_bucket(3, 1, 1h));
  EXPECT_TRUE(acquire_one(*a, limit, "skew", us(kEpochUs))->allowed);
  EXPECT_TRUE(acquire_one(*b, limit, "skew", us(kEpochUs + 315'360'000'000'000))->allowed);
  EXPECT_TRUE(acquire_one(*a, limit, "skew", us(0))->allowed);
  auto denied = acquire_one(*b, limit, "skew", us(kEpochUs));
  ASSERT_TRUE(denied.ok());
  EXPECT_FALSE(denied->allowed);
  EXPECT_GT(denied->retry_after, 3'599s);
  EXPECT_LE(denied->retry_after, 3'600s);
  // The state's time is Redis's own clock (whole microseconds since the
  // epoch). A token_bucket state is two little-endian doubles: level, time;
  // the value then holds the Redis time its TTL runs to.
  Reply time = server_.command({"TIME"});
  const int64_t redis_us = std::stoll(time->element[0]->str) * 1'000'000;
  const std::string state = server_.text({"GET", a->redis_key(limit, "skew")});
  ASSERT_EQ(state.size(), 3 * sizeof(double));
  double fields[3];
  std::memcpy(fields, state.data(), sizeof fields);
  EXPECT_LT(fields[0], 3.6e9);  // under one token (3.6e9 units) left
  EXPECT_LE(std::llabs(static_cast<int64_t>(fields[1]) - redis_us), 5'000'000);
}

TEST_F(RedisStoreTest, SizeCountsTheKeysInTheDatabase) {
  const Limit limit = must(Limit::token_bucket(1, 1, 1h));
  EXPECT_EQ(store_->size(), 0u);
  for (int i = 0; i < 7; ++i) {
    ASSERT_TRUE(acquire_one(*store_, limit, "k" + std::to_string(i), us(kEpochUs)).ok());
  }
  EXPECT_EQ(store_->size(), 7u);
  // The count for metrics follows at the next health check (every 50 ms here).
  const auto until = std::chrono::steady_clock::now() + 2s;
  while (store_->observed_size() != 7u && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(10ms);
  EXPECT_EQ(store_->observed_size(), 7u);
}

TEST_F(RedisStoreTest, DatabaseAndPasswordFromTheUrl) {
  ASSERT_EQ(server_.text({"CONFIG", "SET", "requirepass", "s3cret"}), "OK");
  RedisStoreOptions o = local_options("redis://:s3cret@" + server_.address() + "/3");
  auto store = make_store(o);
  const Limit limit = must(Limit::token_bucket(1, 1, 1h));
  auto d = acquire_one(*store, limit, "k", us(kEpochUs));
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_TRUE(d->allowed);
  // The key is in database 3, not 0.
  redisContext* c = redisConnect("127.0.0.1", server_.port());
  auto* r = static_cast<redisReply*>(redisCommand(c, "AUTH s3cret"));
  freeReplyObject(r);
  const std::string key = store->redis_key(limit, "k");
  r = static_cast<redisReply*>(redisCommand(c, "EXISTS %b", key.data(), key.size()));
  EXPECT_EQ(r->integer, 0);
  freeReplyObject(r);
  r = static_cast<redisReply*>(redisCommand(c, "SELECT 3"));
  freeReplyObject(r);
  r = static_cast<redisReply*>(redisCommand(c, "EXISTS %b", key.data(), key.size()));
  EXPECT_EQ(r->integer, 1);
  freeReplyObject(r);
  redisFree(c);
}

TEST_F(RedisStoreTest, WrongPasswordFailsAsUnavailable) {
  ASSERT_EQ(server_.text({"CONFIG", "SET", "requirepass", "s3cret"}), "OK");
  RedisStoreOptions o = local_options(server_.address());
  o.password = "wrong";
  auto store = RedisStore::create(o);
  ASSERT_TRUE(store.ok());
  const Limit limit = must(Limit::token_bucket(1, 1, 1h));
  auto d = acquire_one(**store, limit, "k", us(kEpochUs));
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().code, ErrorCode::kStoreUnavailable);
  EXPECT_FALSE((*store)->ready());
}

TEST_F(RedisStoreTest, RefusesALimitItCannotCountExactly) {
  // 7 per day: one token is 86,400,000,000 / 7 us, kept as 86,400,000,000
  // units; 53,000 tokens make 4.58e15 units, and the scripts need twice that
  // below 2^53. The memory store, counting in 128 bits, takes it.
  const Limit big = must(Limit::token_bucket(53'000, 7, 24h));
  MemoryStore memory;
  EXPECT_TRUE(acquire_one(memory, big, "k", us(kEpochUs)).ok());
  Status check = RedisStore::limit_fits(big);
  ASSERT_FALSE(check.ok());
  EXPECT_NE(check.error().message.find("cannot count"), std::string::npos);
  auto d = acquire_one(*store_, big, "k", us(kEpochUs));
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().code, ErrorCode::kInvalidArgument);
  // Windows always fit, even a million per day.
  EXPECT_TRUE(RedisStore::limit_fits(must(Limit::sliding_window(1'000'000, 24h))).ok());
  EXPECT_TRUE(RedisStore::limit_fits(must(Limit::token_bucket(4'000'000'000, 1'000, 1s))).ok());
}

TEST_F(RedisStoreTest, CallsIssuedInOneLoopTurnShareWrites) {
  AsyncDriver driver(store_);
  const Limit limit = must(Limit::token_bucket(1'000, 1, 1h));
  driver.call(limit, "warm-up", us(kEpochUs));  // connected, script cached
  const auto reads = [&] {
    const std::string info = server_.text({"INFO", "stats"});
    const size_t at = info.find("total_reads_processed:");
    return std::stoll(info.substr(at + 22));
  };
  const long long before = reads();
  std::vector<std::string> keys;
  for (int i = 0; i < 200; ++i) keys.push_back("pipelined:" + std::to_string(i));
  for (const auto& o : driver.calls(limit, keys, us(kEpochUs))) {
    ASSERT_TRUE(o.status.ok());
    EXPECT_TRUE(o.decision.allowed);
  }
  // ~300 bytes per call: 200 calls fill a few 16 KB reads. One write per
  // call would make Redis process about 200 reads.
  const long long used = reads() - before;
  EXPECT_LE(used, 20) << "calls issued in one turn did not go out together";
}

TEST_F(RedisStoreTest, CallsOfOneTurnShareScriptCallsAndKeepTheirOrder) {
  RedisStoreOptions o = local_options(server_.address());
  o.max_batch = 30;
  store_ = make_store(o);
  ASSERT_NE(store_, nullptr);
  AsyncDriver driver(store_);
  const Limit limit = must(Limit::token_bucket(10, 1, 1h));
  driver.call(limit, "warm-up", us(kEpochUs));
  const auto evalsha_calls = [&] {
    const std::string info = server_.text({"INFO", "commandstats"});
    const size_t at = info.find("cmdstat_evalsha:calls=");
    return std::stoll(info.substr(at + 22));
  };
  const long long before = evalsha_calls();
  // 100 requests on one hot key in one loop turn: four script calls of at
  // most max_batch (30 + 30 + 30 + 10), decided one after another in issue
  // order.
  const auto outcomes = driver.calls(limit, std::vector<std::string>(100, "hot"), us(kEpochUs));
  for (size_t i = 0; i < outcomes.size(); ++i) {
    ASSERT_TRUE(outcomes[i].status.ok());
    EXPECT_EQ(outcomes[i].decision.allowed, i < 10) << i;
    EXPECT_EQ(outcomes[i].decision.remaining, i < 10 ? 9 - i : 0) << i;
  }
  // The health check does not use EVALSHA; the warm-up call was before.
  EXPECT_EQ(evalsha_calls() - before, 4);
}

// Calls of a command so far, from INFO commandstats (commands a script runs
// count too), 0 for one never run.
long long command_calls(const RedisServer& server, const std::string& name) {
  const std::string info = server.text({"INFO", "commandstats"});
  const std::string field = "cmdstat_" + name + ":calls=";
  const size_t at = info.find(field);
  return at == std::string::npos ? 0 : std::stoll(info.substr(at + field.size()));
}

// Acquires on one key, each issued in a loop turn of its own (the client's
// end-of-turn flush runs between them); await() waits for every completion.
class TurnByTurn {
 public:
  TurnByTurn(AsyncDriver& driver, RedisStore& store, const Limit& limit, size_t n, Nanos now)
      : requests_(n), decisions_(n), statuses_(n), completions_(n, 0) {
    for (size_t i = 0; i < n; ++i) {
      driver.run([&, i] {
        requests_[i] = {&limit, "turn-by-turn", 1};
        store.acquire_async({&requests_[i], 1}, now, {&decisions_[i], 1}, [this, i](Status s) {
          std::lock_guard<std::mutex> lock(mutex_);
          statuses_[i] = std::move(s);
          ++completions_[i];
          ++completed_;
          done_.notify_all();
        });
      });
    }
  }

  void await() {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return completed_ >= requests_.size(); });
  }

  const Decision& decision(size_t i) const { return decisions_[i]; }
  const Status& status(size_t i) const { return statuses_[i]; }
  int completions(size_t i) const { return completions_[i]; }

 private:
  std::vector<AcquireRequest> requests_;
  std::vector<Decision> decisions_;
  std::vector<Status> statuses_;
  std::vector<int> completions_;
  size_t completed_ = 0;
  std::mutex mutex_;
  std::condition_variable done_;
};

// A store whose requests wait a minute for Redis (which the tests stop),
// on a driver's loop, its script loaded. A batch waiting behind a call in
// flight takes requests for longer than a test lasts, so how many batches
// the requests fill does not depend on how fast the machine issues them.
class InFlightTest : public RedisStoreTest {
 protected:
  virtual std::chrono::milliseconds max_hold() const { return 10min; }

  void SetUp() override {
    RedisStoreTest::SetUp();
    if (HasFatalFailure() || IsSkipped()) return;
    RedisStoreOptions o = local_options(server_.address());
    o.timeout = 60s;  // the requests wait for Redis to continue, not for a timeout
    o.max_hold = max_hold();
    store_ = make_store(o);
    ASSERT_NE(store_, nullptr);
    driver_ = std::make_unique<AsyncDriver>(store_);
    ASSERT_TRUE(driver_->call(limit_, "warm-up", us(kEpochUs)).status.ok());
  }

  const Limit limit_ = must(Limit::token_bucket(8, 1, 1h));
  std::unique_ptr<AsyncDriver> driver_;
};

// While a script call is in flight, the requests of the following loop turns
// wait in one batch and leave together when its reply comes: Redis stopped
// (SIGSTOP) keeps the first call in flight while ten more are issued, turn
// after turn, and then runs two script calls for the eleven, in issue order.
TEST_F(InFlightTest, RequestsIssuedWhileACallIsInFlightLeaveInOneCallWhenItAnswers) {
  const long long before = command_calls(server_, "evalsha");
  ASSERT_TRUE(server_.pause());
  TurnByTurn turns(*driver_, *store_, limit_, 11, us(kEpochUs));
  ASSERT_TRUE(server_.resume());
  turns.await();
  for (size_t i = 0; i < 11; ++i) {
    ASSERT_TRUE(turns.status(i).ok()) << i << ": " << turns.status(i).error().message;
    EXPECT_EQ(turns.completions(i), 1) << i;
    EXPECT_EQ(turns.decision(i).allowed, i < 8) << i;
    EXPECT_EQ(turns.decision(i).remaining, i < 8 ? 7 - i : 0) << i;
  }
  // The first request's call, then the batch of the ten others.
  EXPECT_EQ(command_calls(server_, "evalsha") - before, 2);
}

// The default span of a waiting batch.
class HoldSpanTest : public InFlightTest {
 protected:
  std::chrono::milliseconds max_hold() const override { return RedisStoreOptions{}.max_hold; }
};

// A batch waiting for the call in flight takes requests for 2 ms: a request
// issued later opens the next batch, and the two leave at once, pipelined
// behind the call in flight (the fast path's one deadline per batch then
// spans no more than that).
TEST_F(HoldSpanTest, ABatchWaitingForACallInFlightTakesRequestsForTwoMilliseconds) {
  const long long before = command_calls(server_, "evalsha");
  ASSERT_TRUE(server_.pause());
  TurnByTurn first(*driver_, *store_, limit_, 2, us(kEpochUs));  // in flight, then waiting
  // Not a synchronisation: the gap that puts the next request past the
  // waiting batch's 2 ms.
  std::this_thread::sleep_for(3ms);
  TurnByTurn later(*driver_, *store_, limit_, 1, us(kEpochUs));
  ASSERT_TRUE(server_.resume());
  first.await();
  later.await();
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(first.status(i).ok()) << i;
    EXPECT_EQ(first.decision(i).remaining, 7 - i) << i;
  }
  ASSERT_TRUE(later.status(0).ok());
  EXPECT_EQ(later.decision(0).remaining, 5u);
  EXPECT_EQ(command_calls(server_, "evalsha") - before, 3);
}

// Requests waiting for a call in flight are not left behind when the
// connection dies under it: each is answered once, at the loss, not at the
// timeout (a minute here). The one sent before the loss learns that the
// connection was lost, the ten waiting that they cannot be sent.
TEST_F(InFlightTest, RequestsWaitingBehindACallInFlightFailOnceWhenTheConnectionDies) {
  ASSERT_TRUE(server_.pause());
  TurnByTurn turns(*driver_, *store_, limit_, 11, us(kEpochUs));
  server_.kill();
  turns.await();
  const std::string at = "Redis at " + server_.address();
  const std::string lost = "connection to " + at + " lost";
  const std::string unsent = "cannot send to " + at;
  for (size_t i = 0; i < 11; ++i) {
    ASSERT_FALSE(turns.status(i).ok()) << i;
    EXPECT_EQ(turns.status(i).error().code, ErrorCode::kStoreUnavailable) << i;
    EXPECT_EQ(turns.status(i).error().message, i == 0 ? lost : unsent) << i;
    EXPECT_EQ(turns.completions(i), 1) << i;
  }
}

// An acquire whose only limit is a fixed_window without a block takes the
// fast path (fast_fixed_window.lua): one script call per loop turn, one TIME,
// one INCRBY per request, one PEXPIRE per new counter and one DECRBY per
// denied request; and it shares its state with everything else: the
// decision script (a request with two limits), a refund, a reset.
TEST_F(RedisStoreTest, FixedWindowAloneTakesTheFastPathOnTheSameState) {
  AsyncDriver driver(store_);
  const Limit limit = must(Limit::fixed_window(3, 1h));
  const std::string fast_sha(redis::kFastFixedWindowScriptSha1);
  const std::string script_sha(redis::kLuaScriptSha1);
  const auto loaded = [&](const std::string& sha) {
    Reply r = server_.command({"SCRIPT", "EXISTS", sha});
    return r && r->elements == 1 ? r->element[0]->integer : -1;
  };
  ASSERT_TRUE(driver.call(limit, "warm-up", us(kEpochUs)).decision.allowed);
  EXPECT_EQ(loaded(fast_sha), 1) << "the SHA1 computed at build time is Redis's";
  EXPECT_EQ(loaded(script_sha), 0) << "the decision script ran";

  // (Not TIME: the health check reads it too.)
  const std::vector<std::string> names = {"evalsha", "eval", "incrby", "pexpire",
                                          "decrby",  "mget", "set",    "get"};
  std::vector<long long> before;
  for (const std::string& n : names) before.push_back(command_calls(server_, n));
  // Five on one key (3 allowed, 2 denied) and two on another, one loop turn.
  const std::vector<std::string> keys = {"fw", "fw", "other", "fw", "fw", "other", "fw"};
  const auto outcomes = driver.calls(limit, keys, us(kEpochUs + 10), 1);
  // Windows of an hour, aligned to the epoch.
  constexpr int64_t kHourUs = 3'600'000'000;
  const Nanos to_end = us(kHourUs - (kEpochUs + 10) % kHourUs);
  const std::vector<bool> allowed = {true, true, true, true, false, true, false};
  const std::vector<uint64_t> remaining = {2, 1, 2, 0, 0, 1, 0};
  for (size_t i = 0; i < outcomes.size(); ++i) {
    ASSERT_TRUE(outcomes[i].status.ok()) << outcomes[i].status.error().message;
    EXPECT_EQ(outcomes[i].decision.allowed, allowed[i]) << i;
    EXPECT_EQ(outcomes[i].decision.remaining, remaining[i]) << i;
    EXPECT_EQ(outcomes[i].decision.limit, 3u);
    EXPECT_EQ(outcomes[i].decision.reset_after, to_end) << i;
    EXPECT_EQ(outcomes[i].decision.retry_after, allowed[i] ? Nanos{0} : to_end) << i;
  }
  const std::vector<long long> expected = {1, 0, 7, 2, 2, 0, 0, 0};
  for (size_t i = 0; i < names.size(); ++i)
    EXPECT_EQ(command_calls(server_, names[i]) - before[i], expected[i]) << names[i];
  EXPECT_EQ(loaded(script_sha), 0);

  // The decision script reads what the fast path wrote: with a second
  // limit, "fw" is still denied by its fixed window (nothing charged).
  const Limit bucket = must(Limit::token_bucket(10, 1, 1h));
  AcquireRequest both[2] = {{&limit, "fw", 1}, {&bucket, "fw", 1}};
  Decision out[2];
  ASSERT_TRUE(store_->acquire(both, us(kEpochUs + 20), out).ok());
  EXPECT_FALSE(out[0].allowed);
  EXPECT_EQ(out[0].remaining, 0u);
  EXPECT_TRUE(out[1].allowed);
  EXPECT_EQ(loaded(script_sha), 1);
  // A refund of one of the fast path's charges gives it back...
  const RefundRequest back{&limit, "fw", 1, outcomes[0].decision.decided_at};
  ASSERT_TRUE(store_->refund({&back, 1}, us(kEpochUs + 30)).ok());
  auto d = acquire_one(*store_, limit, "fw", us(kEpochUs + 40));
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->allowed);
  EXPECT_EQ(d->remaining, 0u);
  // ... and a reset deletes its state.
  auto reset = store_->reset(limit, "fw");
  ASSERT_TRUE(reset.ok());
  EXPECT_TRUE(reset.value());
  d = acquire_one(*store_, limit, "fw", us(kEpochUs + 50));
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->allowed);
  EXPECT_EQ(d->remaining, 2u);
  // The state is the window's counter, an integer, in a key named with the
  // window's index; the state key itself holds nothing.
  const std::string counter = store_->redis_window_key(limit, "fw", us(kEpochUs + 50));
  const std::string state = store_->redis_key(limit, "fw");
  const size_t colon = state.size() - std::string_view(":fw").size();
  EXPECT_EQ(counter, state.substr(0, colon) + "#" + std::to_string(kEpochUs / kHourUs) +
                         state.substr(colon));
  EXPECT_EQ(server_.text({"GET", counter}), "1");
  EXPECT_EQ(server_.integer({"EXISTS", store_->redis_key(limit, "fw")}), 0);
}

TEST_F(RedisStoreTest, ExactlyCapacityAllowedAcrossStoresAndThreads) {
  // Three stores stand for three Sluice instances sharing one Redis; each has
  // two worker threads. 3,000 concurrent requests on one key, no refill.
  const Limit limit = must(Limit::token_bucket(100, 1, 24h * 365));
  std::vector<std::shared_ptr<RedisStore>> stores;
  std::vector<std::unique_ptr<AsyncDriver>> drivers;
  for (int s = 0; s < 3; ++s) {
    RedisStoreOptions o = local_options(server_.address());
    o.time_source = RedisTimeSource::kRedis;
    o.timeout = 10s;  // six loops on a shared machine under sanitizers: not a latency test
    stores.push_back(make_store(o));
    for (int t = 0; t < 2; ++t) drivers.push_back(std::make_unique<AsyncDriver>(stores.back()));
  }
  std::atomic<int> allowed{0};
  std::atomic<int> errors{0};
  std::mutex mutex;
  std::string first_error;
  std::vector<std::thread> threads;
  for (auto& d : drivers) {
    threads.emplace_back([&, driver = d.get()] {
      std::vector<std::string> keys(500, "global");
      for (const auto& o : driver->calls(limit, keys, us(kEpochUs))) {
        if (!o.status.ok() && errors++ == 0) {
          std::lock_guard<std::mutex> lock(mutex);
          first_error = o.status.error().message;
        }
        if (o.status.ok() && o.decision.allowed) ++allowed;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0) << first_error;
  EXPECT_EQ(allowed.load(), 100);
}

// The same across stores and threads on the fixed window's fast path, with
// costs 1 to 5, and one request in three also under a second limit (the
// general script) on the same key: every denial is for a cost that no longer
// fitted, nothing denied is charged, and the window ends exactly full.
TEST_F(RedisStoreTest, FixedWindowWithCostsIsExactAcrossStoresAndThreads) {
  const Limit limit = must(Limit::fixed_window(1'000, 24h * 365 * 8));
  const Limit roomy = must(Limit::token_bucket(1'000'000, 1, 1h));
  std::vector<std::shared_ptr<RedisStore>> stores;
  std::vector<std::unique_ptr<AsyncDriver>> drivers;
  for (int s = 0; s < 3; ++s) {
    RedisStoreOptions o = local_options(server_.address());
    o.time_source = RedisTimeSource::kRedis;
    o.timeout = 10s;       // not a latency test
    o.deny_cache = false;  // every decision Redis's
    stores.push_back(make_store(o));
    for (int t = 0; t < 2; ++t) drivers.push_back(std::make_unique<AsyncDriver>(stores.back()));
  }
  constexpr size_t kCalls = 500;
  struct Call {
    AcquireRequest requests[2];
    Decision out[2];
    Status status;
  };
  std::atomic<uint64_t> charged{0};
  std::atomic<int> errors{0};
  std::atomic<int> bad_denials{0};
  std::atomic<int> unit_denials{0};
  std::vector<std::thread> threads;
  for (size_t d = 0; d < drivers.size(); ++d) {
    threads.emplace_back([&, d] {
      AsyncDriver& driver = *drivers[d];
      std::vector<Call> calls(kCalls);
      std::promise<void> all_done;
      size_t remaining = kCalls;
      driver.run([&] {
        for (size_t i = 0; i < kCalls; ++i) {
          Call& c = calls[i];
          const uint64_t cost = 1 + (i + d) % 5;
          c.requests[0] = {&limit, "global-fw", cost};
          c.requests[1] = {&roomy, "global-fw", 1};
          const size_t n = (i + d) % 3 == 0 ? 2 : 1;
          stores[d / 2]->acquire_async({c.requests, n}, us(kEpochUs), {c.out, n},
                                       [&, i](Status st) {
                                         calls[i].status = std::move(st);
                                         if (--remaining == 0) all_done.set_value();
                                       });
        }
      });
      all_done.get_future().wait();
      for (const Call& c : calls) {
        if (!c.status.ok()) {
          ++errors;
          continue;
        }
        const uint64_t cost = c.requests[0].cost;
        if (c.out[0].allowed) {
          charged += cost;
        } else {
          if (c.out[0].remaining >= cost) ++bad_denials;
          if (cost == 1) ++unit_denials;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(bad_denials.load(), 0);
  // 3,000 requests of 3 on average: the window filled early, and a request
  // of 1 was denied only once nothing was left.
  EXPECT_GT(unit_denials.load(), 0);
  EXPECT_EQ(charged.load(), 1'000u);
  EXPECT_EQ(server_.text({"GET", stores[0]->redis_window_key(limit, "global-fw", us(kEpochUs))}),
            "1000");
}

TEST_F(RedisStoreTest, SynchronousCallsFromManyThreads) {
  const Limit limit = must(Limit::fixed_window(250, 1h));
  std::atomic<int> allowed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 100; ++i) {
        auto d = acquire_one(*store_, limit, "sync", us(kEpochUs));
        if (d.ok() && d->allowed) ++allowed;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(allowed.load(), 250);
}

TEST_F(RedisStoreTest, AsyncCallFromAThreadNeverAttachedRunsOnTheInternalThread) {
  const Limit limit = must(Limit::token_bucket(2, 1, 1h));
  AcquireRequest r{&limit, "unattached", 1};
  struct Seen {
    Decision decision;
    Status status;
    std::thread::id thread;
    // A synchronous call made from `done`: the store refuses one made on its
    // own I/O thread (it would wait for itself), which tells that thread apart.
    Status nested;
    std::promise<void> done;
  };
  // Shared with the callback, should it come after the bounded wait.
  auto seen = std::make_shared<Seen>();
  RedisStore* store = store_.get();
  store_->acquire_async(
      {&r, 1}, us(kEpochUs), {&seen->decision, 1}, [seen, store, &limit](Status s) {
        const Result<Decision> nested = acquire_one(*store, limit, "nested", us(kEpochUs));
        seen->status = std::move(s);
        seen->thread = std::this_thread::get_id();
        seen->nested = nested.ok() ? Status() : Status(nested.error());
        seen->done.set_value();
      });
  ASSERT_EQ(seen->done.get_future().wait_for(10s), std::future_status::ready)
      << "no callback within 10 s";
  ASSERT_TRUE(seen->status.ok()) << seen->status.error().message;
  EXPECT_TRUE(seen->decision.allowed);
  EXPECT_EQ(seen->decision.remaining, 1u);
  EXPECT_NE(seen->thread, std::this_thread::get_id());
  ASSERT_FALSE(seen->nested.ok()) << "done ran on a thread the store does not run";
  EXPECT_EQ(seen->nested.error().code, ErrorCode::kInternal);
  EXPECT_EQ(seen->nested.error().message,
            "a synchronous Redis store call from the store's own I/O thread would deadlock");
}

Limit with_block(Limit limit, Nanos block) {
  LimitSpec spec = limit.spec();
  spec.block = block;
  return must(Limit::create(spec));
}

TEST_F(RedisStoreTest, ALockoutIsSharedByEveryStoreOnTheSameRedis) {
  // Two stores stand for two Sluice instances. The lockout one starts is in
  // Redis, beside the state, so the other denies for the rest of the block.
  // Without the deny cache, so that `a` asks Redis again after b's reset (a
  // deny cache does not see another instance's reset: deny_cache_test.cc).
  RedisStoreOptions no_cache = local_options(server_.address());
  no_cache.deny_cache = false;
  const auto a = make_store(no_cache);
  ASSERT_NE(a, nullptr);
  const auto b = make_store(local_options(server_.address()));
  ASSERT_NE(b, nullptr);
  const Limit limit = with_block(must(Limit::fixed_window(1, 1s)), 5s);
  const int64_t t = (kEpochUs / 1'000'000) * 1'000'000;  // a window's start
  ASSERT_TRUE(acquire_one(*a, limit, "shared", us(t))->allowed);
  auto denied = acquire_one(*a, limit, "shared", us(t + 100'000));
  ASSERT_TRUE(denied.ok()) << denied.error().message;
  EXPECT_FALSE(denied->allowed);
  EXPECT_EQ(denied->retry_after, 5s);
  // The lockout key holds when it ends (us), for the block plus ttl_extra.
  const std::string lockout = a->redis_lockout_key(limit, "shared");
  EXPECT_EQ(lockout, b->redis_lockout_key(limit, "shared"));
  EXPECT_EQ(RedisStore::key_slot(lockout), RedisStore::key_slot(a->redis_key(limit, "shared")));
  EXPECT_EQ(server_.text({"GET", lockout}), std::to_string(t + 100'000 + 5'000'000));
  const long long pttl = server_.integer({"PTTL", lockout});
  EXPECT_GT(pttl, 65'000 - kPttlMarginMs);
  EXPECT_LE(pttl, 65'000);

  // A new window, where the count would allow: the other store denies.
  auto other = acquire_one(*b, limit, "shared", us(t + 1'500'000));
  ASSERT_TRUE(other.ok()) << other.error().message;
  EXPECT_FALSE(other->allowed);
  EXPECT_EQ(other->remaining, 0u);
  EXPECT_EQ(other->reset_after, 3'600ms);
  EXPECT_EQ(other->retry_after, 3'600ms);
  EXPECT_EQ(other->decided_at, us(t + 1'500'000));
  // Another key is not locked out.
  EXPECT_TRUE(acquire_one(*b, limit, "elsewhere", us(t + 1'500'000))->allowed);
  // A reset through the other store lifts it for both.
  auto reset = b->reset(limit, "shared");
  ASSERT_TRUE(reset.ok());
  EXPECT_TRUE(*reset);
  EXPECT_EQ(server_.integer({"EXISTS", lockout}), 0);
  EXPECT_TRUE(acquire_one(*a, limit, "shared", us(t + 1'600'000))->allowed);
}

TEST_F(RedisStoreTest, RefundAsyncRunsOnTheAttachedLoop) {
  AsyncDriver driver(store_);
  const Limit limit = must(Limit::token_bucket(2, 1, 1h));
  const auto first = driver.call(limit, "attached", us(kEpochUs));
  ASSERT_TRUE(first.status.ok()) << first.status.error().message;
  ASSERT_TRUE(driver.call(limit, "attached", us(kEpochUs)).decision.allowed);
  ASSERT_FALSE(driver.call(limit, "attached", us(kEpochUs)).decision.allowed);

  struct Seen {
    Status status;
    std::thread::id thread;
    bool returned = false;  // refund_async has returned
    bool at_once = false;   // done ran before it returned
    std::promise<void> done;
  };
  auto seen = std::make_shared<Seen>();  // shared with a callback that may come late
  std::thread::id loop;
  driver.run([&] {
    loop = std::this_thread::get_id();
    // The key and request may go when refund_async returns.
    const std::string key = "attached";
    const RefundRequest r{&limit, key, 1, first.decision.decided_at};
    store_->refund_async({&r, 1}, us(kEpochUs), [seen](Status s) {
      seen->status = std::move(s);
      seen->thread = std::this_thread::get_id();
      seen->at_once = !seen->returned;
      seen->done.set_value();
    });
    seen->returned = true;
  });
  ASSERT_EQ(seen->done.get_future().wait_for(10s), std::future_status::ready)
      << "no callback within 10 s";
  ASSERT_TRUE(seen->status.ok()) << seen->status.error().message;
  EXPECT_EQ(seen->thread, loop);
  EXPECT_FALSE(seen->at_once) << "a refund sent to Redis completed before refund_async returned";
  // One token back.
  const auto after = driver.call(limit, "attached", us(kEpochUs));
  EXPECT_TRUE(after.decision.allowed);
  EXPECT_EQ(after.decision.remaining, 0u);
  EXPECT_FALSE(driver.call(limit, "attached", us(kEpochUs)).decision.allowed);
}

TEST_F(RedisStoreTest, ARefundNamesItsChargeByDecidedAtFromRedisTime) {
  // With time_source redis the caller's `now` is ignored: the charge's
  // decided_at is Redis's time, and is what the refund needs. A sliding log
  // gives back only from entries at or after it: a decided_at later than
  // the charge's entry would find nothing.
  RedisStoreOptions o = local_options(server_.address());
  o.time_source = RedisTimeSource::kRedis;
  auto store = make_store(o);
  ASSERT_NE(store, nullptr);
  const Limit limit = must(Limit::sliding_log(2, 1h));
  Reply time = server_.command({"TIME"});
  const int64_t redis_us = std::stoll(time->element[0]->str) * 1'000'000;
  ASSERT_TRUE(acquire_one(*store, limit, "by-redis", us(0))->allowed);
  auto charge = acquire_one(*store, limit, "by-redis", us(0));
  ASSERT_TRUE(charge.ok()) << charge.error().message;
  ASSERT_TRUE(charge->allowed);
  EXPECT_LE(std::llabs(charge->decided_at.count() / 1'000 - redis_us), 5'000'000);
  EXPECT_EQ(charge->decided_at.count() % 1'000, 0);
  ASSERT_FALSE(acquire_one(*store, limit, "by-redis", us(0))->allowed);
  const RefundRequest r{&limit, "by-redis", 1, charge->decided_at};
  Status s = store->refund({&r, 1}, us(0));
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(server_.integer({"ZCARD", store->redis_key(limit, "by-redis")}), 1);
  auto again = acquire_one(*store, limit, "by-redis", us(0));
  EXPECT_TRUE(again->allowed);
  EXPECT_EQ(again->remaining, 0u);
}

TEST_F(RedisStoreTest, AnInvalidRefundGivesNothingBack) {
  const Limit limit = must(Limit::token_bucket(1, 1, 1h));
  const Limit too_big = must(Limit::token_bucket(53'000, 7, 24h));  // see RefusesALimit...
  ASSERT_TRUE(acquire_one(*store_, limit, "k", us(kEpochUs))->allowed);
  const Nanos at = us(kEpochUs);
  struct Case {
    std::vector<RefundRequest> requests;
    ErrorCode code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{{&limit, "k", 1, at}, {nullptr, "k", 1, at}},
       ErrorCode::kInvalidArgument,
       "refund: null limit"},
      {{{&limit, "k", 1, at}, {&limit, "k", 0, at}},
       ErrorCode::kInvalidArgument,
       "refund: cost must be at least 1"},
      {{{&limit, "k", 1, at}, {&limit, "k", 1, Nanos{-1'000}}},
       ErrorCode::kInvalidArgument,
       "refund: the Redis store needs a charge time at or after the epoch"},
      {{{&limit, "k", 1, at}, {&too_big, "k", 1, at}}, ErrorCode::kInvalidArgument, ""},
  };
  for (const Case& c : cases) {
    Status s = store_->refund(c.requests, at);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().code, c.code);
    if (!c.message.empty()) {
      EXPECT_EQ(s.error().message, c.message);
    }
  }
  // The first request of each was valid, and was not given back.
  EXPECT_FALSE(acquire_one(*store_, limit, "k", us(kEpochUs))->allowed);
  EXPECT_TRUE(store_->refund({}, at).ok());
}

// concurrency: slots are sliding_log members whose window is the lease (no
// script of its own), given back by the sliding_log refund, with the
// denial's retry capped at 1 s in the client; the memory store's decisions.
TEST_F(RedisStoreTest, ConcurrencySlotsAreHeldReleasedAndExpireAsInMemory) {
  const Limit limit = must(Limit::concurrency(2, 10s));
  MemoryStore memory;
  // (time in us after kEpochUs, release the charge made at this offset, or -1)
  struct Step {
    int64_t at;
    int64_t release;
  };
  const Step steps[] = {{0, -1}, {1, -1},          {2, -1},          {3, 0},          {4, -1},
                        {5, -1}, {10'000'001, -1}, {10'000'002, -1}, {10'000'003, -1}};
  for (const Step& s : steps) {
    const Nanos now = us(kEpochUs + s.at);
    if (s.release >= 0) {
      const RefundRequest back{&limit, "k", 1, us(kEpochUs + s.release)};
      ASSERT_TRUE(store_->refund({&back, 1}, now).ok());
      ASSERT_TRUE(memory.refund({&back, 1}, now).ok());
    }
    auto redis = acquire_one(*store_, limit, "k", now);
    ASSERT_TRUE(redis.ok()) << redis.error().message;
    const AcquireRequest r{&limit, "k", 1};
    Decision mem;
    ASSERT_TRUE(memory.acquire({&r, 1}, now, {&mem, 1}).ok());
    EXPECT_EQ(*redis, mem) << "at +" << s.at << "us";
  }
}

TEST_F(RedisStoreTest, ConcurrencyADenialWaitsAtMostOneSecond) {
  const Limit limit = must(Limit::concurrency(1, 1h));
  ASSERT_TRUE(acquire_one(*store_, limit, "k", us(kEpochUs))->allowed);
  auto d = acquire_one(*store_, limit, "k", us(kEpochUs + 1));
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->allowed);
  EXPECT_EQ(d->retry_after, Nanos(1s));
  EXPECT_EQ(d->reset_after, us(3'600'000'000 - 1));
  // A slot is one sliding_log member under the lease's TTL.
  const std::string key = store_->redis_key(limit, "k");
  EXPECT_EQ(server_.integer({"ZCARD", key}), 1);
  EXPECT_GT(server_.integer({"PTTL", key}), 3'500'000);
}

}  // namespace
}  // namespace sluice::testing
