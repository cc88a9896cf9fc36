// Queueing (a route's `delay`, AcquireRequest::max_wait): a request the
// bucket cannot pay now is allowed with a wait when refill within max_wait
// would pay it, its place reserved as debt; the turns it gives equal nginx's
// limit_req without nodelay (rate=R burst=B as capacity 1, refill R,
// delay B/R), checked here against nginx's own arithmetic on a random trace.
#include <gtest/gtest.h>

#include <array>
#include <random>
#include <string>
#include <vector>

#include "core/gcra.h"
#include "core/refund.h"
#include "core/token_bucket.h"
#include "policy/charge.h"
#include "policy/config_loader.h"
#include "policy/decider.h"
#include "sluice/clock.h"
#include "sluice/memory_store.h"
#include "test_util.h"

namespace sluice {
namespace {

using namespace std::chrono_literals;
using policy::OnFailure;
using testing::kNoon;
using testing::must;

// One key under one limit, with a max_wait, through the packed step as the
// memory store drives it.
class Queue {
 public:
  Queue(Limit limit, Nanos max_wait) : limit_(std::move(limit)), max_wait_(max_wait) {}
  Decision apply(Nanos now, uint64_t cost = 1) {
    const core::PackedState state = state_ ? *state_ : core::fresh_state(limit_, now);
    const core::PackedStep step = core::step(limit_, state, now, cost, max_wait_);
    if (step.decision.allowed) state_ = step.next;
    return step.decision;
  }
  void refund(Nanos charged_at, Nanos now) {
    if (auto next = core::refund(limit_, *state_, charged_at, now, 1)) state_ = *next;
  }

 private:
  Limit limit_;
  Nanos max_wait_;
  std::optional<core::PackedState> state_;
};

class BucketQueueing : public ::testing::TestWithParam<Algorithm> {
 protected:
  Limit limit(uint64_t capacity, uint64_t tokens, Nanos period) const {
    return must(Limit::create(testing::bucket(GetParam(), capacity, tokens, period)));
  }
};

// Five requests at once against 1/s, delay 4s (nginx
// rate=1r/s burst=4): served at 0, 1, 2, 3 and 4 s; a sixth is denied.
TEST_P(BucketQueueing, FiveAtOnceAgainstOnePerSecondAreServedOneSecondApart) {
  Queue q(limit(1, 1, 1s), 4s);
  for (int i = 0; i < 5; ++i) {
    const Decision d = q.apply(kNoon);
    ASSERT_TRUE(d.allowed) << i;
    EXPECT_EQ(d.wait, std::chrono::seconds(i)) << i;
    EXPECT_EQ(d.remaining, 0u) << i;
    EXPECT_EQ(d.retry_after, 0ns) << i;
    // Full again one second after the last reserved turn.
    EXPECT_EQ(d.reset_after, std::chrono::seconds(i + 1)) << i;
  }
  const Decision sixth = q.apply(kNoon);
  EXPECT_FALSE(sixth.allowed);
  EXPECT_EQ(sixth.wait, 0ns);
  // A second later the first turn has passed: the queue has room for one.
  EXPECT_EQ(sixth.retry_after, 1s);
  EXPECT_EQ(sixth.remaining, 0u);
  EXPECT_FALSE(q.apply(kNoon + 1s - 1ns).allowed);
  const Decision later = q.apply(kNoon + 1s);
  ASSERT_TRUE(later.allowed);
  EXPECT_EQ(later.wait, 4s);  // its turn: 5 s after noon, after the fifth
}

// Capacity above 1: the burst passes at once, the queue starts behind it.
TEST_P(BucketQueueing, TheBurstGoesAtOnceThenTurnsComeAtTheRefillRate) {
  Queue q(limit(3, 10, 1s), 250ms);  // 100 ms per token, room for 2 queued
  for (int i = 0; i < 3; ++i) EXPECT_EQ(q.apply(kNoon).wait, 0ns) << i;
  EXPECT_EQ(q.apply(kNoon).wait, 100ms);
  EXPECT_EQ(q.apply(kNoon).wait, 200ms);
  EXPECT_FALSE(q.apply(kNoon).allowed);  // would wait 300 ms > 250 ms
  // 50 ms on: the next turn would come 250 ms from now, within the delay.
  const Decision d = q.apply(kNoon + 50ms);
  ASSERT_TRUE(d.allowed);
  EXPECT_EQ(d.wait, 250ms);
}

// A held request whose client leaves gives its place back: the next arrival
// gets that turn, and a queue emptied by refunds is a full bucket again.
TEST_P(BucketQueueing, ARefundedReservationIsTheNextArrivalsTurn) {
  Queue q(limit(1, 1, 1s), 3s);
  ASSERT_EQ(q.apply(kNoon).wait, 0s);
  ASSERT_EQ(q.apply(kNoon).wait, 1s);
  ASSERT_EQ(q.apply(kNoon).wait, 2s);
  q.refund(kNoon, kNoon + 100ms);  // the one due at +2 s leaves
  const Decision next = q.apply(kNoon + 100ms);
  ASSERT_TRUE(next.allowed);
  EXPECT_EQ(next.wait, 1900ms);  // the turn at +2 s
  q.refund(kNoon, kNoon + 200ms);
  q.refund(kNoon, kNoon + 200ms);
  q.refund(kNoon, kNoon + 200ms);
  // Everything given back: full again, one request at once and one queued.
  EXPECT_EQ(q.apply(kNoon + 200ms).wait, 0ns);
  EXPECT_EQ(q.apply(kNoon + 200ms).wait, 1s);
}

// Without max_wait a bucket some other route queued on reports nothing
// left and the time until a request of its own could pass.
TEST_P(BucketQueueing, ABucketInDebtDeniesWithoutMaxWaitUntilTheDebtIsRefilled) {
  const Limit l = limit(2, 1, 1s);
  core::PackedState state = core::fresh_state(l, kNoon);
  for (int i = 0; i < 4; ++i) state = core::step(l, state, kNoon, 1, 2s).next;  // 2 queued
  const Decision d = core::step(l, state, kNoon + 500ms, 1).decision;
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.remaining, 0u);
  EXPECT_EQ(d.retry_after, 2500ms);  // 2 tokens of debt + 1 to pay, 0.5 s refilled
  EXPECT_EQ(d.reset_after, 3500ms);
}

INSTANTIATE_TEST_SUITE_P(Buckets, BucketQueueing,
                         ::testing::Values(Algorithm::kTokenBucket, Algorithm::kGcra),
                         [](const auto& info) { return std::string(algorithm_name(info.param)); });

// nginx's limit_req (ngx_http_limit_req_module.c), in its own units: excess
// in thousandths of a request, rate in thousandths per second, times in ms.
// Returns the delay in ms, or -1 for a rejection.
struct NginxLimitReq {
  int64_t rate;   // R r/s * 1000
  int64_t burst;  // B * 1000
  bool seen = false;
  int64_t excess = 0;
  int64_t last_ms = 0;
  int64_t request(int64_t now_ms) {
    int64_t e = 0;
    if (seen) {
      const int64_t ms = now_ms - last_ms;
      e = excess - rate * ms / 1000 + 1000;
      if (e < 0) e = 0;
      if (e > burst) return -1;
    }
    seen = true;
    excess = e;
    last_ms = now_ms;
    return e * 1000 / rate;
  }
};

// nginx rate=R burst=B (no nodelay) is capacity 1, refill R/s, delay B/R:
// on a random trace of arrivals every request is served or refused as nginx
// would, at the same moment (nginx truncates its delay to the millisecond).
TEST(QueueingLikeNginx, EveryTurnOfARandomTraceMatchesLimitReqWithoutNodelay) {
  struct Case {
    int64_t rate;
    int64_t burst;
  };
  for (const Case c : {Case{1, 4}, Case{10, 5}, Case{2, 1}, Case{5, 20}}) {
    const Nanos delay = std::chrono::milliseconds(c.burst * 1000 / c.rate);
    for (const Algorithm a : {Algorithm::kTokenBucket, Algorithm::kGcra}) {
      Queue sluice(must(Limit::create(testing::bucket(a, 1, static_cast<uint64_t>(c.rate), 1s))),
                   delay);
      NginxLimitReq nginx{c.rate * 1000, c.burst * 1000};
      std::mt19937_64 rng(42);
      int64_t now_ms = 0;
      int served = 0;
      int refused = 0;
      for (int i = 0; i < 2000; ++i) {
        // Bursts (several at one instant) and gaps up to two emission intervals.
        if (rng() % 3 != 0) now_ms += static_cast<int64_t>(rng() % (2000 / c.rate + 1));
        const int64_t nginx_delay = nginx.request(now_ms);
        const Decision d = sluice.apply(kNoon + std::chrono::milliseconds(now_ms));
        ASSERT_EQ(d.allowed, nginx_delay >= 0) << "request " << i << " at " << now_ms << " ms";
        if (!d.allowed) {
          ++refused;
          continue;
        }
        ++served;
        // Sluice's wait is exact (ceil to the ns); nginx's is truncated to the ms.
        EXPECT_EQ(std::chrono::duration_cast<std::chrono::milliseconds>(d.wait).count(),
                  nginx_delay)
            << "request " << i;
        EXPECT_LT(d.wait - std::chrono::milliseconds(nginx_delay), 1ms) << "request " << i;
      }
      EXPECT_GT(served, 100) << c.rate;
      EXPECT_GT(refused, 100) << c.rate;
    }
  }
}

TEST(QueueingStore, AWindowAlgorithmRefusesMaxWait) {
  MemoryStore store(MemoryStoreOptions{.seed = 1});
  const Limit window = must(Limit::fixed_window(5, 1s));
  Decision out;
  const AcquireRequest r{&window, "k", 1, 1s};
  const Status s = store.acquire({&r, 1}, kNoon, {&out, 1});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.error().message,
            "fixed_window cannot queue a request (max_wait): only token_bucket and gcra can go "
            "into debt to reserve a later turn");
  EXPECT_EQ(store.size(), 0u);
}

// Several limits: the request waits for the latest of its turns, and a
// limit that cannot queue it in time denies the whole request, charging none.
TEST(QueueingStore, SeveralLimitsWaitForTheLatestTurnAndDenyAllOrNothing) {
  MemoryStore store(MemoryStoreOptions{.seed = 1});
  const Limit per_user = must(Limit::token_bucket(1, 1, 1s));  // a turn each second
  const Limit global = must(Limit::gcra(2, 4, 1s));            // a turn each 250 ms
  const auto acquire = [&](Nanos now, Nanos max_wait) {
    const std::array<AcquireRequest, 2> r{AcquireRequest{&per_user, "u", 1, max_wait},
                                          AcquireRequest{&global, "g", 1, max_wait}};
    std::array<Decision, 2> out{};
    EXPECT_TRUE(store.acquire(r, now, out).ok());
    return out;
  };
  std::array<Decision, 2> d = acquire(kNoon, 1s);
  EXPECT_EQ(d[0].wait, 0ns);
  EXPECT_EQ(d[1].wait, 0ns);
  d = acquire(kNoon, 1s);
  EXPECT_EQ(d[0].wait, 1s);
  EXPECT_EQ(d[1].wait, 0ns);
  // per_user would need 2 s > 1 s: denied, and global keeps its one token.
  d = acquire(kNoon, 1s);
  EXPECT_FALSE(d[0].allowed);
  EXPECT_EQ(d[0].retry_after, 1s);
  EXPECT_TRUE(d[1].allowed);
  Decision g;
  const AcquireRequest only_global{&global, "g", 1, 1s};
  ASSERT_TRUE(store.acquire({&only_global, 1}, kNoon, {&g, 1}).ok());
  EXPECT_EQ(g.wait, 250ms);  // the 3rd charge on global: one interval past its burst of 2
}

// ---- policy: the route's delay reaches the store, the verdict holds the wait

policy::Config config_with_delay() {
  policy::LoadResult r = policy::load_config_string(R"(upstream: http://127.0.0.1:3000
routes:
  - match: GET /api/feed
    limits: [{capacity: 1, refill_rate: 1/s}, {algorithm: gcra, capacity: 10, refill_rate: 10/s}]
    delay: 2s
)",
                                                    "t.yaml");
  EXPECT_TRUE(r.config.has_value());
  return r.config ? *r.config : policy::Config{};
}

TEST(QueueingVerdict, AVerdictWaitsForItsLatestLimitAndGiveBackAllFreesThePlace) {
  const policy::Policy policy(config_with_delay());
  MemoryStore store(MemoryStoreOptions{.seed = 3});
  policy::RequestInfo info;
  info.method = "GET";
  info.target = "/api/feed";
  info.peer = policy::parse_ip("192.0.2.1").value();
  const policy::Plan plan = policy.plan(info);
  ASSERT_EQ(plan.limits.size(), 2u);
  const auto ignore = [](Status) {};

  policy::Verdict v = policy::decide(store, plan, kNoon, OnFailure::kAllow);
  ASSERT_TRUE(v.allowed());
  EXPECT_EQ(v.wait, 0ns);
  v = policy::decide(store, plan, kNoon, OnFailure::kAllow);
  ASSERT_TRUE(v.allowed());
  EXPECT_EQ(v.wait, 1s);
  const policy::Verdict third = policy::decide(store, plan, kNoon, OnFailure::kAllow);
  ASSERT_TRUE(third.allowed());
  EXPECT_EQ(third.wait, 2s);
  EXPECT_FALSE(policy::decide(store, plan, kNoon, OnFailure::kAllow).allowed());
  // The third leaves: both limits get their charge back; the next arrival
  // takes its turn.
  EXPECT_EQ(policy::give_back_all(store, plan, third, kNoon + 10ms, ignore), 2u);
  v = policy::decide(store, plan, kNoon + 10ms, OnFailure::kAllow);
  ASSERT_TRUE(v.allowed());
  EXPECT_EQ(v.wait, 1990ms);
  // A denied verdict charged nothing: nothing to give back.
  const policy::Verdict denied = policy::decide(store, plan, kNoon + 10ms, OnFailure::kAllow);
  ASSERT_FALSE(denied.allowed());
  EXPECT_EQ(policy::give_back_all(store, plan, denied, kNoon + 10ms, ignore), 0u);
}

struct CountingObserver final : policy::ChargeObserver {
  void on_slots_taken() const override { ++taken; }
  void on_slots_released() const override { ++released; }
  void on_refunded() const override { ++refunded; }
  void on_give_back_failed() const override { ++failed; }
  mutable int taken = 0, released = 0, refunded = 0, failed = 0;
};

// A held request whose client left: its Charge gives every limit back, once,
// and then nothing more, however often it is asked.
TEST(QueueingVerdict, ACancelledChargeGivesEverythingBackOnce) {
  const policy::Policy policy(config_with_delay());
  MemoryStore store(MemoryStoreOptions{.seed = 3});
  ManualClock clock(kNoon + 10ms);
  policy::RequestInfo info;
  info.method = "GET";
  info.target = "/api/feed";
  info.peer = policy::parse_ip("192.0.2.1").value();
  const policy::Plan plan = policy.plan(info);
  ASSERT_TRUE(policy::decide(store, plan, kNoon, OnFailure::kAllow).allowed());
  ASSERT_EQ(policy::decide(store, plan, kNoon, OnFailure::kAllow).wait, 1s);
  const policy::Verdict third = policy::decide(store, plan, kNoon, OnFailure::kAllow);
  ASSERT_EQ(third.wait, 2s);

  const CountingObserver observer;
  policy::Charge charge(store, clock, plan, third, observer);
  int thens = 0;
  charge.cancel([&] { ++thens; });
  EXPECT_EQ(thens, 1);
  // Its place is free: the next arrival waits as the third would have.
  const policy::Verdict next = policy::decide(store, plan, kNoon + 10ms, OnFailure::kAllow);
  ASSERT_TRUE(next.allowed());
  EXPECT_EQ(next.wait, 1990ms);
  // Asked again (and settled, released): nothing more goes back, so the
  // queue stays full.
  charge.cancel([&] { ++thens; });
  charge.settle(policy::Settlement{500}, [&] { ++thens; });
  charge.release([&] { ++thens; });
  EXPECT_EQ(thens, 4);
  EXPECT_FALSE(policy::decide(store, plan, kNoon + 10ms, OnFailure::kAllow).allowed());
  EXPECT_EQ(observer.taken, 0);  // no concurrency limit here
  EXPECT_EQ(observer.released, 0);
  EXPECT_EQ(observer.refunded, 0);
  EXPECT_EQ(observer.failed, 0);
}

// ---- config: where delay is refused, at its file:line:col

std::vector<std::string> errors_of(std::string_view yaml) {
  const policy::LoadResult r = policy::load_config_string(yaml, "t.yaml");
  std::vector<std::string> out;
  for (const config::ConfigError& e : r.errors) out.push_back(e.text());
  return out;
}

TEST(QueueingConfig, DelayIsReadAndWrittenBack) {
  const policy::Config c = config_with_delay();
  ASSERT_EQ(c.routes.size(), 1u);
  EXPECT_EQ(c.routes[0].delay, 2s);
}

TEST(QueueingConfig, DelayOnAWindowLimitIsRefusedWithTheLimitNamed) {
  EXPECT_EQ(errors_of(R"(routes:
  - match: GET /a
    limits: [{capacity: 1, refill_rate: 1/s}, {algorithm: sliding_window, limit: 5, window: 1m}]
    delay: 500ms
)"),
            std::vector<std::string>{
                "t.yaml:4:12: routes[0].delay: needs every limit of the route to be token_bucket "
                "or gcra (a bucket can go into debt to reserve a later turn; a window cannot): "
                "limit \"GET /a#1\" at t.yaml:3:47 is sliding_window"});
}

TEST(QueueingConfig, DelayOnTheRedisStoreOnAShadowRouteOrAboveAnHourIsRefused) {
  EXPECT_EQ(errors_of(R"(store: {backend: redis}
routes:
  - match: GET /a
    limits: [{capacity: 1, refill_rate: 1/s}]
    delay: 1s
)"),
            std::vector<std::string>{
                "t.yaml:5:12: routes[0].delay: the redis store cannot queue requests yet (its "
                "scripts keep no debt): `delay` needs store.backend: memory"});
  EXPECT_EQ(errors_of(R"(routes:
  - match: GET /a
    limits: [{capacity: 1, refill_rate: 1/s}]
    shadow: true
    delay: 1s
)"),
            std::vector<std::string>{
                "t.yaml:5:12: routes[0].delay: a shadow route lets every request through at "
                "once: it cannot hold any (remove `delay` or `shadow`)"});
  EXPECT_EQ(errors_of(R"(default:
  limits: [{capacity: 1, refill_rate: 1/s}]
  delay: 2h
)"),
            std::vector<std::string>{
                "t.yaml:3:10: default.delay: must be at most 1h: a request is held that long at "
                "most"});
}

// A held request's connection is silent until its turn: no longer than any
// connection may be (server.idle_timeout, wherever `server` is in the file).
TEST(QueueingConfig, DelayAboveTheIdleTimeoutIsRefused) {
  EXPECT_EQ(errors_of(R"(routes:
  - match: GET /a
    limits: [{capacity: 1, refill_rate: 1/s}]
    delay: 11s
server: {idle_timeout: 10s}
)"),
            std::vector<std::string>{
                "t.yaml:4:12: routes[0].delay: must be at most server.idle_timeout (10000ms): a "
                "held request keeps its connection silent until its turn, and no connection "
                "stays silent longer (raise server.idle_timeout or lower delay)"});
  EXPECT_EQ(errors_of(R"(default:
  limits: [{capacity: 1, refill_rate: 1/s}]
  delay: 61s
)"),
            std::vector<std::string>{
                "t.yaml:3:10: default.delay: must be at most server.idle_timeout (60000ms): a "
                "held request keeps its connection silent until its turn, and no connection "
                "stays silent longer (raise server.idle_timeout or lower delay)"});
  EXPECT_TRUE(errors_of(R"(routes:
  - match: GET /a
    limits: [{capacity: 1, refill_rate: 1/s}]
    delay: 10s
server: {idle_timeout: 10s}
)")
                  .empty());
}

}  // namespace
}  // namespace sluice
