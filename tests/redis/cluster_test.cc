// RedisStore on a 3-master Redis Cluster on loopback: keys spread over every
// master, CRC16 slots agree with Redis, a slot migrated during the test is
// followed through ASK and MOVED without losing a count (also under load),
// the limits of one request stay in one slot, a loop turn's requests of many
// slots are one script call per master (and split per slot, still exact,
// when a slot of the call moves or migrates), and a master that dies fails
// only its own keys.
#include <algorithm>
#include <cstdio>
#include <future>
#include <set>

#include "load.h"
#include "store/redis/script_limit.h"
#include "test_util.h"

namespace sluice::testing {
namespace {

class ClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SLUICE_REQUIRE_REDIS();
    ASSERT_TRUE(cluster_.start());
    RedisStoreOptions o = local_options(cluster_.node(0).address());
    o.cluster = true;
    // Any one seed is enough; the slot map names the rest.
    o.topology_refresh = 200ms;
    store_ = make_store(o);
    ASSERT_NE(store_, nullptr);
  }

  // A client key whose state key (under `limit`) falls in `slot`.
  std::string key_in_slot(const Limit& limit, int slot, const std::string& stem) {
    for (int i = 0; i < 2'000'000; ++i) {
      std::string key = stem + "|c" + std::to_string(i);
      if (RedisStore::key_slot(store_->redis_key(limit, key)) == slot) return key;
    }
    ADD_FAILURE() << "no key found for slot " << slot;
    return stem;
  }

  // CLUSTER SETSLOT IMPORTING on the target, then MIGRATING on the source.
  void begin_migration(int slot, int source, int target) {
    const std::string s = std::to_string(slot);
    ASSERT_EQ(
        cluster_.node(static_cast<size_t>(target))
            .text({"CLUSTER", "SETSLOT", s, "IMPORTING", cluster_.id(static_cast<size_t>(source))}),
        "OK");
    ASSERT_EQ(
        cluster_.node(static_cast<size_t>(source))
            .text({"CLUSTER", "SETSLOT", s, "MIGRATING", cluster_.id(static_cast<size_t>(target))}),
        "OK");
  }

  // MIGRATE of `keys` from the source to the target.
  void migrate(int source, int target, const std::vector<std::string>& keys) {
    std::vector<std::string> args = {
        "MIGRATE", "127.0.0.1", std::to_string(cluster_.node(static_cast<size_t>(target)).port()),
        "",        "0",         "5000",
        "KEYS"};
    args.insert(args.end(), keys.begin(), keys.end());
    ASSERT_EQ(cluster_.node(static_cast<size_t>(source)).text(args), "OK");
  }

  // Every node assigns the slot to the target (the target first, as
  // redis-cli does, so that it never answers MOVED back to the source).
  void finish_migration(int slot, int target) {
    const std::string id = cluster_.id(static_cast<size_t>(target));
    std::vector<size_t> order = {static_cast<size_t>(target)};
    for (size_t n = 0; n < cluster_.size(); ++n) {
      if (n != static_cast<size_t>(target)) order.push_back(n);
    }
    for (size_t n : order) {
      ASSERT_EQ(cluster_.node(n).text({"CLUSTER", "SETSLOT", std::to_string(slot), "NODE", id}),
                "OK");
    }
  }

  // Script calls each master has run so far.
  std::vector<long long> script_calls() {
    std::vector<long long> calls;
    for (size_t n = 0; n < cluster_.size(); ++n) calls.push_back(cluster_.node(n).script_calls());
    return calls;
  }

  // The same migration under load: every round sends one call per key in
  // one loop turn, so calls for different keys of the migrating slot travel
  // in one script call while the slot's keys are split between the two
  // masters (Redis answers such a call TRYAGAIN). Nothing fails and every
  // key allows exactly its capacity (no refill within the test).
  void migrate_under_load(const Limit& limit, long long capacity) {
    const int slot = 4321;
    const int source = cluster_.owner(slot);
    ASSERT_GE(source, 0);
    const int target = (source + 1) % 3;
    // Three keys of the slot from the start, five elsewhere and one in a lower
    // slot of the source (so that the source's calls declare that slot and
    // pass the migrating one's keys as a key group, which the source refuses
    // while they are split: the call is sent again per slot), then two more
    // of the slot once it is migrating (created on the target through ASK).
    int lower = 0;
    while (lower < slot && cluster_.owner(lower) != source) ++lower;
    ASSERT_LT(lower, slot);
    std::vector<std::string> keys;
    for (int i = 0; i < 3; ++i)
      keys.push_back(key_in_slot(limit, slot, "mig-old" + std::to_string(i)));
    for (int i = 0; i < 5; ++i) keys.push_back("elsewhere|k" + std::to_string(i));
    keys.push_back(key_in_slot(limit, lower, "mig-lower"));
    for (int i = 0; i < 2; ++i)
      keys.push_back(key_in_slot(limit, slot, "mig-new" + std::to_string(i)));
    const auto stats_before = store_->stats();

    AsyncDriver driver(store_);
    std::atomic<bool> finished{false};
    std::atomic<Load::Clock::rep> finished_at{0};
    Load load(
        driver, limit, keys, 9,
        [&](const std::vector<Load::Record>& round) {
          if (!finished.load() || round.front().issued.time_since_epoch().count() <= finished_at)
            return false;
          return std::all_of(round.begin(), round.end(),
                             [](const Load::Record& r) { return r.ok && !r.allowed; });
        },
        45s, 30'000);
    // Each step waits for rounds of load, so that each state of the slot
    // (migrating, keys split, keys moved, assigned) meets calls.
    constexpr size_t kRoundsPerStep = 10;
    ASSERT_TRUE(load.wait_rounds(20));
    ASSERT_NO_FATAL_FAILURE(begin_migration(slot, source, target));
    load.activate(keys.size());
    ASSERT_TRUE(load.wait_rounds(kRoundsPerStep));
    for (int i = 0; i < 3; ++i) {
      ASSERT_NO_FATAL_FAILURE(
          migrate(source, target, {store_->redis_key(limit, keys[static_cast<size_t>(i)])}));
      ASSERT_TRUE(load.wait_rounds(kRoundsPerStep));
    }
    ASSERT_NO_FATAL_FAILURE(finish_migration(slot, target));
    finished_at = Load::Clock::now().time_since_epoch().count();
    finished = true;
    load.join();
    ASSERT_TRUE(load.completed()) << "the load ended by its bounds (" << load.rounds()
                                  << " rounds) before every key was used up";

    std::vector<long long> allowed(keys.size(), 0);
    size_t failed = 0;
    for (const Load::Record& r : load.records()) {
      if (!r.ok) {
        ++failed;
        continue;
      }
      allowed[r.key] += r.allowed;
    }
    EXPECT_EQ(failed, 0u) << "calls failed while the slot moved";
    for (size_t k = 0; k < keys.size(); ++k) EXPECT_EQ(allowed[k], capacity) << keys[k];
    const auto stats = store_->stats();
    EXPECT_GT(stats.ask, stats_before.ask);
    EXPECT_GT(stats.slot_splits, stats_before.slot_splits);
    const std::string slot_text = std::to_string(slot);
    EXPECT_EQ(cluster_.node(static_cast<size_t>(source))
                  .integer({"CLUSTER", "COUNTKEYSINSLOT", slot_text}),
              0);
    EXPECT_EQ(cluster_.node(static_cast<size_t>(target))
                  .integer({"CLUSTER", "COUNTKEYSINSLOT", slot_text}),
              5);
    std::printf(
        "slot migration under load: %zu calls in %zu rounds, %llu ASK, %llu TRYAGAIN, %llu MOVED, "
        "%llu slot splits\n",
        load.records().size(), load.rounds(),
        static_cast<unsigned long long>(stats.ask - stats_before.ask),
        static_cast<unsigned long long>(stats.tryagain - stats_before.tryagain),
        static_cast<unsigned long long>(stats.moved - stats_before.moved),
        static_cast<unsigned long long>(stats.slot_splits - stats_before.slot_splits));
  }

  RedisCluster cluster_;
  std::shared_ptr<RedisStore> store_;
};

Nanos ceil_us(Nanos d) {
  return Nanos{(d.count() + 999) / 1'000 * 1'000};
}

// Issues every request in one loop turn of `driver` (each its own
// acquire_async) and waits for all; a status per request.
std::vector<Status> acquire_in_one_turn(AsyncDriver& driver, RedisStore& store,
                                        std::vector<std::vector<AcquireRequest>>& requests,
                                        Nanos now, std::vector<std::vector<Decision>>& out) {
  std::vector<Status> status(requests.size());
  size_t remaining = requests.size();
  std::promise<void> all_done;
  driver.run([&] {
    for (size_t i = 0; i < requests.size(); ++i) {
      store.acquire_async(requests[i], now, out[i], [&, i](Status s) {
        status[i] = std::move(s);
        if (--remaining == 0) all_done.set_value();
      });
    }
  });
  all_done.get_future().wait();
  return status;
}

TEST_F(ClusterTest, SlotsAreComputedAsRedisComputesThem) {
  EXPECT_EQ(redis::crc16("123456789"), 0x31C3);  // CRC16/XMODEM check value
  const Limit limit = must(Limit::token_bucket(5, 1, 1s));
  for (const std::string key : {"ip:192.0.2.1", "policy:login|user:42", "", "{x}", "a}b{c"}) {
    const std::string redis_key = store_->redis_key(limit, key);
    EXPECT_EQ(cluster_.node(0).integer({"CLUSTER", "KEYSLOT", redis_key}),
              RedisStore::key_slot(redis_key))
        << redis_key;
  }
  // Keys with braces of their own: Redis hashes the first {...}.
  for (const std::string raw : {"plain", "{tag}rest", "pre{tag}", "{}{tag}", "{a", "x{}y"}) {
    EXPECT_EQ(cluster_.node(0).integer({"CLUSTER", "KEYSLOT", raw}), RedisStore::key_slot(raw))
        << raw;
  }
}

TEST_F(ClusterTest, KeysSpreadOverEveryMasterAndCountExactly) {
  const Limit limit = must(Limit::token_bucket(2, 1, 1h));
  std::vector<std::string> keys;
  for (int i = 0; i < 300; ++i) keys.push_back("route:x#0|ip:10.0.0." + std::to_string(i));
  AsyncDriver driver(store_);
  for (int round = 0; round < 3; ++round) {
    const auto outcomes = driver.calls(limit, keys, us(kEpochUs));
    for (const auto& o : outcomes) {
      ASSERT_TRUE(o.status.ok()) << o.status.error().message;
      EXPECT_EQ(o.decision.allowed, round < 2);
    }
  }
  long long total = 0;
  for (size_t n = 0; n < cluster_.size(); ++n) {
    const long long keys_here = cluster_.node(n).integer({"DBSIZE"});
    EXPECT_GT(keys_here, 50) << "master " << n << " holds too few keys";
    total += keys_here;
  }
  EXPECT_EQ(total, 300);
  EXPECT_GE(store_->stats().topology_refreshes, 1u);
}

TEST_F(ClusterTest, LimitsOfOneRequestMustShareTheClientKey) {
  const Limit a = must(Limit::token_bucket(3, 1, 1h));
  const Limit b = must(Limit::fixed_window(2, 1h));
  AcquireRequest same[] = {{&a, "policy:a|user:1", 1}, {&b, "route:r#1|user:1", 1}};
  Decision out[2];
  for (int i = 0; i < 3; ++i) {
    Status s = store_->acquire(same, us(kEpochUs), out);
    ASSERT_TRUE(s.ok()) << s.error().message;
    EXPECT_EQ(out[0].allowed && out[1].allowed, i < 2);
  }
  AcquireRequest split[] = {{&a, "policy:a|user:1", 1}, {&b, "route:r#1|user:2", 1}};
  Status s = store_->acquire(split, us(kEpochUs), out);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
}

TEST_F(ClusterTest, AMigratingSlotIsFollowedThroughAskAndMoved) {
  // Capacity 10, no refill: exactly 10 are allowed however the slot moves.
  const Limit limit = must(Limit::token_bucket(10, 1, 24h * 365));
  const Limit other = must(Limit::token_bucket(10, 1, 24h * 365));  // same definition
  const int slot = 1234;
  const std::string existing = key_in_slot(limit, slot, "migrate-existing");
  const std::string fresh = key_in_slot(limit, slot, "migrate-fresh");
  const int source = cluster_.owner(slot);
  ASSERT_GE(source, 0);
  const int target = (source + 1) % 3;
  // Only a MOVED may refresh the slot map here: a periodic refresh landing
  // between SETSLOT NODE and the next call would hide the MOVED under test.
  RedisStoreOptions o = local_options(cluster_.node(0).address());
  o.cluster = true;
  o.topology_refresh = 24h;
  store_ = make_store(o);
  ASSERT_NE(store_, nullptr);
  AsyncDriver driver(store_);
  int allowed = 0;
  for (int i = 0; i < 4; ++i)
    allowed += driver.call(limit, existing, us(kEpochUs)).decision.allowed;
  ASSERT_EQ(allowed, 4);

  // Start migrating: the source still has `existing`; `fresh` is new.
  RedisServer& src = cluster_.node(static_cast<size_t>(source));
  RedisServer& dst = cluster_.node(static_cast<size_t>(target));
  ASSERT_NO_FATAL_FAILURE(begin_migration(slot, source, target));

  // A key the source does not have is created on the target through ASK.
  const auto ask_before = store_->stats().ask;
  auto f = driver.call(limit, fresh, us(kEpochUs));
  ASSERT_TRUE(f.status.ok()) << f.status.error().message;
  EXPECT_TRUE(f.decision.allowed);
  EXPECT_GT(store_->stats().ask, ask_before);
  const std::string fresh_key = store_->redis_key(limit, fresh);
  const std::string slot_text = std::to_string(slot);
  EXPECT_EQ(src.integer({"CLUSTER", "COUNTKEYSINSLOT", slot_text}), 1);  // existing
  EXPECT_EQ(dst.integer({"CLUSTER", "COUNTKEYSINSLOT", slot_text}), 1);  // fresh

  // The key the source still has is served there.
  allowed += driver.call(limit, existing, us(kEpochUs)).decision.allowed;
  ASSERT_EQ(allowed, 5);

  // Move the existing key: now the source answers ASK for it too.
  const std::string existing_key = store_->redis_key(limit, existing);
  ASSERT_NO_FATAL_FAILURE(migrate(source, target, {existing_key}));
  const auto ask_mid = store_->stats().ask;
  allowed += driver.call(limit, existing, us(kEpochUs)).decision.allowed;
  ASSERT_EQ(allowed, 6);
  EXPECT_GT(store_->stats().ask, ask_mid);

  // Finish: every node assigns the slot to the target; the source says MOVED.
  // (Read before finishing: a call that missed its timeout on a loaded
  // machine also asks for the slot map, and such a reading may land right
  // after the finish; then no MOVED is needed to follow.)
  const auto moved_before = store_->stats().moved;
  const auto refreshes_before = store_->stats().topology_refreshes;
  ASSERT_NO_FATAL_FAILURE(finish_migration(slot, target));
  for (int i = 0; i < 10; ++i) {
    auto o = driver.call(limit, existing, us(kEpochUs));
    ASSERT_TRUE(o.status.ok()) << o.status.error().message;
    allowed += o.decision.allowed;
  }
  EXPECT_EQ(allowed, 10) << "a count was lost or doubled while the slot moved";
  EXPECT_TRUE(store_->stats().moved > moved_before ||
              store_->stats().topology_refreshes > refreshes_before)
      << "neither a MOVED nor a new reading of the slot map";
  EXPECT_EQ(dst.integer({"EXISTS", existing_key}), 1);
  EXPECT_EQ(dst.integer({"EXISTS", fresh_key}), 1);
  EXPECT_EQ(src.integer({"CLUSTER", "COUNTKEYSINSLOT", slot_text}), 0);
  // The fresh key kept its single count on the target.
  auto again = driver.call(other, fresh, us(kEpochUs));
  ASSERT_TRUE(again.status.ok());
  EXPECT_EQ(again.decision.remaining, 8u);
  // A MOVED has the slot map read again (the only reading here, as the
  // periodic one is a day away); once it is, calls go straight to the
  // target: no more MOVED.
  ASSERT_TRUE(
      wait_until([&] { return store_->stats().topology_refreshes > refreshes_before; }, 10s))
      << "the slot map was not read again after MOVED";
  const auto moved_settled = store_->stats().moved;
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(driver.call(limit, existing, us(kEpochUs)).status.ok());
  EXPECT_EQ(store_->stats().moved, moved_settled);
}

// The migration under load (migrate_under_load()) on a token bucket: a lone
// fixed window would take the fast path, whose batches are of one slot
// (fast_fixed_window.lua declares every key), and meet no key group.
TEST_F(ClusterTest, AMigratingSlotUnderLoadKeepsEveryCountExact) {
  migrate_under_load(must(Limit::token_bucket(300, 1, 24h)), 300);
}

// A sliding log keeps its state in a sorted set, which the call's MGET
// cannot read: its keys of a migrating slot still move, redirect and count
// exactly.
TEST_F(ClusterTest, AMigratingSlotUnderLoadKeepsEverySlidingLogExact) {
  migrate_under_load(must(Limit::sliding_log(300, 24h)), 300);
}

// A loop turn's requests on 300 client keys (about a hundred slots per
// master) go out as exactly one script call per master, and decide exactly
// what the memory store decides on the same trace: token_bucket refilling
// between the rounds, costs of 1 and 2, and on every third key a second limit
// of the same client (all-or-nothing).
TEST_F(ClusterTest, ALoopTurnOfManySlotsIsOneScriptCallPerMaster) {
  RedisStoreOptions o = local_options(cluster_.node(0).address());
  o.cluster = true;
  o.max_batch = 1'000;   // a master's share of the turn in one batch
  o.deny_cache = false;  // every request to Redis, so the counts are exact
  o.topology_refresh = 24h;
  store_ = make_store(o);
  ASSERT_NE(store_, nullptr);
  const Limit bucket = must(Limit::token_bucket(4, 1, 1s));
  const Limit window = must(Limit::fixed_window(3, 1s));
  std::vector<std::string> keys;
  std::vector<std::set<int>> slots(cluster_.size());
  for (int i = 0; i < 300; ++i) {
    keys.push_back("route:many#0|client:" + std::to_string(i));
    const int slot = RedisStore::key_slot(store_->redis_key(bucket, keys.back()));
    const int owner = cluster_.owner(slot);
    ASSERT_GE(owner, 0);
    slots[static_cast<size_t>(owner)].insert(slot);
  }
  for (const auto& of_master : slots) EXPECT_GT(of_master.size(), 50u);
  AsyncDriver driver(store_);
  // Every master has the script before counting (a first EVALSHA meets NOSCRIPT).
  for (int i = 0; i < 30; ++i)
    ASSERT_TRUE(acquire_one(*store_, bucket, "warm-up|" + std::to_string(i), us(kEpochUs)).ok());

  MemoryStore memory(MemoryStoreOptions{.max_keys = 10'000, .shards = 1, .seed = 1});
  size_t allowed = 0;
  size_t denied = 0;
  for (int round = 0; round < 6; ++round) {
    const Nanos now = us(kEpochUs + round * 400'000);
    std::vector<std::vector<AcquireRequest>> requests(keys.size());
    std::vector<std::vector<Decision>> redis(keys.size());
    std::vector<std::vector<Decision>> expected(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      requests[i].push_back({&bucket, keys[i], 1 + (i + static_cast<size_t>(round)) % 2});
      if (i % 3 == 0) requests[i].push_back({&window, keys[i], 1});
      redis[i].resize(requests[i].size());
      expected[i].resize(requests[i].size());
      ASSERT_TRUE(memory.acquire(requests[i], now, expected[i]).ok());
    }
    const std::vector<long long> before = script_calls();
    const std::vector<Status> status = acquire_in_one_turn(driver, *store_, requests, now, redis);
    const std::vector<long long> after = script_calls();
    for (size_t n = 0; n < cluster_.size(); ++n)
      EXPECT_EQ(after[n] - before[n], 1) << "master " << n << ", round " << round;
    for (size_t i = 0; i < keys.size(); ++i) {
      ASSERT_TRUE(status[i].ok()) << status[i].error().message;
      for (size_t j = 0; j < requests[i].size(); ++j) {
        const Decision& m = expected[i][j];
        const Decision& r = redis[i][j];
        EXPECT_TRUE(m.allowed == r.allowed && m.limit == r.limit && m.remaining == r.remaining &&
                    r.reset_after == ceil_us(m.reset_after) &&
                    r.retry_after == ceil_us(m.retry_after) && r.decided_at == now)
            << keys[i] << " limit " << j << " round " << round << ": memory {" << m.allowed << ", "
            << m.remaining << ", " << m.reset_after.count() << ", " << m.retry_after.count()
            << "} redis {" << r.allowed << ", " << r.remaining << ", " << r.reset_after.count()
            << ", " << r.retry_after.count() << "}";
      }
      (all_allowed(expected[i]) ? allowed : denied) += 1;
    }
  }
  EXPECT_GT(allowed, 300u);
  EXPECT_GT(denied, 300u);
  EXPECT_EQ(store_->stats().slot_splits, 0u);
}

// A master's call of several slots that meets a slot migrating (its keys
// split between two masters, or all moved) or moved (the client's map is
// stale) is refused having applied nothing and sent again per slot; each
// part then follows TRYAGAIN, ASK and MOVED as any call of one slot. Every
// request is decided exactly once: with capacity 5 and no refill, round r
// allows iff r <= 5 and leaves 5 - r.
TEST_F(ClusterTest, ACallOfSeveralSlotsThatMeetsAMigrationSplitsAndChargesOnce) {
  const Limit limit = must(Limit::token_bucket(5, 1, 24h * 365));
  RedisStoreOptions o = local_options(cluster_.node(0).address());
  o.cluster = true;
  o.deny_cache = false;
  // Only a MOVED may refresh the slot map: the map stays stale on purpose.
  o.topology_refresh = 24h;
  store_ = make_store(o);
  ASSERT_NE(store_, nullptr);
  const int low = 100, mid = 200, high = 300;  // in ascending order: `low` is declared
  const int source = cluster_.owner(low);
  ASSERT_GE(source, 0);
  ASSERT_EQ(cluster_.owner(mid), source);
  ASSERT_EQ(cluster_.owner(high), source);
  const int target = (source + 1) % 3;
  const std::vector<std::string> keys = {
      key_in_slot(limit, low, "split-a"), key_in_slot(limit, mid, "split-b"),
      key_in_slot(limit, high, "split-c1"), key_in_slot(limit, high, "split-c2")};
  const auto redis_key = [&](size_t k) { return store_->redis_key(limit, keys[k]); };
  AsyncDriver driver(store_);
  int round = 0;
  const auto play_round = [&] {
    ++round;
    std::vector<std::vector<AcquireRequest>> requests(keys.size());
    std::vector<std::vector<Decision>> out(keys.size(), std::vector<Decision>(1));
    for (size_t k = 0; k < keys.size(); ++k) requests[k] = {{&limit, keys[k], 1}};
    const auto status = acquire_in_one_turn(driver, *store_, requests, us(kEpochUs), out);
    for (size_t k = 0; k < keys.size(); ++k) {
      ASSERT_TRUE(status[k].ok()) << keys[k] << ", round " << round << ": "
                                  << status[k].error().message;
      EXPECT_EQ(out[k][0].allowed, round <= 5) << keys[k] << ", round " << round;
      EXPECT_EQ(out[k][0].remaining, static_cast<uint64_t>(std::max(0, 5 - round)))
          << keys[k] << ", round " << round;
    }
  };
  const std::vector<long long> before = script_calls();
  ASSERT_NO_FATAL_FAILURE(play_round());  // also loads the script on the source
  const std::vector<long long> loaded = script_calls();
  ASSERT_NO_FATAL_FAILURE(play_round());
  EXPECT_EQ(script_calls()[static_cast<size_t>(source)] - loaded[static_cast<size_t>(source)], 1)
      << "the four keys of three slots in one call";
  EXPECT_GE(loaded[static_cast<size_t>(source)] - before[static_cast<size_t>(source)], 1);
  auto stats = store_->stats();
  EXPECT_EQ(stats.slot_splits, 0u);

  // `high` migrating, its keys split: c2 on the target, c1 still on the
  // source. The source refuses the group (NOTLOCAL); `high`'s part meets
  // TRYAGAIN, then c2 alone an ASK.
  ASSERT_NO_FATAL_FAILURE(begin_migration(high, source, target));
  ASSERT_NO_FATAL_FAILURE(migrate(source, target, {redis_key(3)}));
  ASSERT_NO_FATAL_FAILURE(play_round());
  EXPECT_EQ(store_->stats().slot_splits, stats.slot_splits + 1);
  EXPECT_GT(store_->stats().tryagain, stats.tryagain);
  EXPECT_GT(store_->stats().ask, stats.ask);
  // The refusal asked for the slot map (still naming the source): read
  // before the slot moves on, so that the next round meets a stale map.
  ASSERT_TRUE(wait_until(
      [&] { return store_->stats().topology_refreshes > stats.topology_refreshes; }, 10s));
  stats = store_->stats();

  // `high` moved for good; the client's map still names the source: the
  // group is refused again, and `high`'s part follows the MOVED.
  ASSERT_NO_FATAL_FAILURE(migrate(source, target, {redis_key(2)}));
  ASSERT_NO_FATAL_FAILURE(finish_migration(high, target));
  ASSERT_NO_FATAL_FAILURE(play_round());
  EXPECT_EQ(store_->stats().slot_splits, stats.slot_splits + 1);
  EXPECT_GT(store_->stats().moved, stats.moved);
  stats = store_->stats();

  // The declared slot `low` migrating, its key moved: the whole call meets
  // ASK; `low`'s part follows it.
  ASSERT_NO_FATAL_FAILURE(begin_migration(low, source, target));
  ASSERT_NO_FATAL_FAILURE(migrate(source, target, {redis_key(0)}));
  ASSERT_NO_FATAL_FAILURE(play_round());
  EXPECT_GE(store_->stats().slot_splits, stats.slot_splits + 1);
  EXPECT_GT(store_->stats().ask, stats.ask);

  // Then assigned to the target; the rounds go on to the end of the capacity.
  ASSERT_NO_FATAL_FAILURE(finish_migration(low, target));
  for (int i = 0; i < 3; ++i) ASSERT_NO_FATAL_FAILURE(play_round());
  EXPECT_EQ(round, 8);
  // `mid` never moved.
  for (size_t k = 0; k < keys.size(); ++k)
    EXPECT_EQ(cluster_.node(static_cast<size_t>(k == 1 ? source : target))
                  .integer({"EXISTS", redis_key(k)}),
              1)
        << keys[k];
}

// Cached mode on the cluster: keys on every master, a store in cached mode
// (syncs when the test says) and one in exact mode to read the counts.
class CachedClusterTest : public ClusterTest {
 protected:
  void SetUp() override {
    ClusterTest::SetUp();
    if (HasFatalFailure() || IsSkipped()) return;
    RedisStoreOptions o = local_options(cluster_.node(0).address());
    o.cluster = true;
    o.topology_refresh = 24h;  // only a refresh the store asks for
    o.mode = RedisMode::kCached;
    o.sync_interval = 1h;
    o.early_fetch = false;  // every sync is the test's
    store_ = make_store(o);
    ASSERT_NE(store_, nullptr);
    RedisStoreOptions e = local_options(cluster_.node(0).address());
    e.cluster = true;
    e.deny_cache = false;
    exact_ = make_store(e);
    ASSERT_NE(exact_, nullptr);
    std::vector<std::set<int>> slots(cluster_.size());
    for (int i = 0; i < 120; ++i) {
      keys_.push_back("route:cached#0|client:" + std::to_string(i));
      const int slot = RedisStore::key_slot(store_->redis_key(limit_, keys_.back()));
      slots[static_cast<size_t>(cluster_.owner(slot))].insert(slot);
    }
    for (const auto& of_master : slots) ASSERT_GT(of_master.size(), 20u);
    // Each key's first request asks Redis; the first sync fetches them all.
    for (const std::string& key : keys_)
      ASSERT_EQ(acquire_one(*store_, limit_, key, t_)->remaining, 999u) << key;
    ASSERT_TRUE(store_->sync().ok());
  }

  // `n` local hits on every key: no script call.
  void hit_every_key(int n) {
    const std::vector<long long> before = script_calls();
    for (const std::string& key : keys_) {
      for (int i = 0; i < n; ++i) ASSERT_TRUE(acquire_one(*store_, limit_, key, t_)->allowed);
    }
    EXPECT_EQ(script_calls(), before);
  }

  // Every key as the exact store reads it (one hit of its own each time).
  void expect_remaining(uint64_t remaining) {
    for (const std::string& key : keys_)
      EXPECT_EQ(acquire_one(*exact_, limit_, key, t_)->remaining, remaining) << key;
  }

  const Limit limit_ = must(Limit::token_bucket(1'000, 1, 24h));
  const Nanos t_ = us(kEpochUs);
  std::vector<std::string> keys_;
  std::shared_ptr<RedisStore> exact_;
};

TEST_F(CachedClusterTest, ASyncIsOneScriptCallPerMaster) {
  for (int round = 1; round <= 3; ++round) {
    ASSERT_NO_FATAL_FAILURE(hit_every_key(2));
    const std::vector<long long> before = script_calls();
    ASSERT_TRUE(store_->sync().ok());
    const std::vector<long long> after = script_calls();
    for (size_t n = 0; n < cluster_.size(); ++n)
      EXPECT_EQ(after[n] - before[n], 1) << "master " << n << ", round " << round;
  }
  EXPECT_EQ(store_->stats().sync_failures, 0u);
  // 1000 - 1 (first request) - 3 x 2 (local hits, synced) - 1 (the exact read).
  expect_remaining(992u);
}

// A slot moved since the store read the slot map: the sync's call for its
// old master is refused (MOVED, then NOTLOCAL at the new master for the
// other slots) having written nothing there, while the other masters'
// calls are applied. The next sync, on a fresh map, sends everything again
// under the same sequence number: the moved slot's hits are applied once,
// and the slots already applied only read.
TEST_F(CachedClusterTest, ASyncThatMeetsAMovedSlotIsSentAgainAndCountsEachHitOnce) {
  ASSERT_NO_FATAL_FAILURE(hit_every_key(3));
  const int slot = RedisStore::key_slot(store_->redis_key(limit_, keys_[0]));
  const int source = cluster_.owner(slot);
  const int target = (source + 1) % 3;
  // Move the slot with every key it holds (states and sequence keys).
  RedisServer& src = cluster_.node(static_cast<size_t>(source));
  ASSERT_NO_FATAL_FAILURE(begin_migration(slot, source, target));
  const Reply held = src.command({"CLUSTER", "GETKEYSINSLOT", std::to_string(slot), "1000"});
  ASSERT_TRUE(held != nullptr && held->type == REDIS_REPLY_ARRAY && held->elements >= 2);
  std::vector<std::string> moving;
  for (size_t i = 0; i < held->elements; ++i)
    moving.emplace_back(held->element[i]->str, held->element[i]->len);
  ASSERT_NO_FATAL_FAILURE(migrate(source, target, moving));
  ASSERT_NO_FATAL_FAILURE(finish_migration(slot, target));

  const auto refreshes = store_->stats().topology_refreshes;
  EXPECT_FALSE(store_->sync().ok());
  EXPECT_EQ(store_->stats().sync_failures, 1u);
  ASSERT_TRUE(wait_until([&] { return store_->stats().topology_refreshes > refreshes; }, 10s))
      << "the failed sync did not have the slot map read again";
  ASSERT_TRUE(store_->sync().ok());
  // 1000 - 1 - 3 - 1, on every key, wherever its slot is now.
  expect_remaining(995u);
  // Decisions go on locally, and the next sync takes each master once.
  ASSERT_NO_FATAL_FAILURE(hit_every_key(1));
  const std::vector<long long> before = script_calls();
  ASSERT_TRUE(store_->sync().ok());
  const std::vector<long long> after = script_calls();
  for (size_t n = 0; n < cluster_.size(); ++n) EXPECT_EQ(after[n] - before[n], 1) << "master " << n;
  expect_remaining(993u);  // 995 - 1 (local, synced) - 1 (the exact read)
}

// A master that is down holds back only its own slots: the other masters'
// keys go on syncing, and the dead master's hits reach it once it is back,
// each once (its first batch again, then what was held back).
TEST_F(CachedClusterTest, ADeadMasterHoldsBackOnlyItsOwnSlots) {
  constexpr int kDead = 2;
  std::vector<std::string> live;
  std::vector<std::string> dead;
  for (const std::string& key : keys_) {
    const int owner = cluster_.owner(RedisStore::key_slot(store_->redis_key(limit_, key)));
    (owner == kDead ? dead : live).push_back(key);
  }
  ASSERT_GT(dead.size(), 10u);
  const auto remaining = [&](const std::string& key) {
    return acquire_one(*exact_, limit_, key, t_)->remaining;
  };
  ASSERT_NO_FATAL_FAILURE(hit_every_key(2));
  cluster_.node(kDead).kill();
  EXPECT_FALSE(store_->sync().ok());
  EXPECT_EQ(store_->stats().sync_failures, 1u);
  for (const std::string& key : live) EXPECT_EQ(remaining(key), 996u) << key;  // 1000 - 1 - 2 - 1

  ASSERT_NO_FATAL_FAILURE(hit_every_key(1));
  EXPECT_FALSE(store_->sync().ok());  // the dead master's part, again
  for (const std::string& key : live) EXPECT_EQ(remaining(key), 994u) << key;  // 996 - 1 - 1

  // Back, empty (no persistence): the first batch's 2 hits, then the 1 held back.
  ASSERT_TRUE(cluster_.node(kDead).start());
  ASSERT_TRUE(wait_until([&] { return store_->sync().ok(); }, 10s));
  ASSERT_TRUE(store_->sync().ok());
  // The exact store reconnects to the master on its own backoff: answered
  // once on a key of its own there first.
  std::string probe;
  for (int i = 0; probe.empty(); ++i) {
    const std::string key = "route:probe#0|client:" + std::to_string(i);
    if (cluster_.owner(RedisStore::key_slot(store_->redis_key(limit_, key))) == kDead) probe = key;
  }
  ASSERT_TRUE(wait_until([&] { return acquire_one(*exact_, limit_, probe, t_).ok(); }, 10s));
  for (const std::string& key : dead) EXPECT_EQ(remaining(key), 996u) << key;  // 1000 - 2 - 1 - 1
}

TEST_F(ClusterTest, ExactlyCapacityAllowedAcrossStoresSharingTheCluster) {
  const Limit limit = must(Limit::token_bucket(100, 1, 24h * 365));
  std::vector<std::shared_ptr<RedisStore>> stores;
  std::vector<std::unique_ptr<AsyncDriver>> drivers;
  for (size_t s = 0; s < 3; ++s) {
    RedisStoreOptions o = local_options(cluster_.node(s).address());  // different seeds
    o.cluster = true;
    o.time_source = RedisTimeSource::kRedis;
    o.timeout = 10s;
    stores.push_back(make_store(o));
    drivers.push_back(std::make_unique<AsyncDriver>(stores.back()));
  }
  std::atomic<int> allowed{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (auto& d : drivers) {
    threads.emplace_back([&, driver = d.get()] {
      std::vector<std::string> keys(1'000, "global");
      for (const auto& o : driver->calls(limit, keys, us(kEpochUs))) {
        if (!o.status.ok()) ++errors;
        if (o.status.ok() && o.decision.allowed) ++allowed;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(allowed.load(), 100);
}

TEST_F(ClusterTest, ADeadMasterFailsOnlyItsOwnKeys) {
  const Limit limit = must(Limit::token_bucket(1'000, 1, 1h));
  RedisStoreOptions o = local_options(cluster_.node(0).address());
  o.cluster = true;
  // The live masters answer within it even on a loaded machine; the dead
  // one's keys fail at once (the connection is down) or when it ends.
  o.timeout = 1s;
  o.reconnect_min = 10ms;
  o.reconnect_max = 100ms;
  auto store = make_store(o);
  ASSERT_NE(store, nullptr);
  AsyncDriver driver(store);
  std::vector<std::string> keys;
  std::vector<int> owners;  // the master serving each key
  for (int i = 0; i < 90; ++i) {
    keys.push_back("dead|k" + std::to_string(i));
    owners.push_back(cluster_.owner(RedisStore::key_slot(store->redis_key(limit, keys.back()))));
  }
  const auto on_dead = std::find(owners.begin(), owners.end(), 2);
  ASSERT_NE(on_dead, owners.end()) << "no key on master 2";
  const std::string& dead_key = keys[static_cast<size_t>(on_dead - owners.begin())];
  for (const auto& out : driver.calls(limit, keys, us(kEpochUs))) ASSERT_TRUE(out.status.ok());

  cluster_.node(2).kill();
  size_t failed = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    auto out = driver.call(limit, keys[i], us(kEpochUs));
    if (owners[i] == 2) {
      ++failed;
      ASSERT_FALSE(out.status.ok());
      EXPECT_EQ(out.status.error().code, ErrorCode::kStoreUnavailable);
      EXPECT_LE(out.latency, o.timeout + kLateMargin);
    } else {
      EXPECT_TRUE(out.status.ok()) << "key on a live master failed: " << out.status.error().message;
    }
  }
  EXPECT_GT(failed, 10u);
  EXPECT_TRUE(wait_until([&] { return !store->ready(); }, 5s));

  ASSERT_TRUE(cluster_.node(2).start());  // same port and node id (nodes.conf kept)
  EXPECT_TRUE(store->wait_ready(10s));
  // A key of the restarted master is served again, once the worker thread's
  // own connection to it is back (it reconnects with backoff).
  EXPECT_TRUE(
      wait_until([&] { return driver.call(limit, dead_key, us(kEpochUs)).status.ok(); }, 10s))
      << "a key of the restarted master was not served again";
}

TEST_F(ClusterTest, ARefundOfKeysOnEveryMasterGivesEachBack) {
  // One key per master, and on the first one two limits of one client key
  // (one slot): one refund() sends a call per slot, each to its master.
  const Limit limit = must(Limit::token_bucket(1, 1, 24h * 365));
  const Limit second = must(Limit::fixed_window(1, 24h * 365));
  std::vector<std::string> keys(cluster_.size());
  std::vector<bool> found(cluster_.size(), false);
  size_t masters = 0;
  for (int i = 0; masters < cluster_.size() && i < 10'000; ++i) {
    std::string key = "refund|u" + std::to_string(i);
    const int owner = cluster_.owner(RedisStore::key_slot(store_->redis_key(limit, key)));
    ASSERT_GE(owner, 0);
    if (found[static_cast<size_t>(owner)]) continue;
    found[static_cast<size_t>(owner)] = true;
    keys[static_cast<size_t>(owner)] = std::move(key);
    ++masters;
  }
  ASSERT_EQ(masters, cluster_.size());

  std::vector<RefundRequest> refunds;
  for (const std::string& key : keys) {
    auto charge = acquire_one(*store_, limit, key, us(kEpochUs));
    ASSERT_TRUE(charge.ok()) << charge.error().message;
    ASSERT_TRUE(charge->allowed);
    EXPECT_EQ(charge->decided_at, us(kEpochUs));
    refunds.push_back({&limit, key, 1, charge->decided_at});
  }
  ASSERT_TRUE(acquire_one(*store_, second, keys[0], us(kEpochUs))->allowed);
  refunds.push_back({&second, keys[0], 1, us(kEpochUs)});
  for (const std::string& key : keys)
    ASSERT_FALSE(acquire_one(*store_, limit, key, us(kEpochUs))->allowed);

  Status s = store_->refund(refunds, us(kEpochUs + 1));
  ASSERT_TRUE(s.ok()) << s.error().message;
  for (const std::string& key : keys) {
    EXPECT_TRUE(acquire_one(*store_, limit, key, us(kEpochUs + 2))->allowed) << key;
    EXPECT_FALSE(acquire_one(*store_, limit, key, us(kEpochUs + 2))->allowed) << key;
  }
  EXPECT_TRUE(acquire_one(*store_, second, keys[0], us(kEpochUs + 2))->allowed);
}

TEST_F(ClusterTest, ALockoutLivesBesideItsStateAndIsSharedByEveryStore) {
  RedisStoreOptions o = local_options(cluster_.node(1).address());  // another seed
  o.cluster = true;
  auto other = make_store(o);
  ASSERT_NE(other, nullptr);
  LimitSpec spec = must(Limit::token_bucket(1, 1, 1s)).spec();
  spec.block = 10s;
  const Limit limit = must(Limit::create(spec));
  const std::string key = "lockout|user:7";
  ASSERT_TRUE(acquire_one(*store_, limit, key, us(kEpochUs))->allowed);
  auto denied = acquire_one(*store_, limit, key, us(kEpochUs + 500'000));
  ASSERT_TRUE(denied.ok()) << denied.error().message;
  EXPECT_FALSE(denied->allowed);
  EXPECT_EQ(denied->retry_after, 10s);
  // On the master of the state's slot, holding when the lockout ends.
  const int owner = cluster_.owner(RedisStore::key_slot(store_->redis_key(limit, key)));
  ASSERT_GE(owner, 0);
  EXPECT_EQ(cluster_.node(static_cast<size_t>(owner))
                .text({"GET", store_->redis_lockout_key(limit, key)}),
            std::to_string(kEpochUs + 500'000 + 10'000'000));
  // The bucket is full long before: the other store still denies.
  auto seen = acquire_one(*other, limit, key, us(kEpochUs + 5'500'000));
  ASSERT_TRUE(seen.ok()) << seen.error().message;
  EXPECT_FALSE(seen->allowed);
  EXPECT_EQ(seen->retry_after, 5s);
  EXPECT_TRUE(acquire_one(*other, limit, key, us(kEpochUs + 10'500'000))->allowed);
}

// concurrency: slots are sliding_log members whose window is the lease (no
// script of its own), given back by the sliding_log refund, with the
// denial's retry capped at 1 s in the client; the memory store's decisions.
TEST_F(ClusterTest, ConcurrencyEveryKeyHoldsExactlyMaxAndGetsItsSlotBack) {
  const Limit limit = must(Limit::concurrency(3, 1h));
  // Keys on every master.
  for (int i = 0; i < 12; ++i) {
    const std::string key = "reports|u" + std::to_string(i);
    std::vector<Nanos> taken;
    for (int j = 0; j < 3; ++j) {
      auto d = acquire_one(*store_, limit, key, us(kEpochUs + j));
      ASSERT_TRUE(d.ok()) << d.error().message;
      ASSERT_TRUE(d->allowed) << key;
      taken.push_back(d->decided_at);
    }
    auto over = acquire_one(*store_, limit, key, us(kEpochUs + 3));
    EXPECT_FALSE(over->allowed) << key;
    EXPECT_EQ(over->retry_after, Nanos(1s));
    const RefundRequest back{&limit, key, 1, taken[1]};
    ASSERT_TRUE(store_->refund({&back, 1}, us(kEpochUs + 4)).ok());
    EXPECT_TRUE(acquire_one(*store_, limit, key, us(kEpochUs + 5))->allowed) << key;
    EXPECT_FALSE(acquire_one(*store_, limit, key, us(kEpochUs + 6))->allowed) << key;
  }
}

}  // namespace
}  // namespace sluice::testing
