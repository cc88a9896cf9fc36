// The store conformance table (see store_conformance.h) and the tests that
// run it. Every trace starts from a fresh store; the expected decisions are
// worked out from the algorithms' definitions (src/core), in the memory
// store's exact nanoseconds.
#include "store_conformance.h"

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <optional>
#include <sstream>

namespace sluice::conformance {

namespace {

using namespace std::chrono_literals;
using Us = std::chrono::microseconds;
using Days = std::chrono::days;

// 2024-01-01 12:00:00 UTC, where every trace's clock starts: a second,
// minute and hour boundary (noon: midnight is 12 h on).
constexpr Nanos kStart = std::chrono::seconds(1'704'110'400);

Limit must(Result<Limit> r) {
  if (!r.ok()) {
    std::fprintf(stderr, "store conformance table: %s\n", r.error().message.c_str());
    std::abort();
  }
  return std::move(r).value();
}

Limit token_bucket(uint64_t capacity, uint64_t tokens, Nanos period) {
  return must(Limit::token_bucket(capacity, tokens, period));
}
Limit gcra(uint64_t capacity, uint64_t tokens, Nanos period) {
  return must(Limit::gcra(capacity, tokens, period));
}
Limit fixed_window(uint64_t limit, Nanos window) {
  return must(Limit::fixed_window(limit, window));
}
Limit sliding_log(uint64_t limit, Nanos window) {
  return must(Limit::sliding_log(limit, window));
}
Limit sliding_window(uint64_t limit, Nanos window) {
  return must(Limit::sliding_window(limit, window));
}

Decision allowed(uint64_t limit, uint64_t remaining, Nanos reset_after) {
  return Decision{true, limit, remaining, reset_after, Nanos{0}};
}
Decision denied(uint64_t limit, uint64_t remaining, Nanos reset_after, Nanos retry_after) {
  return Decision{false, limit, remaining, reset_after, retry_after};
}

// One limit of a request: the scenario's limits[limit] on `key`.
struct Charge {
  size_t limit = 0;
  std::string key;
  uint64_t cost = 1;
};

enum class Kind { kAcquire, kAcquireAsync, kReset, kSize, kRefund, kRefundAsync, kDebit };

struct Step {
  Kind kind = Kind::kAcquire;
  Us at{0};  // after kStart (before it when negative)
  // kAcquire, kAcquireAsync: one request, and the decision of each charge,
  // or the error it fails with (the message checked when given).
  std::vector<Charge> charges;
  std::vector<Decision> expect;
  std::optional<ErrorCode> error;
  std::string message;
  // kReset: store.reset(limits[charges[0].limit], charges[0].key) == existed.
  bool existed = false;
  // kSize: store.size() == size.
  size_t size = 0;
  // kRefund, kRefundAsync: store.refund() of each charge, made at `charged_at`;
  // kDebit: the same with RefundRequest::debit (charged, never refused).
  Us charged_at{0};
};

}  // namespace

struct Scenario {
  std::string name;
  std::vector<Limit> limits;
  std::vector<Step> steps;
  // What a store whose fixed windows count per window
  // (StoreRow::counts_per_window) decides instead, where that differs.
  std::vector<Step> per_window_steps{};
  // Its requests charge the keys of several clients at once (quotas in
  // layers): a store that keeps one request on one client's hash slot
  // (StoreRow::one_client_per_request) refuses them.
  bool several_clients = false;
};

namespace {

// A request of several limits at `at`.
Step step(Us at, std::vector<Charge> charges, std::vector<Decision> expect) {
  Step s;
  s.at = at;
  s.charges = std::move(charges);
  s.expect = std::move(expect);
  return s;
}

// A request of the scenario's first limit alone.
Step step(Us at, std::string key, uint64_t cost, Decision expect) {
  return step(at, {{0, std::move(key), cost}}, {expect});
}

Step fails(Us at, std::vector<Charge> charges, ErrorCode code, std::string message = {}) {
  Step s;
  s.at = at;
  s.charges = std::move(charges);
  s.error = code;
  s.message = std::move(message);
  return s;
}

// The same request through acquire_async.
Step async(Step s) {
  s.kind = Kind::kAcquireAsync;
  return s;
}

Step reset(size_t limit, std::string key, bool existed) {
  Step s;
  s.kind = Kind::kReset;
  s.charges = {{limit, std::move(key), 1}};
  s.existed = existed;
  return s;
}

// Gives back the charge of `cost` made at `charged_at` (Store::refund), at `at`.
Step refund(Us at, Us charged_at, std::string key, uint64_t cost = 1, size_t limit = 0) {
  Step s;
  s.kind = Kind::kRefund;
  s.at = at;
  s.charged_at = charged_at;
  s.charges = {{limit, std::move(key), cost}};
  return s;
}

// Charges `cost` more to a request charged at `charged_at` (a settled cost
// above its estimate: RefundRequest::debit), at `at`.
Step debit(Us at, Us charged_at, std::string key, uint64_t cost) {
  Step s = refund(at, charged_at, std::move(key), cost);
  s.kind = Kind::kDebit;
  return s;
}

// The same refund through refund_async.
Step refund_async(Step s) {
  s.kind = Kind::kRefundAsync;
  return s;
}

Limit with_block(Limit limit, Nanos block) {
  LimitSpec spec = limit.spec();
  spec.block = block;
  return must(Limit::create(spec));
}

// `limit` with a lockout that grows: `first`, then `factor` times the last
// block while the key's last block ended less than `forget_after` ago, at
// most `max`.
Limit with_growing_block(Limit limit, Nanos first, uint32_t factor, Nanos max, Nanos forget_after) {
  LimitSpec spec = limit.spec();
  spec.block = first;
  spec.block_factor = factor;
  spec.block_max = max;
  spec.block_forget_after = forget_after;
  return must(Limit::create(spec));
}

Step size_is(size_t size) {
  Step s;
  s.kind = Kind::kSize;
  s.size = size;
  return s;
}

// Three limits on one request, on one key (say: per second, per minute, per
// day), as limits 0, 1 and 2 of a scenario.
std::vector<Limit> three_limits() {
  return {token_bucket(5, 1, 1s), fixed_window(3, 1min), sliding_window(10, Days(1))};
}
std::vector<Charge> three(std::string key, uint64_t cost = 1) {
  return {{0, key, cost}, {1, key, cost}, {2, key, cost}};
}
// A day's sliding window at noon: its count is gone at the end of tomorrow.
constexpr Nanos kDayReset = Days(2) - 12h;

// store.reset() on every algorithm: limit 0 takes 10 at once; `full` is the
// decision of taking all 10, `empty` of one more then.
Scenario reset_scenario(std::string name, Limit limit, Decision full, Decision empty) {
  return {std::move(name),
          {std::move(limit)},
          {step(0s, "a", 10, full), step(0s, "b", 10, full), size_is(2), reset(0, "a", true),
           size_is(1), reset(0, "a", false), step(0s, "a", 10, full), step(0s, "b", 1, empty),
           reset(0, "never seen", false)}};
}

std::vector<Scenario> make_table() {
  std::vector<Scenario> t;

  // ------------------------------------------------------------ token_bucket

  t.push_back({"TokenBucketAllowsItsCapacityAtOnceThenOneTokenPerRefill",
               {token_bucket(5, 1, 1s)},
               {step(0s, "k", 1, allowed(5, 4, 1s)), step(0s, "k", 1, allowed(5, 3, 2s)),
                step(0s, "k", 1, allowed(5, 2, 3s)), step(0s, "k", 1, allowed(5, 1, 4s)),
                step(0s, "k", 1, allowed(5, 0, 5s)), step(0s, "k", 1, denied(5, 0, 5s, 1s)),
                // 1 us early: still denied, 1 us to go; on time: allowed.
                step(999'999us, "k", 1, denied(5, 0, 4'000'001us, 1us)),
                step(1s, "k", 1, allowed(5, 0, 5s))}});

  // 3 tokens per second: one takes 333,333,333.3 ns. The memory store says
  // 333,333,334 ns; a Redis store 333,334 us.
  t.push_back({"TokenBucketReportsDurationsRoundedUpToTheStoresResolution",
               {token_bucket(1, 3, 1s)},
               {step(0s, "k", 1, allowed(1, 0, 333'333'334ns)),
                step(1us, "k", 1, denied(1, 0, 333'332'334ns, 333'332'334ns))}});

  t.push_back(
      {"TokenBucketTimeRunningBackwardsRefillsNothing",
       {token_bucket(2, 1, 1s)},
       {step(10s, "k", 1, allowed(2, 1, 1s)),
        // 5 s back: no refill, and the bucket's clock stays at 10 s.
        step(5s, "k", 1, allowed(2, 0, 2s)), step(10'500ms, "k", 1, denied(2, 0, 1'500ms, 500ms)),
        step(11s, "k", 1, allowed(2, 0, 2s))}});

  // The largest capacity a Redis store counts exactly at 7 per second
  // (2 * capacity * unit + rate < 2^53 in microseconds); a full bucket takes
  // 18 years to refill.
  t.push_back(
      {"TokenBucketOfTheLargestCapacityCountsExactly",
       {token_bucket(4'000'000'000, 7, 1s)},
       {step(0s, "k", 4'000'000'000, allowed(4'000'000'000, 0, 571'428'571'428'571'429ns)),
        step(1us, "k", 1, denied(4'000'000'000, 0, 571'428'571'428'570'429ns, 142'856'143ns)),
        step(142'858us, "k", 1, allowed(4'000'000'000, 0, 571'428'571'428'570'572ns))}});

  // ------------------------------------------------------------ gcra

  t.push_back(
      {"GcraAllowsItsBurstThenOneTokenPerEmissionInterval",
       {gcra(3, 1, 1s)},
       {step(0s, "k", 1, allowed(3, 2, 1s)), step(0s, "k", 1, allowed(3, 1, 2s)),
        step(0s, "k", 1, allowed(3, 0, 3s)), step(0s, "k", 1, denied(3, 0, 3s, 1s)),
        step(1s, "k", 1, allowed(3, 0, 3s)), step(1'500ms, "k", 1, denied(3, 0, 2'500ms, 500ms))}});

  // One token in 3 per second: the arrival time keeps the third of a
  // nanosecond (the memory store) or of a microsecond (Redis) exactly.
  t.push_back({"GcraCountsAThirdOfASecondExactly",
               {gcra(1, 3, 1s)},
               {step(0s, "k", 1, allowed(1, 0, 333'333'334ns)),
                step(333'333us, "k", 1, denied(1, 0, 334ns, 334ns)),
                step(333'334us, "k", 1, allowed(1, 0, 333'333'334ns))}});

  t.push_back({"GcraTimeRunningBackwardsLeavesNothingRatherThanWrapping",
               {gcra(2, 1, 1s)},
               {step(10s, "k", 2, allowed(2, 0, 2s)),
                // The arrival time is 3 s ahead: more debt than a full bucket.
                step(9s, "k", 1, denied(2, 0, 3s, 2s)), step(11s, "k", 1, allowed(2, 0, 2s))}});

  // ------------------------------------------------------------ fixed_window

  // The algorithm's known flaw, kept on purpose: twice the limit across a
  // boundary.
  t.push_back(
      {"FixedWindowCountsInWindowsAlignedToTheEpoch",
       {fixed_window(2, 1s)},
       {step(999ms, "k", 1, allowed(2, 1, 1ms)), step(999ms, "k", 1, allowed(2, 0, 1ms)),
        step(999ms, "k", 1, denied(2, 0, 1ms, 1ms)), step(1'001ms, "k", 1, allowed(2, 1, 999ms)),
        step(1'001ms, "k", 1, allowed(2, 0, 999ms)),
        step(1'001ms, "k", 1, denied(2, 0, 999ms, 999ms))}});

  t.push_back(
      {"FixedWindowTimeRunningBackIntoAnEarlierWindow",
       {fixed_window(10, 1min)},
       {step(30s, "k", 4, allowed(10, 6, 30s)),
        // 11:59:50 is in the window before noon's. With one state per key,
        // noon's keeps counting, and it ends 70 s away.
        step(-10s, "k", 3, allowed(10, 3, 70s)), step(-10s, "k", 4, denied(10, 3, 70s, 70s)),
        step(31s, "k", 3, allowed(10, 0, 29s)), step(31s, "k", 1, denied(10, 0, 29s, 29s))},
       // With a count per window, 11:59:50 counts in its own window, which
       // ends 10 s away, and noon's count is untouched.
       {step(30s, "k", 4, allowed(10, 6, 30s)), step(-10s, "k", 3, allowed(10, 7, 10s)),
        step(-10s, "k", 8, denied(10, 7, 10s, 10s)), step(31s, "k", 6, allowed(10, 0, 29s)),
        step(31s, "k", 1, denied(10, 0, 29s, 29s))}});

  // ------------------------------------------------------------ sliding_log

  t.push_back(
      {"SlidingLogAdmitsItsLimitThenWaitsForTheOldestToLeave",
       {sliding_log(10, 1s)},
       {step(0s, "k", 3, allowed(10, 7, 1s)), step(0s, "k", 2, allowed(10, 5, 1s)),
        step(5us, "k", 4, allowed(10, 1, 1s)),
        // Room for 2 once the 5 taken at 0 leave, 1 s after them.
        step(10us, "k", 2, denied(10, 1, 999'995us, 999'990us)),
        step(999'999us, "k", 2, denied(10, 1, 6us, 1us)), step(1s, "k", 2, allowed(10, 4, 1s))}});

  t.push_back(
      {"SlidingLogTimeRunningBackJoinsTheNewestEntry",
       {sliding_log(3, 10s)},
       {step(5s, "k", 1, allowed(3, 2, 10s)),
        // Back to 2 s and 1 s: each joins the entry at 5 s, which
        // leaves at 15 s.
        step(2s, "k", 1, allowed(3, 1, 13s)), step(1s, "k", 1, allowed(3, 0, 14s)),
        step(1s, "k", 1, denied(3, 0, 14s, 14s)), step(12s, "k", 1, denied(3, 0, 3s, 3s)),
        step(15s - 1us, "k", 1, denied(3, 0, 1us, 1us)), step(15s, "k", 3, allowed(3, 0, 10s))}});

  // ------------------------------------------------------------ sliding_window

  t.push_back(
      {"SlidingWindowWeighsThePreviousWindowByWhatIsLeftOfIt",
       {sliding_window(10, 1min)},
       {step(-30s, "k", 6, allowed(10, 4, 90s)),
        // At 12:00:30 the 6 of the minute before weigh 6 * 30/60 = 3.
        step(30s, "k", 1, allowed(10, 6, 90s)), step(30s, "k", 6, allowed(10, 0, 90s)),
        // 3 + 8 > 10; at 12:00:40 the 6 weigh 2, and 2 + 8 fits.
        step(30s, "k", 1, denied(10, 0, 90s, 10s)), step(40s, "k", 1, allowed(10, 0, 80s))}});

  t.push_back({"SlidingWindowTimeRunningBackIntoAnEarlierWindowKeepsCountingInTheLaterOne",
               {sliding_window(10, 1min)},
               {step(-30s, "k", 6, allowed(10, 4, 90s)), step(30s, "k", 1, allowed(10, 6, 90s)),
                // Back at 11:59:30: still noon's window, where no time has
                // passed, so the 6 weigh in full: 6 + 2 -> 2 left.
                step(-30s, "k", 1, allowed(10, 2, 150s)),
                // 6 + 2 + 3 > 10. At 12:00:10 the 6 weigh 5: 5 + 2 + 3 fits.
                step(-30s, "k", 3, denied(10, 2, 150s, 40s)),
                step(10s - 1us, "k", 3, denied(10, 2, 110s + 1us, 1us)),
                step(10s, "k", 3, allowed(10, 0, 110s))}});

  // Only the previous window's count keeps the request out, and the formula
  // for a time in the next window would go below its start: both stores
  // answer "at the next window's start".
  t.push_back({"SlidingWindowAdmitsAtTheNextWindowsStartWhenOnlyThePreviousCountKeepsItOut",
               {sliding_window(1'000'000, 100us)},
               {step(0us, "k", 1'000'000, allowed(1'000'000, 0, 200us)),
                step(199us, "k", 1, allowed(1'000'000, 989'999, 101us)),
                step(199us, "k", 999'990, denied(1'000'000, 989'999, 101us, 1us))}});

  // A million per day in microseconds: the products of the estimate pass
  // 2^53, which a Redis store's Lua forms in two halves.
  t.push_back({"SlidingWindowCountsExactlyWhereItsProductsPassTwoToThe53",
               {sliding_window(1'000'000, Days(1))},
               {step(12h, "k", 999'999, allowed(1'000'000, 1, Days(2))),
                step(12h + Days(2) - 1us, "k", 1, allowed(1'000'000, 999'998, Days(1) + 1us)),
                step(12h + Days(2) - 1us, "k", 3, allowed(1'000'000, 999'995, Days(1) + 1us))}});

  // ------------------------------------------------------------ keys and limits

  t.push_back(
      {"KeysAreIndependent",
       {token_bucket(3, 1, 1min)},
       {step(0s, "alice", 1, allowed(3, 2, 1min)), step(0s, "alice", 1, allowed(3, 1, 2min)),
        step(0s, "alice", 1, allowed(3, 0, 3min)), step(0s, "alice", 1, denied(3, 0, 3min, 1min)),
        step(0s, "bob", 1, allowed(3, 2, 1min))}});

  t.push_back({"LimitsWithDifferentDefinitionsKeepSeparateStates",
               {token_bucket(3, 1, 1s), token_bucket(3, 1, 1min)},
               {step(0s, "k", 1, allowed(3, 2, 1s)), step(0s, "k", 1, allowed(3, 1, 2s)),
                step(0s, "k", 1, allowed(3, 0, 3s)), step(0s, {{1, "k"}}, {allowed(3, 2, 1min)})}});

  // ------------------------------------------------------------ all or nothing

  t.push_back({"SeveralLimitsOfOneRequestAreChargedTogether",
               three_limits(),
               {step(30s, three("k"),
                     {allowed(5, 4, 1s), allowed(3, 2, 30s), allowed(10, 9, kDayReset - 30s)})}});

  // The minute limit denies the fourth; the others would allow and say so,
  // charging nothing: alone, each still has what it had.
  t.push_back(
      {"WhenOneLimitDeniesNoneIsCharged",
       three_limits(),
       {step(0s, three("k"), {allowed(5, 4, 1s), allowed(3, 2, 1min), allowed(10, 9, kDayReset)}),
        step(0s, three("k"), {allowed(5, 3, 2s), allowed(3, 1, 1min), allowed(10, 8, kDayReset)}),
        step(0s, three("k"), {allowed(5, 2, 3s), allowed(3, 0, 1min), allowed(10, 7, kDayReset)}),
        step(0s, three("k"),
             {allowed(5, 1, 4s), denied(3, 0, 1min, 1min), allowed(10, 6, kDayReset)}),
        step(0s, {{0, "k"}}, {allowed(5, 1, 4s)}),
        step(0s, {{2, "k"}}, {allowed(10, 6, kDayReset)})}});

  t.push_back({"ADenialByTheFirstLimitChargesNoneOfTheOthers",
               three_limits(),
               {step(0s, "k", 5, allowed(5, 0, 5s)),
                step(0s, three("k"),
                     {denied(5, 0, 5s, 1s), allowed(3, 2, 1min), allowed(10, 9, kDayReset)}),
                step(0s, three("k"),
                     {denied(5, 0, 5s, 1s), allowed(3, 2, 1min), allowed(10, 9, kDayReset)}),
                step(0s, three("k"),
                     {denied(5, 0, 5s, 1s), allowed(3, 2, 1min), allowed(10, 9, kDayReset)}),
                step(0s, {{1, "k"}}, {allowed(3, 2, 1min)}),
                step(0s, {{2, "k"}}, {allowed(10, 9, kDayReset)})}});

  // The same limit on two keys of one client (say: two routes). The keys
  // share their client part, after the '|', as a Redis Cluster needs.
  t.push_back({"OneLimitOnTwoKeysIsAllOrNothingToo",
               {token_bucket(2, 1, 1min)},
               {step(0s, "route:b|user:1", 2, allowed(2, 0, 2min)),
                step(0s, {{0, "route:a|user:1"}, {0, "route:b|user:1"}},
                     {allowed(2, 1, 1min), denied(2, 0, 2min, 1min)}),
                step(0s, "route:a|user:1", 1, allowed(2, 1, 1min))}});

  // Every algorithm in one request: the sliding log's 3 deny the fourth.
  {
    const std::vector<Charge> all = {{0, "k"}, {1, "k"}, {2, "k"}, {3, "k"}, {4, "k"}};
    std::vector<Step> steps;
    for (uint64_t i = 1; i <= 3; ++i) {
      steps.push_back(step(0s, all,
                           {allowed(5, 5 - i, i * 1s), allowed(5, 5 - i, i * 1s),
                            allowed(5, 5 - i, 1s), allowed(3, 3 - i, 1s), allowed(5, 5 - i, 2s)}));
    }
    steps.push_back(step(0s, all,
                         {allowed(5, 1, 4s), allowed(5, 1, 4s), allowed(5, 1, 1s),
                          denied(3, 0, 1s, 1s), allowed(5, 1, 2s)}));
    steps.push_back(step(0s, {{0, "k"}}, {allowed(5, 1, 4s)}));
    steps.push_back(step(0s, {{1, "k"}}, {allowed(5, 1, 4s)}));
    steps.push_back(step(0s, {{2, "k"}}, {allowed(5, 1, 1s)}));
    steps.push_back(step(0s, {{4, "k"}}, {allowed(5, 1, 2s)}));
    t.push_back({"EveryAlgorithmInOneRequestIsAllOrNothing",
                 {token_bucket(5, 1, 1s), gcra(5, 1, 1s), fixed_window(5, 1s), sliding_log(3, 1s),
                  sliding_window(5, 1s)},
                 std::move(steps)});
  }

  t.push_back({"ADeniedRequestStoresNothingForTheLimitsItWouldHaveCharged",
               three_limits(),
               {step(0s, {{1, "k", 3}}, {allowed(3, 0, 1min)}), size_is(1),
                step(0s, three("k"),
                     {allowed(5, 4, 1s), denied(3, 0, 1min, 1min), allowed(10, 9, kDayReset)}),
                size_is(1)}});

  // ------------------------------------------------------------ errors

  t.push_back({"TheSameLimitAndKeyTwiceInOneRequestIsAnErrorAndChargesNothing",
               {token_bucket(5, 1, 1s), fixed_window(5, 1s)},
               {fails(0s, {{0, "k"}, {1, "k"}, {0, "k"}}, ErrorCode::kInvalidArgument,
                      "acquire: the same limit is applied twice to key 'k' in one request"),
                step(0s, "k", 1, allowed(5, 4, 1s)), step(0s, {{1, "k"}}, {allowed(5, 4, 1s)})}});

  t.push_back({"CostZeroIsAnInvalidArgumentAndChargesNothing",
               three_limits(),
               {fails(0s, three("k", 0), ErrorCode::kInvalidArgument), size_is(0)}});

  // 4 fits the burst (5) and the day (10) but never the minute (3).
  t.push_back({"CostAboveALimitsSizeIsAnErrorAndChargesNothing",
               three_limits(),
               {fails(0s, three("k", 4), ErrorCode::kCostExceedsLimit), size_is(0),
                step(0s, "k", 1, allowed(5, 4, 1s))}});

  // ------------------------------------------------------------ reset

  t.push_back(reset_scenario("TokenBucketResetForgetsOneKeyUnderOneLimit", token_bucket(10, 1, 1s),
                             allowed(10, 0, 10s), denied(10, 0, 10s, 1s)));
  t.push_back(reset_scenario("GcraResetForgetsOneKeyUnderOneLimit", gcra(10, 1, 1s),
                             allowed(10, 0, 10s), denied(10, 0, 10s, 1s)));
  t.push_back(reset_scenario("FixedWindowResetForgetsOneKeyUnderOneLimit", fixed_window(10, 1s),
                             allowed(10, 0, 1s), denied(10, 0, 1s, 1s)));
  t.push_back(reset_scenario("SlidingLogResetForgetsOneKeyUnderOneLimit", sliding_log(10, 1s),
                             allowed(10, 0, 1s), denied(10, 0, 1s, 1s)));
  // One more waits for the next window, where the 10 weigh 9 after 0.1 s.
  t.push_back(reset_scenario("SlidingWindowResetForgetsOneKeyUnderOneLimit", sliding_window(10, 1s),
                             allowed(10, 0, 2s), denied(10, 0, 2s, 1'100ms)));

  // ------------------------------------------------------------ acquire_async

  t.push_back(
      {"AsyncAcquireDecidesLikeAcquire",
       three_limits(),
       {async(step(0s, three("k"),
                   {allowed(5, 4, 1s), allowed(3, 2, 1min), allowed(10, 9, kDayReset)})),
        async(step(0s, three("k"),
                   {allowed(5, 3, 2s), allowed(3, 1, 1min), allowed(10, 8, kDayReset)})),
        async(step(0s, three("k"),
                   {allowed(5, 2, 3s), allowed(3, 0, 1min), allowed(10, 7, kDayReset)})),
        async(step(0s, three("k"),
                   {allowed(5, 1, 4s), denied(3, 0, 1min, 1min), allowed(10, 6, kDayReset)})),
        step(0s, "k", 1, allowed(5, 1, 4s))}});

  t.push_back({"AsyncAcquireReportsErrorsAndChargesNothing",
               three_limits(),
               {async(fails(0s, three("k", 4), ErrorCode::kCostExceedsLimit)),
                async(fails(0s, three("k", 0), ErrorCode::kInvalidArgument)),
                step(0s, "k", 1, allowed(5, 4, 1s))}});

  // ------------------------------------------------------------ refunds
  // A refund (count_status: the upstream's status did not count) makes the
  // state what it would be had the charge never been made.

  t.push_back({"TokenBucketRefundGivesTheTokensBackUpToFull",
               {token_bucket(3, 1, 1s)},
               {step(0s, "k", 1, allowed(3, 2, 1s)), step(0s, "k", 1, allowed(3, 1, 2s)),
                refund(0s, 0s, "k"), step(0s, "k", 1, allowed(3, 1, 2s)),
                step(0s, "k", 1, allowed(3, 0, 3s)), step(0s, "k", 1, denied(3, 0, 3s, 1s)),
                // 0.5 tokens refilled, 2 given back: 2.5.
                refund(500ms, 0s, "k", 2), step(500ms, "k", 1, allowed(3, 1, 1'500ms)),
                // Full again by 10 s: nothing to give back.
                refund(10s, 0s, "k"), step(10s, "k", 1, allowed(3, 2, 1s)),
                refund(0s, 0s, "never seen"), step(0s, "never seen", 1, allowed(3, 2, 1s))}});

  t.push_back({"GcraRefundGivesTheTokensBackUpToFull",
               {gcra(3, 1, 1s)},
               {step(0s, "k", 1, allowed(3, 2, 1s)), step(0s, "k", 1, allowed(3, 1, 2s)),
                refund_async(refund(0s, 0s, "k")), step(0s, "k", 1, allowed(3, 1, 2s)),
                step(0s, "k", 1, allowed(3, 0, 3s)), step(0s, "k", 1, denied(3, 0, 3s, 1s)),
                refund(500ms, 0s, "k", 2), step(500ms, "k", 1, allowed(3, 1, 1'500ms)),
                refund(10s, 0s, "k"), step(10s, "k", 1, allowed(3, 2, 1s))}});

  t.push_back(
      {"FixedWindowRefundCountsOnlyInTheWindowCharged",
       {fixed_window(2, 1s)},
       {step(0s, "k", 1, allowed(2, 1, 1s)), step(100ms, "k", 1, allowed(2, 0, 900ms)),
        step(200ms, "k", 1, denied(2, 0, 800ms, 800ms)), refund(300ms, 100ms, "k"),
        step(300ms, "k", 1, allowed(2, 0, 700ms)), step(1'100ms, "k", 1, allowed(2, 1, 900ms)),
        // Charged in the window before: it counts no more.
        refund_async(refund(1'200ms, 0s, "k")), step(1'200ms, "k", 1, allowed(2, 0, 800ms))}});

  t.push_back({"SlidingWindowRefundTakesFromTheCountItWentTo",
               {sliding_window(4, 1s)},
               {step(0s, "k", 3, allowed(4, 1, 2s)),
                // The previous window's 3 weigh 1.5 at mid-window (2 taken).
                step(1'500ms, "k", 1, allowed(4, 1, 1'500ms)),
                // Two of the previous window's 3 given back: 1 weighs 0.5.
                refund(1'500ms, 0s, "k", 2), step(1'500ms, "k", 1, allowed(4, 1, 1'500ms)),
                // One of this window's 2 given back.
                refund(1'600ms, 1'500ms, "k"), step(1'600ms, "k", 1, allowed(4, 1, 1'400ms))}});

  t.push_back({"SlidingLogRefundRemovesTheEntry",
               {sliding_log(2, 1s)},
               {step(0s, "k", 1, allowed(2, 1, 1s)), step(100ms, "k", 1, allowed(2, 0, 1s)),
                step(200ms, "k", 1, denied(2, 0, 900ms, 800ms)), refund(300ms, 0s, "k"),
                step(300ms, "k", 1, allowed(2, 0, 1s)),
                // The entry at 100 ms now leaves first.
                step(400ms, "k", 1, denied(2, 0, 900ms, 700ms)),
                // Out of the window already: nothing to give back.
                refund(1'150ms, 100ms, "k"), step(1'150ms, "k", 1, allowed(2, 0, 1s))}});

  // ------------------------------------------------------------ debits
  // A cost settled above its estimate is charged whatever is left: the state
  // goes into debt, and later requests wait for the debt and their own cost.

  t.push_back({"TokenBucketDebitGoesIntoDebtThatLaterRequestsWaitFor",
               {token_bucket(10, 10, 1s)},
               {step(0s, "k", 5, allowed(10, 5, 500ms)),
                // 5 - 12: 7 tokens of debt.
                debit(0s, 0s, "k", 12), step(0s, "k", 1, denied(10, 0, 1'700ms, 800ms)),
                step(799'999us, "k", 1, denied(10, 0, 900'001us, 1us)),
                step(800ms, "k", 1, allowed(10, 0, 1s)),
                // A key never seen starts full: 10 - 15.
                debit(0s, 0s, "new", 15), step(0s, "new", 1, denied(10, 0, 1'500ms, 600ms))}});

  t.push_back({"GcraDebitGoesIntoDebtThatLaterRequestsWaitFor",
               {gcra(10, 10, 1s)},
               {step(0s, "k", 5, allowed(10, 5, 500ms)), debit(0s, 0s, "k", 12),
                step(0s, "k", 1, denied(10, 0, 1'700ms, 800ms)),
                step(799'999us, "k", 1, denied(10, 0, 900'001us, 1us)),
                step(800ms, "k", 1, allowed(10, 0, 1s)), debit(0s, 0s, "new", 15),
                step(0s, "new", 1, denied(10, 0, 1'500ms, 600ms))}});

  t.push_back({"FixedWindowDebitCountsInTheWindowChargedWhileItCounts",
               {fixed_window(10, 1min)},
               {step(0s, "k", 5, allowed(10, 5, 1min)),
                // 5 + 7: past the limit until the window ends.
                debit(1s, 0s, "k", 7), step(2s, "k", 1, denied(10, 0, 58s, 58s)),
                step(1min, "k", 1, allowed(10, 9, 1min)),
                // Charged in the window before: it counts no more.
                debit(61s, 0s, "k", 100), step(61s, "k", 1, allowed(10, 8, 59s))}});

  // ------------------------------------------------------------ block
  // Once a limit with a lockout denies, its key is denied for the whole
  // block from then, whatever refills meanwhile; other keys are untouched.

  t.push_back(
      {"FixedWindowBlockDeniesForTheWholeBlock",
       {with_block(fixed_window(2, 1s), 5s)},
       {step(0s, "k", 1, allowed(2, 1, 1s)), step(100ms, "k", 1, allowed(2, 0, 900ms)),
        step(200ms, "k", 1, denied(2, 0, 5s, 5s)), step(300ms, "other", 1, allowed(2, 1, 700ms)),
        // A new window: still blocked.
        step(1'500ms, "k", 1, denied(2, 0, 3'700ms, 3'700ms)),
        step(5'199'999us, "k", 1, denied(2, 0, 1us, 1us)),
        step(5'200ms, "k", 1, allowed(2, 1, 800ms))}});

  t.push_back({"TokenBucketBlockEndsOnAFullBucket",
               {with_block(token_bucket(1, 1, 1s), 10s)},
               {step(0s, "k", 1, allowed(1, 0, 1s)), step(500ms, "k", 1, denied(1, 0, 10s, 10s)),
                step(10'400ms, "k", 1, denied(1, 0, 100ms, 100ms)),
                step(10'500ms, "k", 1, allowed(1, 0, 1s))}});

  t.push_back({"GcraBlock",
               {with_block(gcra(1, 1, 1s), 3s)},
               {step(0s, "k", 1, allowed(1, 0, 1s)), step(100ms, "k", 1, denied(1, 0, 3s, 3s)),
                step(3'100ms, "k", 1, allowed(1, 0, 1s))}});

  t.push_back({"SlidingWindowBlock",
               {with_block(sliding_window(1, 1s), 3s)},
               {step(0s, "k", 1, allowed(1, 0, 2s)), step(100ms, "k", 1, denied(1, 0, 3s, 3s)),
                step(3'100ms, "k", 1, allowed(1, 0, 1'900ms))}});

  t.push_back({"SlidingLogBlock",
               {with_block(sliding_log(1, 1s), 2s)},
               {step(0s, "k", 1, allowed(1, 0, 1s)), step(100ms, "k", 1, denied(1, 0, 2s, 2s)),
                step(1'900ms, "k", 1, denied(1, 0, 200ms, 200ms)),
                step(2'100ms, "k", 1, allowed(1, 0, 1s))}});

  // The limit with the lockout denies alone; the other limit of the
  // request is not charged, and is not blocked.
  t.push_back(
      {"BlockInARequestOfSeveralLimits",
       {with_block(fixed_window(1, 1s), 5s), token_bucket(10, 10, 1s)},
       {step(0s, {{0, "k"}, {1, "k"}}, {allowed(1, 0, 1s), allowed(10, 9, 100ms)}),
        step(100ms, {{0, "k"}, {1, "k"}}, {denied(1, 0, 5s, 5s), allowed(10, 9, 100ms)}),
        async(step(200ms, {{0, "k"}, {1, "k"}},
                   {denied(1, 0, 4'900ms, 4'900ms), allowed(10, 9, 100ms)})),
        step(5'100ms, {{0, "k"}, {1, "k"}}, {allowed(1, 0, 900ms), allowed(10, 9, 100ms)})}});

  t.push_back({"ResetLiftsABlock",
               {with_block(fixed_window(1, 1s), 5s)},
               {step(0s, "k", 1, allowed(1, 0, 1s)), step(100ms, "k", 1, denied(1, 0, 5s, 5s)),
                reset(0, "k", true), step(200ms, "k", 1, allowed(1, 0, 800ms))}});

  t.push_back({"RefundLeavesABlockInForce",
               {with_block(fixed_window(1, 1s), 5s)},
               {step(0s, "k", 1, allowed(1, 0, 1s)), step(100ms, "k", 1, denied(1, 0, 5s, 5s)),
                refund(200ms, 0s, "k"), step(300ms, "k", 1, denied(1, 0, 4'800ms, 4'800ms))}});

  // ------------------------------------------------------------ blocks that grow
  // Each block that starts within forget_after (10m) of the end of the key's
  // last one lasts twice that one, at most 4m: 1m, 2m, 4m, 4m. A bucket that
  // refills one token a day stays empty, so each request after a block
  // ends is denied again and starts the next one at once.
  t.push_back(
      {"GrowingBlockDoublesUpToMaxAndIsForgottenAfterForgetAfter",
       {with_growing_block(token_bucket(1, 1, Days(1)), 1min, 2, 4min, 10min)},
       {step(0s, "k", 1, allowed(1, 0, Days(1))),
        // The first denial: the first block, 1m (ends at 61s).
        step(1s, "k", 1, denied(1, 0, 1min, 1min)), step(30s, "k", 1, denied(1, 0, 31s, 31s)),
        // Denied again as it ends: 2m (ends at 181s), then 4m (ends at 421s),
        // then 8m capped at 4m (ends at 661s).
        step(61s, "k", 1, denied(1, 0, 2min, 2min)), step(181s, "k", 1, denied(1, 0, 4min, 4min)),
        step(421s, "k", 1, denied(1, 0, 4min, 4min)),
        // Another key has its own history.
        step(422s, "other", 1, allowed(1, 0, Days(1))),
        step(423s, "other", 1, denied(1, 0, 1min, 1min)),
        // 10m after the last block ended the history is forgotten: 1m again.
        step(1'261s, "k", 1, denied(1, 0, 1min, 1min))}});

  t.push_back(
      {"GrowingBlockGrowsUntilTheLastMicrosecondBeforeForgetAfter",
       {with_growing_block(token_bucket(1, 1, Days(1)), 1min, 3, 1h, 10min)},
       {step(0s, "k", 1, allowed(1, 0, Days(1))), step(0s, "k", 1, denied(1, 0, 1min, 1min)),
        // Ended at 60s: at 660s - 1us it still counts; 3 x 1m.
        step(Us(659'999'999), "k", 1, denied(1, 0, 3min, 3min)),
        // Ends at 839.999999s; 9m then.
        step(Us(839'999'999), "k", 1, denied(1, 0, 9min, 9min))}});

  t.push_back(
      {"ResetForgetsTheHistoryOfAGrowingBlock",
       {with_growing_block(token_bucket(1, 1, Days(1)), 1min, 2, 1h, 1h)},
       {step(0s, "k", 1, allowed(1, 0, Days(1))), step(1s, "k", 1, denied(1, 0, 1min, 1min)),
        step(61s, "k", 1, denied(1, 0, 2min, 2min)), reset(0, "k", true),
        // A full bucket, and the next block is the first again.
        step(62s, "k", 1, allowed(1, 0, Days(1))), step(63s, "k", 1, denied(1, 0, 1min, 1min))}});

  // ------------------------------------------------------------ quotas in layers
  // One request, each limit on its own client's key (a user's 2 and their
  // org's 3), all-or-nothing: a denial by one charges nothing to the other.
  {
    const std::string alice = "route:r#0|h:x-user=alice";
    const std::string bob = "route:r#0|h:x-user=bob";
    const std::string acme = "route:r#1|h:x-org=acme";
    const std::string other = "route:r#1|h:x-org=other";
    t.push_back(
        {"LayeredKeysAreAllOrNothing",
         {token_bucket(2, 1, Days(1)), token_bucket(3, 1, Days(1))},
         {step(0s, {{0, alice}, {1, acme}}, {allowed(2, 1, Days(1)), allowed(3, 2, Days(1))}),
          step(0s, {{0, alice}, {1, acme}}, {allowed(2, 0, Days(2)), allowed(3, 1, Days(2))}),
          // Alice's own limit denies: the org's would allow, and is not charged.
          step(0s, {{0, alice}, {1, acme}},
               {denied(2, 0, Days(2), Days(1)), allowed(3, 0, Days(3))}),
          // So Bob gets the org's last one...
          step(0s, {{0, bob}, {1, acme}}, {allowed(2, 1, Days(1)), allowed(3, 0, Days(3))}),
          // ...and then the org denies: Bob's own is not charged...
          step(0s, {{0, bob}, {1, acme}}, {allowed(2, 0, Days(2)), denied(3, 0, Days(3), Days(1))}),
          // ...as his request under another org shows: he still has one.
          step(0s, {{0, bob}, {1, other}}, {allowed(2, 0, Days(2)), allowed(3, 2, Days(1))}),
          step(0s, {{0, bob}, {1, other}},
               {denied(2, 0, Days(2), Days(1)), allowed(3, 1, Days(2))})},
         {},
         true});
  }

  return t;
}

// A decision in one line, for failure messages.
std::string text(const Decision& d) {
  std::ostringstream os;
  os << (d.allowed ? "allowed" : "denied") << " limit=" << d.limit << " remaining=" << d.remaining
     << " reset_after=" << d.reset_after.count() << "ns retry_after=" << d.retry_after.count()
     << "ns";
  return os.str();
}

// `d` as a store of `resolution` reports it: durations rounded up.
Decision at_resolution(Decision d, Nanos resolution) {
  const auto up = [r = resolution.count()](Nanos n) { return Nanos{(n.count() + r - 1) / r * r}; };
  d.reset_after = up(d.reset_after);
  d.retry_after = up(d.retry_after);
  return d;
}

constexpr auto kAsyncBound = 30s;

}  // namespace

void PrintTo(const Scenario* scenario, std::ostream* os) {
  *os << scenario->name;
}

std::string name_of(const Scenario* scenario) {
  return scenario->name;
}

const std::vector<const Scenario*>& scenarios() {
  static const std::vector<Scenario> table = make_table();
  static const std::vector<const Scenario*> pointers = [] {
    std::vector<const Scenario*> p;
    for (const Scenario& s : table) p.push_back(&s);
    return p;
  }();
  return pointers;
}

void StoreTable::SetUp() {
  store_ = std::get<0>(GetParam()).make();
  if (IsSkipped() || HasFatalFailure()) return;
  ASSERT_NE(store_, nullptr) << "the store did not start";
}

TEST_P(StoreTable, DecidesAsTheTableSays) {
  const StoreRow& row = std::get<0>(GetParam());
  const Scenario& scenario = *std::get<1>(GetParam());
  if (scenario.several_clients && row.one_client_per_request) {
    GTEST_SKIP() << row.name << " keeps a request on one client's hash slot; the config loader "
                 << "refuses limits keyed apart from their route there";
  }
  // Each acquire_async's count of calls to `done`, checked at the end.
  std::vector<std::shared_ptr<std::atomic<int>>> callbacks;
  const std::vector<Step>& steps = row.counts_per_window && !scenario.per_window_steps.empty()
                                       ? scenario.per_window_steps
                                       : scenario.steps;
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    SCOPED_TRACE("step " + std::to_string(i) + " at " + std::to_string(s.at.count()) + " us");
    if (s.kind == Kind::kReset) {
      const Charge& c = s.charges.front();
      const Result<bool> existed = store_->reset(scenario.limits[c.limit], c.key);
      ASSERT_TRUE(existed.ok()) << existed.error().message;
      EXPECT_EQ(*existed, s.existed) << "reset of '" << c.key << "'";
      continue;
    }
    if (s.kind == Kind::kSize) {
      EXPECT_EQ(store_->size(), s.size);
      continue;
    }
    if (s.kind == Kind::kRefund || s.kind == Kind::kRefundAsync || s.kind == Kind::kDebit) {
      std::vector<RefundRequest> refunds;
      for (const Charge& c : s.charges)
        refunds.push_back({&scenario.limits[c.limit], c.key, c.cost, kStart + s.charged_at,
                           s.kind == Kind::kDebit});
      Status status;
      if (s.kind != Kind::kRefundAsync) {
        status = store_->refund(refunds, kStart + s.at);
      } else {
        auto done = std::make_shared<std::promise<Status>>();
        std::future<Status> result = done->get_future();
        store_->refund_async(refunds, kStart + s.at,
                             [done](Status st) { done->set_value(std::move(st)); });
        ASSERT_EQ(result.wait_for(kAsyncBound), std::future_status::ready)
            << "refund_async did not call back within " << kAsyncBound.count() << " s";
        status = result.get();
      }
      ASSERT_TRUE(status.ok()) << status.error().message;
      continue;
    }
    std::vector<AcquireRequest> requests;
    for (const Charge& c : s.charges)
      requests.push_back({&scenario.limits[c.limit], c.key, c.cost});
    // Kept alive by the callback too, should a store call it after the bound.
    auto out = std::make_shared<std::vector<Decision>>(requests.size());
    const Nanos now = kStart + s.at;
    Status status;
    if (s.kind == Kind::kAcquire) {
      status = store_->acquire(requests, now, *out);
    } else {
      auto calls = std::make_shared<std::atomic<int>>(0);
      callbacks.push_back(calls);
      auto done = std::make_shared<std::promise<Status>>();
      std::future<Status> result = done->get_future();
      store_->acquire_async(requests, now, *out, [calls, done, out](Status st) {
        if (calls->fetch_add(1) == 0) done->set_value(std::move(st));
      });
      ASSERT_EQ(result.wait_for(kAsyncBound), std::future_status::ready)
          << "acquire_async did not call back within " << kAsyncBound.count() << " s";
      status = result.get();
    }
    if (s.error) {
      ASSERT_FALSE(status.ok()) << "expected an error";
      EXPECT_EQ(status.error().code, *s.error) << status.error().message;
      if (!s.message.empty()) {
        EXPECT_EQ(status.error().message, s.message);
      }
      continue;
    }
    ASSERT_TRUE(status.ok()) << status.error().message;
    for (size_t j = 0; j < s.expect.size(); ++j) {
      EXPECT_EQ(text((*out)[j]), text(at_resolution(s.expect[j], row.resolution)))
          << "limit " << j << ": " << scenario.limits[s.charges[j].limit].describe() << " on '"
          << s.charges[j].key << "'";
      // What a refund of this charge would name it by.
      EXPECT_EQ((*out)[j].decided_at, now) << "limit " << j;
    }
  }
  for (const auto& calls : callbacks) EXPECT_EQ(calls->load(), 1) << "done called more than once";
}

void StoreConformance::SetUp() {
  store_ = GetParam().make();
  if (IsSkipped() || HasFatalFailure()) return;
  ASSERT_NE(store_, nullptr) << "the store did not start";
}

TEST_P(StoreConformance, MalformedRequestsAreInvalidArgumentsAndStoreNothing) {
  const Limit limit = token_bucket(5, 1, 1s);
  const AcquireRequest one{&limit, "k"};
  std::array<Decision, 2> two;
  Status s = store_->acquire({&one, 1}, kStart, two);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.error().message, "acquire: one output decision per request needed");
  const AcquireRequest null_limit{nullptr, "k"};
  Decision out;
  s = store_->acquire({&null_limit, 1}, kStart, {&out, 1});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.error().message, "acquire: null limit");
  EXPECT_EQ(store_->size(), 0u);
}

}  // namespace sluice::conformance
