#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "policy/config_loader.h"
#include "policy/decider.h"
#include "sluice/memory_store.h"

namespace sluice::policy {
namespace {

using namespace std::chrono_literals;

// Fails every call with `code`, charging nothing.
class FailingStore final : public Store {
 public:
  explicit FailingStore(ErrorCode code) : code_(code) {}
  Status acquire(std::span<const AcquireRequest>, Nanos, std::span<Decision>) override {
    ++calls;
    return Error{code_, "redis: connection refused"};
  }
  Result<bool> reset(const Limit&, std::string_view) override { return false; }
  size_t size() const override { return 0; }
  int calls = 0;

 private:
  ErrorCode code_;
};

// Counts calls through to a MemoryStore (decide() must call the store once).
class CountingStore final : public Store {
 public:
  Status acquire(std::span<const AcquireRequest> requests, Nanos now,
                 std::span<Decision> out) override {
    ++calls;
    last_batch = requests.size();
    return inner.acquire(requests, now, out);
  }
  Result<bool> reset(const Limit& limit, std::string_view key) override {
    return inner.reset(limit, key);
  }
  size_t size() const override { return inner.size(); }
  MemoryStore inner{MemoryStoreOptions{.seed = 7}};
  int calls = 0;
  size_t last_batch = 0;
};

struct Fixture {
  // a: 5 tokens, 1/s; b: 2 tokens, 1 per 10 s.
  RouteLimit a{"r#0", false, Limit::token_bucket(5, 1, 1s).value()};
  RouteLimit b{"r#1", false, Limit::token_bucket(2, 1, 10s).value()};
  Plan plan_of(std::initializer_list<const RouteLimit*> limits, std::string key = "ip:1.2.3.4") {
    Plan p;
    for (const RouteLimit* l : limits) p.limits.push_back({l, l->name + "|" + key});
    return p;
  }
};

const Nanos kNow = 1'000'000s;

TEST(Decide, PlanWithoutLimitsIsNotLimited) {
  CountingStore store;
  const Verdict v = decide(store, Plan{}, kNow, OnFailure::kAllow);
  EXPECT_FALSE(v.limited());
  EXPECT_TRUE(v.allowed());
  EXPECT_EQ(v.reported, nullptr);
  EXPECT_TRUE(v.outcomes.empty());
  EXPECT_EQ(store.calls, 0);
}

TEST(Decide, OneLimitAllowsCapacityThenDenies) {
  Fixture f;
  CountingStore store;
  const Plan plan = f.plan_of({&f.a});
  for (uint64_t i = 0; i < 5; ++i) {
    const Verdict v = decide(store, plan, kNow, OnFailure::kAllow);
    EXPECT_TRUE(v.limited());
    EXPECT_TRUE(v.allowed());
    EXPECT_EQ(v.decision.remaining, 4 - i);  // 5 -> 0 tokens
    EXPECT_EQ(v.reported, &f.a);
  }
  const Verdict denied = decide(store, plan, kNow, OnFailure::kAllow);
  EXPECT_FALSE(denied.allowed());
  EXPECT_FALSE(denied.decision.allowed);
  EXPECT_EQ(denied.decision.retry_after, 1s);
  EXPECT_EQ(denied.reported, &f.a);
  EXPECT_FALSE(denied.store_failed());
  EXPECT_TRUE(denied.error.empty());
  // Waiting exactly retry_after is enough.
  EXPECT_TRUE(decide(store, plan, kNow + 1s, OnFailure::kAllow).allowed());
}

TEST(Decide, AllLimitsInOneStoreCall) {
  Fixture f;
  CountingStore store;
  const Verdict v = decide(store, f.plan_of({&f.a, &f.b}), kNow, OnFailure::kAllow);
  EXPECT_EQ(store.calls, 1);
  EXPECT_EQ(store.last_batch, 2u);
  ASSERT_EQ(v.outcomes.size(), 2u);
  EXPECT_EQ(v.outcomes[0].limit, &f.a);
  EXPECT_EQ(v.outcomes[1].limit, &f.b);
  EXPECT_EQ(v.outcomes[0].decision.remaining, 4u);
  EXPECT_EQ(v.outcomes[1].decision.remaining, 1u);
}

TEST(Decide, AllowedReportsTheLimitWithLeastRemaining) {
  Fixture f;
  CountingStore store;
  const Verdict v = decide(store, f.plan_of({&f.a, &f.b}), kNow, OnFailure::kAllow);
  EXPECT_EQ(v.reported, &f.b);
  EXPECT_EQ(v.decision.limit, 2u);
  EXPECT_EQ(v.decision.remaining, 1u);
  EXPECT_EQ(v.decision.reset_after, 10s);
}

TEST(Decide, SeveralLimitsAreAllOrNothing) {
  Fixture f;
  CountingStore store;
  const Plan both = f.plan_of({&f.a, &f.b});
  EXPECT_TRUE(decide(store, both, kNow, OnFailure::kAllow).allowed());  // a 5 -> 4, b 2 -> 1
  EXPECT_TRUE(decide(store, both, kNow, OnFailure::kAllow).allowed());  // a 4 -> 3, b 1 -> 0
  for (int i = 0; i < 3; ++i) {
    const Verdict v = decide(store, both, kNow, OnFailure::kAllow);  // b denies; a is not charged
    EXPECT_FALSE(v.allowed());
    EXPECT_EQ(v.reported, &f.b);
    EXPECT_EQ(v.decision.retry_after, 10s);
    ASSERT_EQ(v.outcomes.size(), 2u);
    EXPECT_TRUE(v.outcomes[0].decision.allowed);
    // Nothing was charged: a still holds 3 and says so.
    EXPECT_EQ(v.outcomes[0].decision.remaining, 3u);
    EXPECT_FALSE(v.outcomes[1].decision.allowed);
    EXPECT_EQ(v.outcomes[1].decision.remaining, 0u);
  }
  // a alone (same store key): 3 -> 2, proving the denials charged nothing.
  const Verdict a_only = decide(store, f.plan_of({&f.a}), kNow, OnFailure::kAllow);
  EXPECT_TRUE(a_only.allowed());
  EXPECT_EQ(a_only.decision.remaining, 2u);
}

// Both deny: the headers carry the longest retry (b's), and the verdict
// names the limit that fired first in the route's order (a).
TEST(Decide, DeniedReportsTheLongestRetryAndNamesTheFirstDenyingLimit) {
  Fixture f;
  CountingStore store;
  const Plan both = f.plan_of({&f.a, &f.b});
  const Plan a_only = f.plan_of({&f.a});
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(decide(store, a_only, kNow, OnFailure::kAllow).allowed());
  ASSERT_TRUE(decide(store, f.plan_of({&f.b}), kNow, OnFailure::kAllow).allowed());
  ASSERT_TRUE(decide(store, f.plan_of({&f.b}), kNow, OnFailure::kAllow).allowed());
  const Verdict v = decide(store, both, kNow, OnFailure::kAllow);  // a: retry 1 s, b: retry 10 s
  EXPECT_FALSE(v.allowed());
  EXPECT_FALSE(v.outcomes[0].decision.allowed);
  EXPECT_FALSE(v.outcomes[1].decision.allowed);
  EXPECT_EQ(v.reported, &f.a);
  EXPECT_EQ(v.decision.retry_after, 10s);
  // The other order names b.
  const Verdict reversed = decide(store, f.plan_of({&f.b, &f.a}), kNow, OnFailure::kAllow);
  EXPECT_FALSE(reversed.allowed());
  EXPECT_EQ(reversed.reported, &f.b);
  EXPECT_EQ(reversed.decision.retry_after, 10s);
}

TEST(Decide, WeightedCost) {
  Fixture f;
  CountingStore store;
  const Plan plan = f.plan_of({&f.a});
  const Verdict v = decide(store, plan, kNow, OnFailure::kAllow, 3);
  EXPECT_TRUE(v.allowed());
  EXPECT_EQ(v.decision.remaining, 2u);  // 5 -> 2
  const Verdict denied = decide(store, plan, kNow, OnFailure::kAllow, 3);
  EXPECT_FALSE(denied.allowed());
  EXPECT_EQ(denied.decision.retry_after, 1s);  // 2 -> 3 tokens takes 1 s
}

TEST(Decide, CostAboveALimitIsAnInvalidRequestNotAStoreFailure) {
  Fixture f;
  CountingStore store;
  const Verdict v =
      decide(store, f.plan_of({&f.a, &f.b}), kNow, OnFailure::kAllow, 3);  // b holds 2
  EXPECT_TRUE(v.limited());
  EXPECT_FALSE(v.allowed());
  EXPECT_TRUE(v.invalid());
  EXPECT_FALSE(v.store_failed());
  EXPECT_FALSE(v.error.empty());
  EXPECT_EQ(v.decision.retry_after, 0ns);
}

TEST(Decide, StoreFailureFailsOpenWhenConfigured) {
  Fixture f;
  FailingStore store(ErrorCode::kStoreUnavailable);
  const Verdict v = decide(store, f.plan_of({&f.a, &f.b}), kNow, OnFailure::kAllow);
  EXPECT_EQ(store.calls, 1);
  EXPECT_TRUE(v.limited());
  EXPECT_TRUE(v.allowed());
  EXPECT_TRUE(v.store_failed());
  EXPECT_FALSE(v.invalid());
  EXPECT_EQ(v.error, "redis: connection refused");
  EXPECT_TRUE(v.decision.allowed);
  EXPECT_EQ(v.decision.limit, 5u);
  EXPECT_EQ(v.decision.retry_after, 0ns);
  EXPECT_EQ(v.reported, &f.a);
  ASSERT_EQ(v.outcomes.size(), 2u);
  EXPECT_EQ(v.outcomes[1].limit, &f.b);
  EXPECT_EQ(v.outcomes[1].decision.limit, 2u);
  EXPECT_TRUE(v.outcomes[1].decision.allowed);
}

TEST(Decide, StoreFailureFailsClosedWhenConfigured) {
  Fixture f;
  FailingStore store(ErrorCode::kStoreUnavailable);
  const Verdict v = decide(store, f.plan_of({&f.a}), kNow, OnFailure::kDeny);
  EXPECT_TRUE(v.limited());
  EXPECT_FALSE(v.allowed());
  EXPECT_TRUE(v.store_failed());
  EXPECT_FALSE(v.decision.allowed);
  EXPECT_EQ(v.decision.retry_after, 1s);
  EXPECT_EQ(v.error, "redis: connection refused");
}

TEST(Decide, InternalStoreErrorsFollowOnFailure) {
  Fixture f;
  FailingStore store(ErrorCode::kInternal);
  const Verdict v = decide(store, f.plan_of({&f.a}), kNow, OnFailure::kDeny);
  EXPECT_TRUE(v.store_failed());
  EXPECT_FALSE(v.allowed());
}

TEST(Decide, ManyLimitsBeyondTheInlineArray) {
  CountingStore store;
  std::vector<RouteLimit> limits;
  for (int i = 0; i < 20; ++i) {
    limits.push_back(RouteLimit{"r#" + std::to_string(i), false,
                                Limit::fixed_window(static_cast<uint64_t>(100 - i), 60s).value()});
  }
  Plan plan;
  for (const RouteLimit& l : limits) plan.limits.push_back({&l, l.name + "|k"});
  const Verdict v = decide(store, plan, kNow, OnFailure::kAllow);
  EXPECT_TRUE(v.allowed());
  EXPECT_EQ(store.last_batch, 20u);
  ASSERT_EQ(v.outcomes.size(), 20u);
  EXPECT_EQ(v.reported, &limits[19]);
  EXPECT_EQ(v.decision.remaining, 80u);  // 81 - 1
}

// count_status: what the gateway gives back once it knows the response's status.
TEST(GiveBackUncounted, RefundsOnlyChargedLimitsWhoseCountStatusOmitsTheStatus) {
  Fixture f;
  RouteLimit failures{"r#2", false, Limit::fixed_window(2, 1h).value(), {}, {401, 403}};
  MemoryStore store(MemoryStoreOptions{.seed = 7});
  const Plan plan = f.plan_of({&f.a, &failures});
  int done_calls = 0;
  const auto count_done = [&done_calls](Status s) {
    EXPECT_TRUE(s.ok());
    ++done_calls;
  };
  // A success (200): the failures limit is given back, `a` (no count_status) is not.
  Verdict v = decide(store, plan, kNow, OnFailure::kAllow);
  ASSERT_TRUE(v.allowed());
  EXPECT_EQ(v.outcomes[1].decision.decided_at, kNow);
  EXPECT_EQ(give_back_uncounted(store, plan, v, 200, kNow, count_done), 1u);
  EXPECT_EQ(done_calls, 1);
  v = decide(store, plan, kNow, OnFailure::kAllow);
  EXPECT_EQ(v.outcomes[0].decision.remaining, 3u);  // a: charged twice
  EXPECT_EQ(v.outcomes[1].decision.remaining, 1u);  // failures: only this one
  // A listed status keeps the charge; so does nothing at all to give back.
  EXPECT_EQ(give_back_uncounted(store, plan, v, 401, kNow, count_done), 0u);
  EXPECT_EQ(done_calls, 1);
  // Never sent (nullopt): given back.
  v = decide(store, plan, kNow, OnFailure::kAllow);
  EXPECT_EQ(v.outcomes[1].decision.remaining, 0u);
  EXPECT_EQ(give_back_uncounted(store, plan, v, std::nullopt, kNow, count_done), 1u);
  EXPECT_EQ(done_calls, 2);
  v = decide(store, plan, kNow, OnFailure::kAllow);
  EXPECT_TRUE(v.allowed());
  EXPECT_EQ(v.outcomes[1].decision.remaining, 0u);
  // A denial charged nothing: nothing to give back.
  v = decide(store, plan, kNow, OnFailure::kAllow);
  ASSERT_FALSE(v.allowed());
  EXPECT_EQ(give_back_uncounted(store, plan, v, 200, kNow, count_done), 0u);
  EXPECT_EQ(done_calls, 2);
}

TEST(GiveBackUncounted, AFailedStoreChargedNothing) {
  RouteLimit failures{"r#0", false, Limit::fixed_window(2, 1h).value(), {}, {401}};
  FailingStore store(ErrorCode::kStoreUnavailable);
  Plan plan;
  plan.limits.push_back({&failures, "r#0|ip:1.2.3.4"});
  const Verdict v = decide(store, plan, kNow, OnFailure::kAllow);
  ASSERT_TRUE(v.store_failed());
  ASSERT_TRUE(v.allowed());
  EXPECT_EQ(give_back_uncounted(store, plan, v, 200, kNow, [](Status) { FAIL(); }), 0u);
}

// The login lockout of docs/ABUSE.md from config to verdicts, on an injected
// clock: 5 failures, then the key is out for exactly `block`; another
// client's successes are given back and never count.
TEST(GiveBackUncounted, ALoginLockoutFromTheConfigLastsExactlyItsBlock) {
  const LoadResult loaded = load_config_string(R"(upstream: http://127.0.0.1:3000
routes:
  - match: POST /api/login
    limits: [{algorithm: fixed_window, limit: 5, window: 15m, count_status: [401, 403], block: 30m}]
)",
                                               "t.yaml");
  ASSERT_TRUE(loaded.config.has_value());
  const Policy policy(*loaded.config);
  MemoryStore store(MemoryStoreOptions{.seed = 7});
  const auto plan_for = [&](std::string_view peer) {
    RequestInfo info;
    info.method = "POST";
    info.target = "/api/login";
    info.peer = parse_ip(peer).value();
    return policy.plan(info);
  };
  const Plan attacker = plan_for("203.0.113.9");
  const Plan user = plan_for("192.0.2.1");
  const Nanos t0 = std::chrono::seconds(1'704'110'400);  // on a 15-minute boundary
  const auto ignore = [](Status) {};
  for (int i = 0; i < 5; ++i) {
    const Verdict v = decide(store, attacker, t0 + std::chrono::seconds(i), OnFailure::kAllow);
    ASSERT_TRUE(v.allowed()) << i;
    EXPECT_EQ(give_back_uncounted(store, attacker, v, 401, t0, ignore), 0u);
  }
  const Nanos blocked_at = t0 + 10s;
  Verdict v = decide(store, attacker, blocked_at, OnFailure::kAllow);
  EXPECT_FALSE(v.allowed());
  EXPECT_EQ(v.decision.retry_after, 30min);
  // The window has turned twice meanwhile: only the block holds the key.
  v = decide(store, attacker, blocked_at + 30min - 1us, OnFailure::kAllow);
  EXPECT_FALSE(v.allowed());
  EXPECT_EQ(v.decision.retry_after, 1us);
  for (int i = 0; i < 10; ++i) {
    const Verdict ok = decide(store, user, blocked_at + std::chrono::seconds(i), OnFailure::kAllow);
    ASSERT_TRUE(ok.allowed()) << i;
    EXPECT_EQ(ok.decision.remaining, 4u) << i;
    EXPECT_EQ(give_back_uncounted(store, user, ok, 200, blocked_at, ignore), 1u);
  }
  v = decide(store, attacker, blocked_at + 30min, OnFailure::kAllow);
  EXPECT_TRUE(v.allowed());
  EXPECT_EQ(v.decision.remaining, 4u);
}

}  // namespace
}  // namespace sluice::policy
