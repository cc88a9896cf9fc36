// The same seeded random traces through the memory store and the Redis store
// (time_source local, whole-microsecond times) give identical decisions:
// allowed, limit and remaining equal; reset_after and retry_after equal to
// the memory store's rounded up to a whole microsecond; decided_at the
// step's time. The traces give back (Store::refund) some of the charges
// they made, and some limits have a lockout (Limit::block). (Hand-picked
// traces where the arithmetic is at its edges are in the conformance table,
// tests/conformance, which runs on both stores.)
#include <random>

#include "test_util.h"

namespace sluice::testing {
namespace {

Nanos ceil_us(Nanos d) {
  return Nanos{(d.count() + 999) / 1'000 * 1'000};
}

Limit with_block(Limit limit, Nanos block) {
  LimitSpec spec = limit.spec();
  spec.block = block;
  return must(Limit::create(spec));
}

struct Config {
  Limit limit;
  uint64_t max_cost;
  int64_t typical_gap_us;  // the trace's time steps scale with this
};

struct Step {
  size_t key;
  bool with_partner;  // also apply the partner limit (all-or-nothing)
  uint64_t cost;
  int64_t now_us;
  // A refund, not an acquire: gives back one of the key's last few charges
  // not given back yet (`pick` chooses which), if it has one.
  bool refund = false;
  uint64_t pick = 0;
};

// `steps` acquires, with about one refund for every eight of them.
std::vector<Step> make_trace(uint64_t seed, size_t steps, const Config& c, size_t keys) {
  std::mt19937_64 rng(seed);
  std::vector<Step> trace;
  int64_t now = kEpochUs + static_cast<int64_t>(rng() % 1'000'000'000);
  size_t acquires = 0;
  while (acquires < steps) {
    // Mostly bursts at the same or nearby microseconds, sometimes a pause of
    // about one refill, sometimes long enough for the state to be full again.
    const uint64_t kind = rng() % 100;
    int64_t gap = 0;
    if (kind < 30) {
      gap = 0;
    } else if (kind < 70) {
      gap = static_cast<int64_t>(rng() % 5);
    } else if (kind < 92) {
      gap = static_cast<int64_t>(rng() % static_cast<uint64_t>(2 * c.typical_gap_us + 1));
    } else if (kind < 98) {
      gap = static_cast<int64_t>(rng() % static_cast<uint64_t>(40 * c.typical_gap_us + 1));
    } else {
      gap = static_cast<int64_t>(rng() % static_cast<uint64_t>(400 * c.typical_gap_us + 1));
    }
    now += gap;
    Step s;
    s.key = static_cast<size_t>(rng() % keys);
    s.with_partner = rng() % 5 == 0;
    // Costs are mostly small, sometimes up to the maximum.
    s.cost =
        rng() % 4 == 0 ? 1 + rng() % c.max_cost : 1 + rng() % std::min<uint64_t>(3, c.max_cost);
    s.now_us = now;
    s.refund = rng() % 9 == 0;
    s.pick = rng();
    if (!s.refund) ++acquires;
    trace.push_back(s);
  }
  return trace;
}

// Whether Redis decided as the memory store did, at `at`; says how not.
bool same_decision(const Decision& m, const Decision& r, Nanos at, const Limit& limit, size_t op,
                   size_t j, uint64_t cost) {
  const bool same = m.allowed == r.allowed && m.limit == r.limit && m.remaining == r.remaining &&
                    r.reset_after == ceil_us(m.reset_after) &&
                    r.retry_after == ceil_us(m.retry_after) && r.decided_at == at;
  EXPECT_TRUE(same) << limit.describe() << " op " << op << " limit " << j << " at " << at.count()
                    << " ns, cost " << cost << ": memory {" << m.allowed << ", " << m.remaining
                    << ", " << m.reset_after.count() << " ns, " << m.retry_after.count()
                    << " ns} redis {" << r.allowed << ", " << r.remaining << ", "
                    << r.reset_after.count() << " ns, " << r.retry_after.count()
                    << " ns, decided at " << r.decided_at.count() << " ns}";
  return same;
}

class DifferentialTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SLUICE_REQUIRE_REDIS();
    ASSERT_TRUE(server_.start());
    RedisStoreOptions o = local_options(server_.address());
    o.ttl_extra = 600s;  // no key may expire in real time before the trace says
    store_ = make_store(o);
    ASSERT_NE(store_, nullptr);
  }

  // Runs every config's trace; returns the number of acquires compared.
  size_t run(const std::vector<Config>& configs, size_t steps_each, uint64_t seed) {
    // A partner limit of another algorithm shares each step now and then, so
    // that all-or-nothing is compared too (a denial by either charges neither).
    const Limit partner = must(Limit::sliding_window(40, 50ms));
    size_t compared = 0;
    size_t allowed = 0;
    size_t denied = 0;
    size_t refunds = 0;
    AsyncDriver driver(store_);
    for (size_t ci = 0; ci < configs.size(); ++ci) {
      const Config& c = configs[ci];
      MemoryStore memory(MemoryStoreOptions{.max_keys = 100'000, .shards = 1, .seed = 1});
      const size_t keys = 8;
      std::vector<std::string> key_names;
      std::vector<std::string> partner_keys;
      for (size_t k = 0; k < keys; ++k) {
        key_names.push_back("diff:" + std::to_string(seed) + ":" + std::to_string(ci) + "|c" +
                            std::to_string(k));
        partner_keys.push_back("partner:" + std::to_string(seed) + ":" + std::to_string(ci) +
                               key_names[k].substr(key_names[k].find('|')));
      }
      const std::vector<Step> trace = make_trace(seed + ci, steps_each, c, keys);

      // The memory store first, in trace order: it says which charges were
      // made, so that a refund gives back one that was. Each step becomes an
      // op that Redis then replays.
      struct Op {
        const Step* step;
        size_t n = 0;  // limits (acquire) or refunds
        AcquireRequest requests[2];
        RefundRequest refunds[2];
        Decision memory[2];
        Decision redis[2];
        Status status;
      };
      std::vector<Op> ops;
      ops.reserve(trace.size());
      // Per key: the ops of its charges not given back yet, oldest first.
      std::vector<std::vector<size_t>> charges(keys);
      for (const Step& s : trace) {
        Op op;
        op.step = &s;
        if (s.refund) {
          std::vector<size_t>& open = charges[s.key];
          if (open.empty()) continue;
          const size_t back = static_cast<size_t>(s.pick % std::min<size_t>(open.size(), 4));
          const size_t charge = open[open.size() - 1 - back];
          open.erase(open.end() - 1 - static_cast<std::ptrdiff_t>(back));
          const Op& made = ops[charge];
          op.n = made.n;
          for (size_t j = 0; j < op.n; ++j) {
            op.refunds[j] = {made.requests[j].limit, made.requests[j].key, made.requests[j].cost,
                             made.memory[j].decided_at};
          }
          const Status ms = memory.refund({op.refunds, op.n}, us(s.now_us));
          EXPECT_TRUE(ms.ok()) << ms.error().message;
          ++refunds;
        } else {
          op.n = s.with_partner ? 2 : 1;
          op.requests[0] = {&c.limit, key_names[s.key], s.cost};
          op.requests[1] = {&partner, partner_keys[s.key], 1};
          const Status ms = memory.acquire({op.requests, op.n}, us(s.now_us), {op.memory, op.n});
          EXPECT_TRUE(ms.ok()) << ms.error().message;
          if (!ms.ok()) return compared;
          if (all_allowed({op.memory, op.n})) charges[s.key].push_back(ops.size());
        }
        ops.push_back(op);
      }

      // Redis: issue the ops in order on one connection, 256 at a time;
      // Redis runs the calls in order, as the memory store did.
      for (size_t begin = 0; begin < ops.size(); begin += 256) {
        const size_t end = std::min(ops.size(), begin + 256);
        std::promise<void> batch_done;
        size_t remaining = end - begin;
        driver.run([&] {
          for (size_t i = begin; i < end; ++i) {
            Op& op = ops[i];
            auto done = [&, i](Status st) {
              ops[i].status = std::move(st);
              if (--remaining == 0) batch_done.set_value();
            };
            if (op.step->refund) {
              store_->refund_async({op.refunds, op.n}, us(op.step->now_us), done);
            } else {
              store_->acquire_async({op.requests, op.n}, us(op.step->now_us), {op.redis, op.n},
                                    done);
            }
          }
        });
        batch_done.get_future().wait();
      }

      for (size_t i = 0; i < ops.size(); ++i) {
        const Op& op = ops[i];
        const Step& s = *op.step;
        EXPECT_TRUE(op.status.ok()) << op.status.error().message;
        if (!op.status.ok()) return compared;
        if (s.refund) continue;
        for (size_t j = 0; j < op.n; ++j) {
          if (!same_decision(op.memory[j], op.redis[j], us(s.now_us), c.limit, i, j, s.cost))
            return compared;
        }
        ++compared;
        (op.memory[0].allowed ? allowed : denied) += 1;
      }
    }
    // A trace that never denies (or never allows) would compare little; one
    // that gives little back would not test refunds.
    EXPECT_GT(allowed, compared / 10);
    EXPECT_GT(denied, compared / 10);
    EXPECT_GT(refunds, compared / 20);
    return compared;
  }

  // The same with time_source redis, where Redis decides at its own TIME:
  // the ops go to Redis first, 256 per loop turn on one connection (Redis
  // runs them in issue order, batched as they come), then the memory store
  // replays them in that order, each acquire at the time Redis decided it
  // (decided_at). A refund gives back a charge of an earlier turn. The
  // partner is a fixed window too (a fixed window's refund does not depend
  // on the time, which Redis does not report for a refund). The windows run
  // on the real clock: some are short enough to roll over many times.
  size_t run_redis_time(const std::vector<Config>& configs, size_t steps_each, uint64_t seed) {
    RedisStoreOptions o = local_options(server_.address());
    o.time_source = RedisTimeSource::kRedis;
    o.ttl_extra = 600s;
    // Every decision Redis's: a denial the deny cache answered would carry
    // the caller's time, not Redis's.
    o.deny_cache = false;
    std::shared_ptr<RedisStore> store = make_store(o);
    if (store == nullptr) return 0;
    const Limit partner = must(Limit::fixed_window(7, 3ms));
    size_t compared = 0;
    size_t allowed = 0;
    size_t denied = 0;
    size_t refunds = 0;
    AsyncDriver driver(store);
    struct Op {
      bool refund = false;
      size_t key = 0;
      size_t n = 0;
      AcquireRequest requests[2];
      RefundRequest refunds[2];
      Decision redis[2];
      Decision memory[2];
      Status status;
    };
    for (size_t ci = 0; ci < configs.size(); ++ci) {
      const Config& c = configs[ci];
      MemoryStore memory(MemoryStoreOptions{.max_keys = 100'000, .shards = 1, .seed = 1});
      const size_t keys = 8;
      std::vector<std::string> key_names;
      std::vector<std::string> partner_keys;
      for (size_t k = 0; k < keys; ++k) {
        key_names.push_back("rt:" + std::to_string(seed) + ":" + std::to_string(ci) + "|c" +
                            std::to_string(k));
        partner_keys.push_back("rtp:" + std::to_string(seed) + ":" + std::to_string(ci) + "|c" +
                               std::to_string(k));
      }
      const std::vector<Step> trace = make_trace(seed + ci, steps_each, c, keys);
      std::vector<std::vector<Op>> charges(keys);  // per key: allowed acquires not given back
      Nanos last{0};                               // the latest decided_at replayed
      for (size_t begin = 0; begin < trace.size(); begin += 256) {
        const size_t end = std::min(trace.size(), begin + 256);
        std::vector<Op> ops;
        ops.reserve(end - begin);
        for (size_t t = begin; t < end; ++t) {
          const Step& s = trace[t];
          Op op;
          op.key = s.key;
          if (s.refund) {
            std::vector<Op>& open = charges[s.key];
            if (open.empty()) continue;
            const size_t back = static_cast<size_t>(s.pick % std::min<size_t>(open.size(), 4));
            const Op made = open[open.size() - 1 - back];
            open.erase(open.end() - 1 - static_cast<std::ptrdiff_t>(back));
            op.refund = true;
            op.n = made.n;
            for (size_t j = 0; j < op.n; ++j) {
              op.refunds[j] = {made.requests[j].limit, made.requests[j].key, made.requests[j].cost,
                               made.redis[j].decided_at};
            }
          } else {
            op.n = s.with_partner ? 2 : 1;
            op.requests[0] = {&c.limit, key_names[s.key], s.cost};
            op.requests[1] = {&partner, partner_keys[s.key], 1};
          }
          ops.push_back(op);
        }
        std::promise<void> turn_done;
        size_t remaining = ops.size();
        // Not read with time_source redis; the caller's clock, as a server passes.
        const Nanos wall = std::chrono::system_clock::now().time_since_epoch();
        driver.run([&] {
          for (size_t i = 0; i < ops.size(); ++i) {
            Op& op = ops[i];
            auto done = [&, i](Status st) {
              ops[i].status = std::move(st);
              if (--remaining == 0) turn_done.set_value();
            };
            if (op.refund) {
              store->refund_async({op.refunds, op.n}, wall, done);
            } else {
              store->acquire_async({op.requests, op.n}, wall, {op.redis, op.n}, done);
            }
          }
        });
        turn_done.get_future().wait();
        for (size_t i = 0; i < ops.size(); ++i) {
          Op& op = ops[i];
          EXPECT_TRUE(op.status.ok()) << op.status.error().message;
          if (!op.status.ok()) return compared;
          if (op.refund) {
            const Status ms = memory.refund({op.refunds, op.n}, last);
            EXPECT_TRUE(ms.ok()) << ms.error().message;
            ++refunds;
            continue;
          }
          const Nanos at = op.redis[0].decided_at;
          EXPECT_GE(at, last) << "Redis TIME went backwards";
          last = at;
          const Status ms = memory.acquire({op.requests, op.n}, at, {op.memory, op.n});
          EXPECT_TRUE(ms.ok()) << ms.error().message;
          for (size_t j = 0; j < op.n; ++j) {
            if (!same_decision(op.memory[j], op.redis[j], at, c.limit, begin + i, j,
                               op.requests[j].cost))
              return compared;
          }
          ++compared;
          (op.memory[0].allowed ? allowed : denied) += 1;
          if (all_allowed({op.memory, op.n})) charges[op.key].push_back(op);
        }
      }
    }
    // How many are allowed depends on how fast the machine runs the trace;
    // each kind must occur.
    EXPECT_GT(allowed, 0u);
    EXPECT_GT(denied, 0u);
    EXPECT_GT(refunds, 0u);
    RecordProperty("allowed", std::to_string(allowed));
    RecordProperty("denied", std::to_string(denied));
    RecordProperty("refunds", std::to_string(refunds));
    return compared;
  }

  RedisServer server_;
  std::shared_ptr<RedisStore> store_;
};

TEST_F(DifferentialTest, TokenBucket) {
  const std::vector<Config> configs = {
      {must(Limit::token_bucket(10, 3, 7s)), 10, 2'000'000},
      {must(Limit::token_bucket(100, 10, 1s)), 40, 50'000},
      {must(Limit::token_bucket(3, 2, 333'333us)), 3, 100'000},
      {must(Limit::token_bucket(1'000'000'000, 1'000'000'000, 1s)), 200'000'000, 100'000},
      {with_block(must(Limit::token_bucket(5, 1, 1s)), 300'007us), 3, 100'000},
  };
  EXPECT_EQ(run(configs, 3'000, 101), 15'000u);
}

TEST_F(DifferentialTest, Gcra) {
  const std::vector<Config> configs = {
      {must(Limit::gcra(10, 3, 7s)), 10, 2'000'000},
      {must(Limit::gcra(100, 10, 1s)), 40, 50'000},
      {must(Limit::gcra(3, 2, 333'333us)), 3, 100'000},
      {must(Limit::gcra(1'000'000'000, 1'000'000'000, 1s)), 200'000'000, 100'000},
      {with_block(must(Limit::gcra(5, 1, 1s)), 300'007us), 3, 100'000},
  };
  EXPECT_EQ(run(configs, 3'000, 202), 15'000u);
}

TEST_F(DifferentialTest, FixedWindow) {
  const std::vector<Config> configs = {
      {must(Limit::fixed_window(10, 1s)), 4, 50'000},
      {must(Limit::fixed_window(3, 7'003us)), 3, 1'000},
      {must(Limit::fixed_window(1'000, 1min)), 200, 20'000},
      {with_block(must(Limit::fixed_window(10, 1s)), 1'500'003us), 4, 50'000},
  };
  EXPECT_EQ(run(configs, 4'000, 303), 16'000u);
}

// time_source redis: the fast path takes the windows' index from Redis TIME.
TEST_F(DifferentialTest, FixedWindowRedisTime) {
  const std::vector<Config> configs = {
      {must(Limit::fixed_window(10, 20ms)), 4, 1},
      {must(Limit::fixed_window(3, 2ms)), 3, 1},
      {must(Limit::fixed_window(1'000, 50ms)), 100, 1},
      {with_block(must(Limit::fixed_window(10, 20ms)), 30ms), 4, 1},
  };
  EXPECT_EQ(run_redis_time(configs, 4'000, 313), 16'000u);
}

TEST_F(DifferentialTest, SlidingLog) {
  const std::vector<Config> configs = {
      {must(Limit::sliding_log(10, 1s)), 4, 50'000},
      {must(Limit::sliding_log(5, 777us)), 5, 100},
      {must(Limit::sliding_log(300, 10s)), 60, 20'000},
      {with_block(must(Limit::sliding_log(10, 1s)), 700'001us), 4, 50'000},
  };
  EXPECT_EQ(run(configs, 4'000, 404), 16'000u);
}

TEST_F(DifferentialTest, SlidingWindow) {
  // The last config's products (a million times a day in microseconds) pass
  // 2^53: the script forms them in two halves.
  const std::vector<Config> configs = {
      {must(Limit::sliding_window(10, 1s)), 4, 50'000},
      {must(Limit::sliding_window(7, 13'001us)), 7, 1'000},
      {must(Limit::sliding_window(1'000'000, 24h)), 300'000, 3'000'000'000},
      {with_block(must(Limit::sliding_window(10, 1s)), 2'000'001us), 4, 50'000},
  };
  EXPECT_EQ(run(configs, 4'000, 505), 16'000u);
}

}  // namespace
}  // namespace sluice::testing
