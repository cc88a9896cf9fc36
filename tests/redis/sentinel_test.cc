// Redis Sentinel: a master, its replica and three sentinels (quorum 2,
// down-after-milliseconds 1000) on free loopback ports, plain and over TLS.
// The store asks the sentinels for the master at start; the master is killed
// (SIGKILL) under load, the sentinels promote the replica, and the store
// follows (+switch-master, or the sentinels asked again): calls fail
// meanwhile (kStoreUnavailable, within the timeout: on_failure), succeed
// against the new master within 10 s of the promotion, and the counts go on
// exactly from what the promoted replica holds (replication is
// asynchronous: the test reads the replica after the kill, before the
// promotion, when nothing can write it). No call is applied twice: a failed
// call is never sent again. The failover window is reported.
#include <algorithm>
#include <cstdio>
#include <optional>

#include "load.h"
#include "test_util.h"
#include "tls/test_certs.h"

namespace sluice::testing {
namespace {

using Clock = std::chrono::steady_clock;
using Record = Load::Record;

// The contract: decisions succeed against the promoted replica within this
// long of its promotion.
constexpr auto kFollowBound = 10s;
constexpr auto kLoadTime = 60s;
constexpr size_t kMaxRounds = 60'000;
constexpr auto kMinRound = std::chrono::microseconds(1'000);

long long ms(Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

class SentinelTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    SLUICE_REQUIRE_REDIS();
    ASSERT_TRUE(certs_.ok()) << certs_.error();
    RedisSentinelGroupOptions g;
    if (tls()) g.certs = &certs_;
    group_ = std::make_unique<RedisSentinelGroup>(g);
    ASSERT_TRUE(group_->start());
  }

  bool tls() const { return GetParam(); }

  // The store as a deployment sets it up: the sentinels' addresses and the
  // master's name, the health and refresh intervals users get.
  RedisStoreOptions options(const std::string& master) const {
    RedisStoreOptions o = local_options("");
    o.addresses.clear();
    o.sentinel.master = master;
    o.sentinel.addresses = group_->sentinel_addresses();
    const RedisStoreOptions defaults;
    o.health_interval = defaults.health_interval;
    o.topology_refresh = defaults.topology_refresh;
    if (tls()) {
      o.tls.enabled = true;
      o.tls.ca_file = certs_.ca();
    }
    return o;
  }

  TestCerts certs_;
  std::unique_ptr<RedisSentinelGroup> group_;
};

TEST_P(SentinelTest, AKilledMasterIsReplacedAndFollowedAndCountsStayExact) {
  constexpr long long kLimit = 300;
  const Limit limit = must(Limit::fixed_window(kLimit, 1h));
  const RedisStoreOptions o = options(RedisSentinelGroup::kMasterName);
  std::shared_ptr<RedisStore> store = make_store(o);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->master(), group_->master_address());

  std::vector<std::string> keys;
  for (int i = 0; i < 10; ++i) keys.push_back("sentinel|k" + std::to_string(i));
  AsyncDriver driver(store);
  Promotion promotion;
  // Ends with a round issued after the promotion in which every key was
  // decided and denied: every key has had its limit.
  Load load(driver, limit, keys, keys.size(), promotion.every_key_denied_after(), kLoadTime,
            kMaxRounds, kMinRound);

  ASSERT_TRUE(load.wait_rounds(50));
  group_->master().kill();
  const auto killed_at = Clock::now();
  std::vector<long long> replicated(keys.size(), 0);
  for (size_t k = 0; k < keys.size(); ++k) {
    replicated[k] = fixed_window_count(
        group_->replica().command({"GET", store->redis_window_key(limit, keys[k], us(kEpochUs))}));
  }
  ASSERT_EQ(group_->replica().role(), "slave")
      << "promoted before the test had read the replicated state";

  Clock::time_point seen_at;
  const bool seen =
      promotion.await([&] { return group_->replica().role() == "master"; }, load, &seen_at);
  ASSERT_TRUE(seen) << "the replica was not promoted within 30 s of the kill";

  const auto& records = load.records();
  std::vector<long long> allowed_before(keys.size(), 0), allowed_after(keys.size(), 0),
      failed_before(keys.size(), 0);
  size_t failures = 0;
  std::optional<Clock::time_point> first_success;  // of a call issued after the kill
  for (const Record& r : records) {
    EXPECT_LE(r.answered - r.issued, o.timeout + kLateMargin)
        << "a call was not answered within the timeout";
    const bool before = r.issued < killed_at;
    if (!r.ok) {
      ++failures;
      EXPECT_EQ(r.code, ErrorCode::kStoreUnavailable);
      if (before) ++failed_before[r.key];
      continue;
    }
    if (!before && (!first_success || r.answered < *first_success)) first_success = r.answered;
    if (r.allowed) ++(before ? allowed_before : allowed_after)[r.key];
  }
  ASSERT_TRUE(load.completed()) << "the load ended by its bounds (" << load.rounds()
                                << " rounds) before every key was used up";
  ASSERT_GT(failures, 0u) << "no call failed: was the master killed under load?";
  ASSERT_TRUE(first_success.has_value());
  const auto follow = std::max(*first_success - seen_at, Clock::duration::zero());
  EXPECT_LE(follow, kFollowBound) << "decisions succeeded " << ms(follow)
                                  << " ms after the promotion";

  long long unreplicated = 0;
  for (size_t k = 0; k < keys.size(); ++k) {
    // Continues exactly from the promoted replica's state.
    EXPECT_EQ(allowed_after[k], kLimit - replicated[k]) << keys[k];
    // The replica holds at most what the master applied: each call once.
    EXPECT_LE(replicated[k], allowed_before[k] + failed_before[k]) << keys[k];
    unreplicated += std::max(0LL, allowed_before[k] - replicated[k]);
  }
  EXPECT_EQ(store->master(), group_->replica_address());
  EXPECT_EQ(store->stats().master_switches, 1u);
  EXPECT_TRUE(store->wait_ready(5s)) << "not ready after the failover";
  RecordProperty("kill_to_promotion_ms", std::to_string(ms(seen_at - killed_at)));
  RecordProperty("promotion_to_success_ms", std::to_string(ms(follow)));
  RecordProperty("kill_to_success_ms", std::to_string(ms(*first_success - killed_at)));
  std::printf(
      "sentinel failover%s: promoted %lld ms after the kill, first decision %lld ms after the "
      "promotion (%lld ms after the kill), %zu calls failed, %zu calls in %zu rounds, %lld "
      "allowed calls lost by asynchronous replication\n",
      tls() ? " (TLS)" : "", ms(seen_at - killed_at), ms(follow), ms(*first_success - killed_at),
      failures, records.size(), load.rounds(), unreplicated);
}

// Sentinels that answer but know no master of that name: wait_connected()
// says so (`sluice serve` refuses to start with it).
TEST_P(SentinelTest, AnUnknownMasterIsReported) {
  auto created = RedisStore::create(options("nosuchmaster"));
  ASSERT_TRUE(created.ok()) << created.error().message;
  const Status s = (*created)->wait_connected(10s);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(s.error().message.find("know no master named 'nosuchmaster'"), std::string::npos)
      << s.error().message;
  EXPECT_FALSE((*created)->ready());
  EXPECT_EQ((*created)->master(), "");
}

INSTANTIATE_TEST_SUITE_P(Transport, SentinelTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Tls" : "Plain";
                         });

TEST(SentinelOptions, ASentinelGoesNeitherWithAClusterNorWithAddresses) {
  RedisStoreOptions o;
  o.sentinel.master = "m";
  o.sentinel.addresses = {"127.0.0.1:26379"};
  EXPECT_EQ(RedisStore::create(o).error().message,
            "redis store: with a sentinel, leave addresses empty: the sentinels name the master");
  o.addresses.clear();
  o.cluster = true;
  EXPECT_EQ(RedisStore::create(o).error().message,
            "redis store: a sentinel and a cluster cannot go together (a Redis Cluster fails over "
            "by itself)");
  o.cluster = false;
  o.sentinel.addresses = {"redis://127.0.0.1:26379/2"};
  EXPECT_EQ(RedisStore::create(o).error().message,
            "redis store: a sentinel has no database (redis://127.0.0.1:26379/2)");
}

}  // namespace
}  // namespace sluice::testing
