// DecisionHistory: exact per-second counts per route and result, seconds
// that roll over while several threads record, and rings that live as long
// as a route of a config in force.
#include "observe/decision_history.h"

#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "observe/metrics.h"
#include "observe/route_metrics.h"
#include "observe/top_keys.h"
#include "policy/decider.h"
#include "policy/policy.h"

namespace sluice::observe {
namespace {

using Counts = std::vector<uint64_t>;
using R = HistoryResult;
constexpr int64_t kT = 1'700'000'000;

TEST(RouteHistory, CountsEachSecondAndResultApart) {
  RouteHistory h;
  h.record(kT, R::kAllowed);
  h.record(kT, R::kAllowed);
  h.record(kT, R::kDenied);
  h.record(kT + 2, R::kError);
  h.record(kT + 3, R::kAllowed);  // the second not over yet at end kT + 3
  EXPECT_EQ(h.read(kT + 3, 4, R::kAllowed), (Counts{0, 2, 0, 0}));
  EXPECT_EQ(h.read(kT + 3, 4, R::kDenied), (Counts{0, 1, 0, 0}));
  EXPECT_EQ(h.read(kT + 3, 4, R::kError), (Counts{0, 0, 0, 1}));
  EXPECT_EQ(h.read(kT + 4, 1, R::kAllowed), (Counts{1}));
}

TEST(RouteHistory, RecordsAtTheSecondOfItsNanoseconds) {
  RouteHistory h;
  h.record_at(std::chrono::seconds(kT) + std::chrono::nanoseconds(999'999'999), R::kDenied);
  h.record_at(std::chrono::seconds(kT + 1), R::kDenied);
  EXPECT_EQ(h.read(kT + 2, 2, R::kDenied), (Counts{1, 1}));
}

TEST(RouteHistory, KeepsTheLast900SecondsAndForgetsOlderOnes) {
  RouteHistory h;
  for (int64_t s = kT; s < kT + 1000; ++s) h.record(s, R::kAllowed);
  const Counts all = h.read(kT + 1000, RouteHistory::kSeconds, R::kAllowed);
  EXPECT_EQ(all, Counts(RouteHistory::kSeconds, 1));
  // Seconds whose slot has moved on read as none, not as the later count.
  h.record(kT + 1000, R::kAllowed);
  h.record(kT + 1000, R::kAllowed);
  EXPECT_EQ(h.read(kT + 1001, 2, R::kAllowed), (Counts{1, 2}));
  // Nothing was recorded for the last 900 seconds before kT + 3000.
  EXPECT_EQ(h.read(kT + 3000, RouteHistory::kSeconds, R::kAllowed),
            Counts(RouteHistory::kSeconds, 0));
}

// A decision that comes in after its slot moved on to a later second (its
// thread stalled a whole turn of the ring) is dropped: it must not wipe
// the later second.
TEST(RouteHistory, ALateDecisionDoesNotWipeTheSecondThatReusedItsSlot) {
  RouteHistory h;
  const int64_t later = kT + 901;  // the same slot as kT
  h.record(later, R::kDenied);
  h.record(kT, R::kDenied);
  EXPECT_EQ(h.read(later + 1, 1, R::kDenied), (Counts{1}));
}

// Threads record across the turn of a slot at once: some still in second
// kT, which the slot held, others already in kT + 901, which reuses it.
// Every decision of kT + 901 is counted and none of kT carries over.
TEST(RouteHistory, ASlotMovingOnWhileThreadsRecordLosesAndCarriesNothing) {
  constexpr int kThreads = 4;
  constexpr int kEach = 20'000;
  for (int round = 0; round < 5; ++round) {
    RouteHistory h;
    for (int i = 0; i < 1000; ++i) {
      h.record(kT, R::kAllowed);
      h.record(kT, R::kDenied);
    }
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&h, t] {
        for (int i = 0; i < kEach; ++i) {
          // Even threads begin with decisions of the old second, as a thread
          // that read the clock just before it turned: counted in kT while
          // the slot holds it, dropped after; never in kT + 901.
          h.record(t % 2 == 0 && i < 50 ? kT : kT + 901, R::kAllowed);
          h.record(kT + 901, R::kDenied);
        }
      });
    }
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(h.read(kT + 902, 1, R::kAllowed), (Counts{uint64_t{kThreads} * kEach - 2 * 50}));
    EXPECT_EQ(h.read(kT + 902, 1, R::kDenied), (Counts{uint64_t{kThreads} * kEach}));
  }
}

TEST(DecisionHistory, ARouteKeepsItsRingWhileHeldAndLosesItAfter) {
  DecisionHistory history;
  std::shared_ptr<RouteHistory> a = history.route("GET /a");
  a->record(kT, R::kAllowed);
  {
    // A reload: the new config's route of the same name finds the ring.
    std::shared_ptr<RouteHistory> again = history.route("GET /a");
    EXPECT_EQ(again, a);
    std::shared_ptr<RouteHistory> b = history.route("GET /b");
    b->record(kT, R::kDenied);
    const auto read = history.read(kT + 1, 1);
    ASSERT_EQ(read.size(), 2u);
    EXPECT_EQ(read.at("GET /a").allowed, (Counts{1}));
    EXPECT_EQ(read.at("GET /b").denied, (Counts{1}));
    EXPECT_EQ(read.at("GET /b").allowed, (Counts{0}));
  }
  // GET /b is in no config held now: gone, and new if it comes back.
  const auto read = history.read(kT + 1, 1);
  ASSERT_EQ(read.size(), 1u);
  EXPECT_EQ(read.count("GET /a"), 1u);
  EXPECT_EQ(history.route("GET /b")->read(kT + 1, 1, R::kDenied), (Counts{0}));
}

// The decision observer counts each decision in its route's history as the
// result sluice_requests_total counts it under: allowed; denied and
// shadow_denied as denied; error as error; an invalid request in neither.
TEST(RouteMetricsHistory, EachDecisionCountsInTheSecondItWasMadeUnderItsResult) {
  Registry registry;
  TopKeys top;
  DecisionHistory history;
  const DecisionSinks sinks{registry.histogram("latency", "", {}, {1000}),
                            registry.counter("store_errors", "", {}), &top, &history};
  DecisionLog log(0.0, false);
  const RouteMetrics m =
      make_route_metrics(registry, "r", {}, /*shadow=*/true, nullptr, sinks, log);
  const policy::Plan plan;
  using Result = policy::Verdict::Result;
  auto decide = [&](int64_t second, Result result, bool shadow = false) {
    policy::Verdict v;
    v.result = result;
    m.decided(policy::Decided{plan, v, std::chrono::seconds(second), 0, shadow});
  };
  decide(kT, Result::kUnlimited);                    // no limit: allowed
  decide(kT, Result::kAllowed);                      // allowed
  decide(kT + 1, Result::kDenied);                   // denied
  decide(kT + 1, Result::kDenied, /*shadow=*/true);  // shadow_denied
  decide(kT + 2, Result::kFailedAllowed);            // error, on_failure allow
  decide(kT + 2, Result::kFailedDenied);             // error, on_failure deny
  decide(kT + 2, Result::kInvalid);
  const DecisionHistory::Counts c = history.read(kT + 3, 3).at("r");
  EXPECT_EQ(c.allowed, (Counts{2, 0, 0}));
  EXPECT_EQ(c.denied, (Counts{0, 2, 0}));
  EXPECT_EQ(c.error, (Counts{0, 0, 2}));
  EXPECT_EQ(m.allowed->value(), 2u);
  EXPECT_EQ(m.denied->value(), 1u);
  EXPECT_EQ(m.shadow_denied->value(), 1u);
  EXPECT_EQ(m.error->value(), 2u);
}

}  // namespace
}  // namespace sluice::observe
