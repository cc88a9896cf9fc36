// UpstreamGroup (src/http/upstream_group.h): balance, in-flight counts and
// passive health, with time passed in; and the retry rule (retry_rule.h).

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "http/retry_rule.h"
#include "http/upstream_group.h"
#include "observe/metrics.h"

namespace sluice::http {
namespace {

using namespace std::chrono_literals;
using Outcome = UpstreamGroup::Outcome;
using SteadyClock = std::chrono::steady_clock;

policy::Upstream upstream(size_t servers, policy::Balance balance, uint32_t fail_after = 0) {
  policy::Upstream u;
  u.name = "api";
  for (size_t i = 0; i < servers; ++i) {
    const std::string host = "10.0.0." + std::to_string(i + 1);
    u.servers.push_back({"http://" + host + ":3000", {host, 3000}, false});
  }
  u.address = u.servers.front().address;
  u.balance = balance;
  u.fail_after = fail_after;
  u.retry_after = 10s;
  return u;
}

const SteadyClock::time_point kT0 = SteadyClock::time_point() + 1000s;

TEST(UpstreamGroup, RoundRobinTakesEachServerInTurn) {
  UpstreamGroup g(upstream(3, policy::Balance::kRoundRobin), nullptr);
  std::vector<size_t> picked;
  for (int i = 0; i < 7; ++i) {
    picked.push_back(g.pick(0, kT0));
    g.done(picked.back());
  }
  EXPECT_EQ(picked, (std::vector<size_t>{0, 1, 2, 0, 1, 2, 0}));
  EXPECT_EQ(g.key(1), "http://10.0.0.2:3000");
}

TEST(UpstreamGroup, LeastRequestTakesTheFewestInFlightTiesByOrder) {
  UpstreamGroup g(upstream(3, policy::Balance::kLeastRequest), nullptr);
  EXPECT_EQ(g.pick(0, kT0), 0u);  // 0,0,0 -> the first
  EXPECT_EQ(g.pick(0, kT0), 1u);  // 1,0,0
  EXPECT_EQ(g.pick(0, kT0), 2u);  // 1,1,0
  EXPECT_EQ(g.pick(0, kT0), 0u);  // 1,1,1 -> the first again
  g.done(1);                      // 2,0,1
  EXPECT_EQ(g.pick(0, kT0), 1u);
  EXPECT_EQ(g.in_flight(0), 2u);
  EXPECT_EQ(g.in_flight(1), 1u);
  EXPECT_EQ(g.in_flight(2), 1u);
}

TEST(UpstreamGroup, TriedServersAreSkippedAndNoneIsLeftAfterAll) {
  UpstreamGroup g(upstream(2, policy::Balance::kRoundRobin), nullptr);
  EXPECT_EQ(g.pick(0b01, kT0), 1u);
  EXPECT_EQ(g.pick(0b10, kT0), 0u);
  EXPECT_EQ(g.pick(0b11, kT0), UpstreamGroup::kNone);
}

TEST(UpstreamGroup, FailAfterConsecutiveFailuresEjectsUntilRetryAfter) {
  observe::Registry registry;
  UpstreamGroup g(upstream(2, policy::Balance::kRoundRobin, 3), &registry);
  g.report(1, Outcome::kFailure, kT0);
  g.report(1, Outcome::kFailure, kT0);
  g.report(1, Outcome::kSuccess, kT0);  // the streak ends
  g.report(1, Outcome::kFailure, kT0);
  g.report(1, Outcome::kNeutral, kT0);  // a reset: no change
  g.report(1, Outcome::kFailure, kT0);
  EXPECT_FALSE(g.ejected(1));
  g.report(1, Outcome::kFailure, kT0);  // 3 in a row
  EXPECT_TRUE(g.ejected(1));
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(g.pick(0, kT0 + 9999ms), 0u);
    g.done(0);
  }
  // retry_after passed: server 1 is back, in its turn.
  EXPECT_EQ(g.pick(0, kT0 + 10s), 1u);
  EXPECT_FALSE(g.ejected(1));
  const std::string text = registry.render();
  EXPECT_NE(
      text.find(
          R"(sluice_upstream_ejections_total{upstream="api",server="http://10.0.0.2:3000"} 1)"),
      std::string::npos)
      << text;
  EXPECT_NE(
      text.find(R"(sluice_upstream_returns_total{upstream="api",server="http://10.0.0.2:3000"} 1)"),
      std::string::npos)
      << text;
}

TEST(UpstreamGroup, AllEjectedAreTriedAnyway) {
  UpstreamGroup g(upstream(2, policy::Balance::kRoundRobin, 1), nullptr);
  g.report(0, Outcome::kFailure, kT0);
  g.report(1, Outcome::kFailure, kT0);
  EXPECT_TRUE(g.ejected(0));
  EXPECT_TRUE(g.ejected(1));
  const size_t a = g.pick(0, kT0 + 1s);
  const size_t b = g.pick(0, kT0 + 1s);
  EXPECT_EQ(a + b, 1u);  // both, in turn: health alone never refuses a request
}

TEST(UpstreamGroup, HealthOffNeverEjects) {
  UpstreamGroup g(upstream(2, policy::Balance::kRoundRobin, 0), nullptr);
  for (int i = 0; i < 100; ++i) g.report(0, Outcome::kFailure, kT0);
  EXPECT_FALSE(g.ejected(0));
}

TEST(UpstreamGroup, Only502503And504AnswersAreFailures) {
  EXPECT_EQ(UpstreamGroup::outcome_of(502), Outcome::kFailure);
  EXPECT_EQ(UpstreamGroup::outcome_of(503), Outcome::kFailure);
  EXPECT_EQ(UpstreamGroup::outcome_of(504), Outcome::kFailure);
  EXPECT_EQ(UpstreamGroup::outcome_of(500), Outcome::kSuccess);
  EXPECT_EQ(UpstreamGroup::outcome_of(200), Outcome::kSuccess);
}

TEST(RetryRule, ConnectFailuresRetryAnyMethodWithOrWithoutBody) {
  EXPECT_TRUE(may_retry_elsewhere({.connecting = true, .has_body = true}));
  EXPECT_TRUE(may_retry_elsewhere({.connecting = true}));
  EXPECT_FALSE(may_retry_elsewhere({.connecting = true, .timed_out = true}));
}

TEST(RetryRule, AResetBeforeAnyResponseByteRetriesOnlyWhatMaySafelyRunTwice) {
  EXPECT_TRUE(may_retry_elsewhere({.request_written = true, .idempotent = true}));  // GET
  EXPECT_FALSE(may_retry_elsewhere({.request_written = true}));                     // POST sent
  EXPECT_TRUE(may_retry_elsewhere({.request_written = false}));  // nothing of the POST went
  EXPECT_FALSE(
      may_retry_elsewhere({.has_body = true, .request_written = true, .idempotent = true}));
  EXPECT_FALSE(may_retry_elsewhere({.response_started = true, .idempotent = true}));
  EXPECT_TRUE(is_idempotent(boost::beast::http::verb::get));
  EXPECT_FALSE(is_idempotent(boost::beast::http::verb::post));
}

}  // namespace
}  // namespace sluice::http
