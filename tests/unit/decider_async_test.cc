// decide_async(): the verdict of decide(), delivered through Store::acquire_async,
// whether the store completes at once (memory) or later (Redis, here a store
// that completes when the test says so).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "policy/decider.h"
#include "sluice/memory_store.h"

namespace sluice::policy {
namespace {

using namespace std::chrono_literals;

const Nanos kNow = 1'000'000s;

// Completes each call only when complete_all() runs, as a network store does:
// it keeps copies of the requests (the caller's may be gone by then) and
// fills `out` just before calling `done`.
class DeferredStore final : public Store {
 public:
  Status acquire(std::span<const AcquireRequest> requests, Nanos now,
                 std::span<Decision> out) override {
    return inner.acquire(requests, now, out);
  }
  void acquire_async(std::span<const AcquireRequest> requests, Nanos now, std::span<Decision> out,
                     Done done) override {
    auto call = std::make_shared<Call>();
    for (const AcquireRequest& r : requests) call->keys.emplace_back(r.key);
    for (size_t i = 0; i < requests.size(); ++i) {
      call->requests.push_back({requests[i].limit, call->keys[i], requests[i].cost});
    }
    call->now = now;
    call->out = out;
    call->done = std::move(done);
    pending.push_back(std::move(call));
  }
  // Answers every pending call with the memory store's decision, or `failure`.
  void complete_all(std::optional<Error> failure = std::nullopt) {
    std::vector<std::shared_ptr<Call>> calls;
    calls.swap(pending);
    for (auto& c : calls) {
      if (failure) {
        c->done(*failure);
      } else {
        c->done(inner.acquire(c->requests, c->now, c->out));
      }
    }
  }
  Result<bool> reset(const Limit& limit, std::string_view key) override {
    return inner.reset(limit, key);
  }
  size_t size() const override { return inner.size(); }

  struct Call {
    std::vector<std::string> keys;
    std::vector<AcquireRequest> requests;
    Nanos now{};
    std::span<Decision> out;
    Done done;
  };
  std::vector<std::shared_ptr<Call>> pending;
  MemoryStore inner{MemoryStoreOptions{.seed = 7}};
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

void expect_same(const Verdict& got, const Verdict& want) {
  EXPECT_EQ(got.limited(), want.limited());
  EXPECT_EQ(got.allowed(), want.allowed());
  EXPECT_EQ(got.decision, want.decision);
  EXPECT_EQ(got.reported, want.reported);
  EXPECT_EQ(got.store_failed(), want.store_failed());
  EXPECT_EQ(got.invalid(), want.invalid());
  EXPECT_EQ(got.error, want.error);
  ASSERT_EQ(got.outcomes.size(), want.outcomes.size());
  for (size_t i = 0; i < got.outcomes.size(); ++i) {
    EXPECT_EQ(got.outcomes[i].limit, want.outcomes[i].limit);
    EXPECT_EQ(got.outcomes[i].decision, want.outcomes[i].decision);
  }
}

TEST(DecideAsync, WithTheMemoryStoreAnswersBeforeReturningAsDecideDoes) {
  Fixture f;
  MemoryStore async_store(MemoryStoreOptions{.seed = 7});
  MemoryStore sync_store(MemoryStoreOptions{.seed = 7});
  const Plan both = f.plan_of({&f.a, &f.b});
  // Allowed twice (b 2 -> 0), then denied by b with a not charged, weighted.
  for (uint64_t cost : {1, 1, 1, 2, 6}) {
    std::optional<Verdict> got;
    decide_async(async_store, both, kNow, OnFailure::kAllow, cost,
                 [&](Verdict v) { got = std::move(v); });
    ASSERT_TRUE(got.has_value()) << "the memory store completes inline";
    expect_same(*got, decide(sync_store, both, kNow, OnFailure::kAllow, cost));
  }
}

TEST(DecideAsync, PlanWithoutLimitsIsNotLimitedAndAsksNoStore) {
  DeferredStore store;
  std::optional<Verdict> got;
  decide_async(store, Plan{}, kNow, OnFailure::kAllow, 1, [&](Verdict v) { got = std::move(v); });
  ASSERT_TRUE(got.has_value());
  EXPECT_FALSE(got->limited());
  EXPECT_TRUE(got->allowed());
  EXPECT_TRUE(store.pending.empty());
}

TEST(DecideAsync, ALaterCompletionGivesTheVerdictOnceThen) {
  Fixture f;
  DeferredStore store;
  MemoryStore reference(MemoryStoreOptions{.seed = 7});
  const Plan both = f.plan_of({&f.a, &f.b});
  std::vector<Verdict> got;
  for (int i = 0; i < 3; ++i) {
    decide_async(store, both, kNow, OnFailure::kAllow, 1,
                 [&](Verdict v) { got.push_back(std::move(v)); });
  }
  EXPECT_TRUE(got.empty()) << "nothing before the store answers";
  ASSERT_EQ(store.pending.size(), 3u);
  store.complete_all();
  ASSERT_EQ(got.size(), 3u);
  for (const Verdict& v : got) expect_same(v, decide(reference, both, kNow, OnFailure::kAllow));
  EXPECT_TRUE(got[1].allowed());  // b 2 -> 0
  EXPECT_FALSE(got[2].allowed());
  EXPECT_EQ(got[2].reported, &f.b);
  EXPECT_EQ(got[2].outcomes[0].decision.remaining, 3u);  // a was not charged
}

TEST(DecideAsync, AFailureLaterFollowsOnFailure) {
  Fixture f;
  DeferredStore store;
  const Plan plan = f.plan_of({&f.a, &f.b});
  std::optional<Verdict> open, closed;
  decide_async(store, plan, kNow, OnFailure::kAllow, 1, [&](Verdict v) { open = std::move(v); });
  decide_async(store, plan, kNow, OnFailure::kDeny, 1, [&](Verdict v) { closed = std::move(v); });
  store.complete_all(Error{ErrorCode::kStoreUnavailable, "redis: timeout"});
  ASSERT_TRUE(open && closed);
  EXPECT_TRUE(open->store_failed());
  EXPECT_TRUE(open->allowed());
  EXPECT_EQ(open->decision.limit, 5u);
  EXPECT_EQ(open->error, "redis: timeout");
  ASSERT_EQ(open->outcomes.size(), 2u);
  EXPECT_EQ(open->outcomes[1].decision.limit, 2u);
  EXPECT_TRUE(closed->store_failed());
  EXPECT_FALSE(closed->allowed());
  EXPECT_EQ(closed->decision.retry_after, 1s);
}

TEST(DecideAsync, TakesAMoveOnlyCallbackAndManyLimits) {
  DeferredStore store;
  std::vector<RouteLimit> limits;
  for (int i = 0; i < 20; ++i) {
    limits.push_back(RouteLimit{"r#" + std::to_string(i), false,
                                Limit::fixed_window(static_cast<uint64_t>(100 - i), 60s).value()});
  }
  Plan plan;
  for (const RouteLimit& l : limits) plan.limits.push_back({&l, l.name + "|k"});
  std::optional<Verdict> got;
  auto token = std::make_unique<int>(42);  // makes the callback move-only
  decide_async(store, plan, kNow, OnFailure::kAllow, 1,
               [token = std::move(token), &got](Verdict v) {
                 EXPECT_EQ(*token, 42);
                 got = std::move(v);
               });
  ASSERT_EQ(store.pending.size(), 1u);
  EXPECT_EQ(store.pending[0]->requests.size(), 20u);
  store.complete_all();
  ASSERT_TRUE(got.has_value());
  EXPECT_TRUE(got->allowed());
  ASSERT_EQ(got->outcomes.size(), 20u);
  EXPECT_EQ(got->reported, &limits[19]);
  EXPECT_EQ(got->decision.remaining, 80u);  // 81 - 1
}

}  // namespace
}  // namespace sluice::policy
