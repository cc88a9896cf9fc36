// Quotas in layers and penalties that grow, as the config loader reads them
// (exact errors at their line) and as a request meets them through
// Policy::plan() and decide() on the memory store, with an injected clock.
// The store-level traces (every store, Redis and Redis Cluster too) are in
// the store conformance table.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "policy/config_loader.h"
#include "policy/config_yaml.h"
#include "policy/decider.h"
#include "policy/policy.h"
#include "sluice/memory_store.h"

namespace sluice::policy {
namespace {

using namespace std::chrono_literals;
using Errors = std::vector<std::string>;

const Nanos kNow = std::chrono::seconds(1'704'110'400);

Errors errors_of(const std::string& yaml) {
  const LoadResult r = load_config_string(yaml, "sluice.yaml");
  Errors out;
  for (const ConfigError& e : r.errors) out.push_back(e.text());
  EXPECT_EQ(r.config.has_value(), r.errors.empty());
  return out;
}

Config valid(const std::string& yaml) {
  LoadResult r = load_config_string(yaml, "sluice.yaml");
  std::string all;
  for (const ConfigError& e : r.errors) all += e.text() + "\n";
  EXPECT_TRUE(r.config.has_value()) << all;
  return r.config ? std::move(*r.config) : Config{};
}

class Headers : public HeaderSource {
 public:
  explicit Headers(std::initializer_list<std::pair<const std::string, std::string>> values)
      : values_(values) {}
  std::optional<std::string_view> get(std::string_view name) const override {
    const auto it = values_.find(std::string(name));
    if (it == values_.end()) return std::nullopt;
    return it->second;
  }
  std::string get_all(std::string_view name) const override {
    return std::string(get(name).value_or(""));
  }

 private:
  std::map<std::string, std::string> values_;
};

// ---- quotas in layers ------------------------------------------------------

// A user's 2 and their org's 3, neither refilling while a test runs.
const std::string kLayers = R"(
routes:
  - match: POST /v1/chat
    key: header:x-user
    limits:
      - {name: user, capacity: 2, refill_rate: 1/d}
      - {name: org, key: header:x-org, capacity: 3, refill_rate: 1/d}
)";

RequestInfo chat(const Headers& headers) {
  RequestInfo info;
  info.method = "POST";
  info.target = "/v1/chat";
  info.peer = parse_ip("192.0.2.1").value();
  info.headers = &headers;
  info.now = kNow;
  return info;
}

TEST(LayeredLimits, ALimitsKeyIsReadAndWrittenBack) {
  const Config c = valid(kLayers);
  ASSERT_EQ(c.routes.size(), 1u);
  ASSERT_EQ(c.routes[0].limits.size(), 2u);
  EXPECT_EQ(c.routes[0].limits[0].key, std::nullopt);
  ASSERT_TRUE(c.routes[0].limits[1].key.has_value());
  EXPECT_EQ(c.routes[0].limits[1].key->text, "header:x-org");
  // The YAML writer keeps it: what it writes loads to the same config.
  const Config again = valid(to_yaml(c));
  EXPECT_EQ(again, c);
}

TEST(LayeredLimits, EachLimitIsStoredUnderItsOwnKeyOthersUnderTheRoutes) {
  const Policy p(valid(kLayers));
  const Headers alice({{"x-user", "alice"}, {"x-org", "acme"}});
  const Plan plan = p.plan(chat(alice));
  ASSERT_EQ(plan.limits.size(), 2u);
  // The scopes are what they were without `key:`: no store key is renamed.
  EXPECT_EQ(plan.limits[0].store_key, "route:POST /v1/chat#0|h:x-user=alice");
  EXPECT_EQ(plan.limits[1].store_key, "route:POST /v1/chat#1|h:x-org=acme");
  EXPECT_EQ(plan.client_key, "h:x-user=alice");
  // Without the org header the org limit falls back to the client address,
  // as a route's key does.
  const Headers no_org({{"x-user", "alice"}});
  EXPECT_EQ(p.plan(chat(no_org)).limits[1].store_key, "route:POST /v1/chat#1|ip:192.0.2.1");
}

TEST(LayeredLimits, AnOrgOf3AndUsersOf2AreAllOrNothing) {
  const Policy p(valid(kLayers));
  MemoryStore store;
  const Headers alice({{"x-user", "alice"}, {"x-org", "acme"}});
  const Headers bob({{"x-user", "bob"}, {"x-org", "acme"}});
  const Headers bob_elsewhere({{"x-user", "bob"}, {"x-org", "other"}});
  auto ask = [&](const Headers& who) {
    return decide(store, p.plan(chat(who)), kNow, OnFailure::kAllow);
  };
  // Alice: 2 of her 2 (org 3 -> 1), then her own limit denies...
  EXPECT_TRUE(ask(alice).allowed());
  EXPECT_TRUE(ask(alice).allowed());
  const Verdict third = ask(alice);
  EXPECT_FALSE(third.allowed());
  EXPECT_EQ(third.reported->name, "user");
  // ...charging nothing to the org: Bob gets its last one.
  const Verdict first = ask(bob);
  EXPECT_TRUE(first.allowed());
  EXPECT_EQ(first.reported->name, "org");
  EXPECT_EQ(first.decision.remaining, 0u);
  // Then the org denies Bob, charging nothing to Bob's own limit...
  const Verdict denied = ask(bob);
  EXPECT_FALSE(denied.allowed());
  EXPECT_EQ(denied.reported->name, "org");
  EXPECT_EQ(denied.decision.retry_after, 24h);
  // ...which still holds 1, as his requests under another org show.
  EXPECT_TRUE(ask(bob_elsewhere).allowed());
  const Verdict bob_out = ask(bob_elsewhere);
  EXPECT_FALSE(bob_out.allowed());
  EXPECT_EQ(bob_out.reported->name, "user");
}

TEST(LayeredLimits, ExactAdmittedCountsForTwoUsersOfOneOrg) {
  const Policy p(valid(kLayers));
  MemoryStore store;
  const Headers alice({{"x-user", "alice"}, {"x-org", "acme"}});
  const Headers bob({{"x-user", "bob"}, {"x-org", "acme"}});
  int admitted_alice = 0;
  int admitted_bob = 0;
  // Ten requests each, alternating: Alice's 2, then Bob's 1 (the org's 3rd).
  for (int i = 0; i < 10; ++i) {
    admitted_alice += decide(store, p.plan(chat(alice)), kNow, OnFailure::kAllow).allowed();
    admitted_bob += decide(store, p.plan(chat(bob)), kNow, OnFailure::kAllow).allowed();
  }
  EXPECT_EQ(admitted_alice, 2);
  EXPECT_EQ(admitted_bob, 1);
}

TEST(LayeredLimits, AKeyOnAPolicysLimitOrABadKeyIsALoadError) {
  EXPECT_EQ(errors_of(R"(
policies:
  search: {capacity: 5, refill_rate: 1/s, key: header:x-org}
routes:
  - match: GET /a
    limits: [{capacity: 5, refill_rate: 1/s, key: hedaer:x-org}]
)"),
            (Errors{"sluice.yaml:3:48: policies.search.key: only a route's own limits take `key:` "
                    "(a policy is keyed by the route or /v1/check call that applies it, a plan's "
                    "limits by the consumer)",
                    "sluice.yaml:6:51: routes[0].limits[0].key: must be ip, global, header:NAME, "
                    "cookie:NAME, query:NAME, jwt:CLAIM or a combination like "
                    "ip+header:x-api-key, got \"hedaer:x-org\" (unknown part \"hedaer:x-org\")"}));
}

TEST(LayeredLimits, OnARedisClusterALimitKeyedApartFromItsRouteIsALoadError) {
  const std::string store = R"(
store:
  backend: redis
  redis: {addresses: ["127.0.0.1:7000"], cluster: true}
routes:
  - match: GET /a
    key: header:x-user
    limits:
      - {capacity: 5, refill_rate: 1/s, key: header:x-user}
      - {capacity: 5, refill_rate: 1/s, key: header:x-org}
)";
  EXPECT_EQ(errors_of(store),
            (Errors{"sluice.yaml:10:46: routes[0].limits[1].key: on a Redis Cluster "
                    "(store.redis.cluster: true) a limit's `key:` must be its route's: a "
                    "request's limits are decided in one script call, on one hash slot, and "
                    "another key falls in another slot (leave `key:` out, or use one Redis)"}));
}

// ---- penalties that grow ---------------------------------------------------

const std::string kLogin = R"(
routes:
  - match: POST /login
    limits:
      - {capacity: 1, refill_rate: 1/d, block: {first: 1m, factor: 2, max: 4m, forget_after: 10m}}
)";

RequestInfo login(const Headers& headers, Nanos now) {
  RequestInfo info;
  info.method = "POST";
  info.target = "/login";
  info.peer = parse_ip("192.0.2.7").value();
  info.headers = &headers;
  info.now = now;
  return info;
}

TEST(GrowingBlock, NextBlockGrowsByTheFactorNeverPastMaxAndForgetsAfterForgetAfter) {
  LimitSpec spec{.algorithm = Algorithm::kFixedWindow, .limit = 1, .window = 1h};
  spec.block = 2min;
  spec.block_factor = 3;
  spec.block_max = 20min;
  spec.block_forget_after = 1h;
  const Limit l = Limit::create(spec).value();
  const Nanos end = kNow;
  EXPECT_EQ(l.next_block(0min, Nanos{0}, end), 2min);  // none on record
  EXPECT_EQ(l.next_block(2min, end, end), 6min);       // 2m x 3
  EXPECT_EQ(l.next_block(6min, end, end), 18min);      // 6m x 3
  EXPECT_EQ(l.next_block(18min, end, end), 20min);     // 54m capped
  EXPECT_EQ(l.next_block(20min, end, end + 1h - 1us), 20min);
  EXPECT_EQ(l.next_block(20min, end, end + 1h), 2min);  // forgotten
  // max / factor rounds down: 6m40s x 3 is exactly 20m, a nanosecond more passes it.
  EXPECT_EQ(l.next_block(400s, end, end), 20min);
  EXPECT_EQ(l.next_block(400s + 1ns, end, end), 20min);
  EXPECT_EQ(l.next_block(400s - 1ns, end, end), 20min - 3ns);
  // A plain block never grows.
  spec.block_factor = 1;
  spec.block_max = Nanos{0};
  spec.block_forget_after = Nanos{0};
  EXPECT_EQ(Limit::create(spec).value().next_block(2min, end, end), 2min);
  // Core validation, as every loader meets it.
  spec.block_factor = 1'001;
  EXPECT_EQ(Limit::create(spec).error().message,
            "fixed_window: a block's factor must be a whole number from 1 to 1000, got 1001");
}

TEST(GrowingBlock, IsReadAndWrittenBack) {
  const Config c = valid(kLogin);
  const Limit& l = c.routes[0].limits[0].limit;
  EXPECT_EQ(l.block(), 1min);
  EXPECT_EQ(l.spec().block_factor, 2u);
  EXPECT_EQ(l.spec().block_max, 4min);
  EXPECT_EQ(l.spec().block_forget_after, 10min);
  EXPECT_EQ(valid(to_yaml(c)), c);
  // `block: 5m` is what it always was; a factor of 1 is the same thing.
  const Config plain = valid(R"(
routes:
  - match: POST /a
    limits:
      - {capacity: 1, refill_rate: 1/d, block: 5m}
      - {capacity: 1, refill_rate: 1/d, block: {first: 5m, factor: 1, max: 5m, forget_after: 1d}}
)");
  EXPECT_EQ(plain.routes[0].limits[0].limit.block(), 5min);
  EXPECT_FALSE(plain.routes[0].limits[0].limit.block_grows());
  EXPECT_EQ(plain.routes[0].limits[1].limit, plain.routes[0].limits[0].limit);
}

TEST(GrowingBlock, OneMinuteTwoFourThenMaxForgottenAfterForgetAfterClearedByReset) {
  const Policy p(valid(kLogin));
  MemoryStore store;
  const Headers none{};
  auto ask = [&](Nanos at) {
    return decide(store, p.plan(login(none, kNow + at)), kNow + at, OnFailure::kAllow);
  };
  EXPECT_TRUE(ask(0s).allowed());
  // The bucket is empty for a day: each request after a block ends is
  // denied again and starts the next block at once.
  EXPECT_EQ(ask(0s).decision.retry_after, 1min);    // blocked until 1m
  EXPECT_EQ(ask(30s).decision.retry_after, 30s);    // still in force
  EXPECT_EQ(ask(1min).decision.retry_after, 2min);  // until 3m
  EXPECT_EQ(ask(3min).decision.retry_after, 4min);  // until 7m
  EXPECT_EQ(ask(7min).decision.retry_after, 4min);  // 8m capped at 4m: until 11m
  // 10m after the last block ended, its history is forgotten.
  EXPECT_EQ(ask(21min).decision.retry_after, 1min);  // until 22m
  EXPECT_EQ(ask(22min).decision.retry_after, 2min);  // until 24m
  // A reset (what /admin/reset does) lifts the block and its history.
  const Route& route = p.config().routes[0];
  const std::vector<std::string> keys = p.store_keys(route, "ip:192.0.2.7");
  ASSERT_EQ(keys.size(), 1u);
  EXPECT_TRUE(store.reset(route.limits[0].limit, keys[0]).value());
  EXPECT_TRUE(ask(23min).allowed());
  EXPECT_EQ(ask(23min).decision.retry_after, 1min);
}

TEST(GrowingBlock, BadBlocksAreLoadErrorsAtTheirField) {
  EXPECT_EQ(errors_of(R"(
routes:
  - match: POST /a
    limits:
      - {capacity: 1, refill_rate: 1/d, block: {first: 1m, factor: 0, max: 4m, forget_after: 1h}}
      - {capacity: 1, refill_rate: 1/d, block: {first: 5m, factor: 2, max: 4m, forget_after: 1h}}
      - {capacity: 1, refill_rate: 1/d, block: {first: 1m, factor: 2, max: 4m, forget: 1h}}
      - {capacity: 1, refill_rate: 1/d, block: {first: 1m, factor: 1001, max: 4m, forget_after: 0s}}
)"),
            (Errors{
                "sluice.yaml:5:68: routes[0].limits[0].block.factor: must be a whole number from "
                "1 to 1000, got \"0\"",
                "sluice.yaml:6:76: routes[0].limits[1].block.max: must be at least `first` (5m): "
                "blocks grow from first up to max",
                "sluice.yaml:7:48: routes[0].limits[2].block: a growing block needs "
                "`forget_after` (all of first, factor, max and forget_after)",
                "sluice.yaml:7:80: routes[0].limits[2].block.forget: unknown key (known keys: "
                "first, factor, max, forget_after)",
                "sluice.yaml:8:68: routes[0].limits[3].block.factor: must be a whole number from "
                "1 to 1000, got \"1001\"",
                "sluice.yaml:8:97: routes[0].limits[3].block.forget_after: must be greater than 0, "
                "got \"0s\"",
            }));
}

}  // namespace
}  // namespace sluice::policy
