// Helpers shared by the unit tests: unwrapping results, fixed instants, a
// reference model that drives the pure algorithm functions the way a store
// does, seeded random traces, and a brute-force window count.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <ostream>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/refund.h"
#include "core/sliding_log.h"
#include "core/step.h"
#include "sluice/sluice.h"

namespace sluice {

// So that a failed EXPECT_EQ on decisions prints something readable.
inline void PrintTo(const Decision& d, std::ostream* os) {
  *os << "{allowed=" << d.allowed << " limit=" << d.limit << " remaining=" << d.remaining
      << " reset_after=" << d.reset_after.count() << "ns retry_after=" << d.retry_after.count()
      << "ns}";
}

}  // namespace sluice

namespace sluice::testing {

using namespace std::chrono_literals;
using Days = std::chrono::days;

// 2024-01-01 12:00:00 UTC: a minute (and hour) boundary.
inline constexpr Nanos kNoon = std::chrono::seconds(1'704'110'400);
// 2090-01-01 00:00:00 UTC.
inline constexpr Nanos kYear2090 = std::chrono::seconds(3'786'912'000);
// 1990-01-01 00:00:00 UTC.
inline constexpr Nanos kYear1990 = std::chrono::seconds(631'152'000);
// A refill period that counts as "no refill" in a test: one token per day,
// while a test's clock moves by milliseconds at most. (One per ten years would
// be slower still, but Limit::create refuses it above capacity 14: one token
// would be 3.15e17 units, and a full bucket must fit in 2^62 units.)
inline constexpr Nanos kNoRefillPeriod = Days(1);

// The value of a Result, or a test failure (thrown, so the test stops there).
template <class T>
T must(Result<T> result) {
  if (!result.ok()) throw std::runtime_error("unexpected error: " + result.error().message);
  return std::move(result).value();
}

// Specs for Limit::create, for tables that mix algorithms.
inline LimitSpec bucket(Algorithm a, uint64_t capacity, uint64_t tokens, Nanos period) {
  return {.algorithm = a, .capacity = capacity, .refill_tokens = tokens, .refill_period = period};
}

inline LimitSpec window(Algorithm a, uint64_t limit, Nanos w) {
  return {.algorithm = a, .limit = limit, .window = w};
}

// Store options without spelling every field (designated initializers must).
inline MemoryStoreOptions store_options(size_t max_keys, size_t shards = 64,
                                        std::optional<uint64_t> seed = std::nullopt) {
  MemoryStoreOptions o;
  o.max_keys = max_keys;
  o.shards = shards;
  o.seed = seed;
  return o;
}

inline Decision allowed(uint64_t limit, uint64_t remaining, Nanos reset_after) {
  return Decision{true, limit, remaining, reset_after, Nanos{0}};
}

inline Decision denied(uint64_t limit, uint64_t remaining, Nanos reset_after, Nanos retry_after) {
  return Decision{false, limit, remaining, reset_after, retry_after};
}

// One key under one limit, driven through the pure functions exactly as a
// store drives them: a key never seen starts fresh at its first request, an
// allowed request commits the next state, a denied one commits nothing.
class Model {
 public:
  explicit Model(Limit limit) : limit_(std::move(limit)) {}

  const Limit& limit() const { return limit_; }

  // The decision at `now`, without committing anything.
  Decision peek(Nanos now, uint64_t cost) const {
    if (limit_.keeps_log()) return core::sliding_log(limit_, log_, now, cost).decision;
    const core::PackedState state = state_ ? *state_ : core::fresh_state(limit_, now);
    return core::step(limit_, state, now, cost).decision;
  }

  // The decision at `now`, committed when allowed.
  Decision apply(Nanos now, uint64_t cost) {
    if (limit_.keeps_log()) {
      const core::SlidingLogStep step = core::sliding_log(limit_, log_, now, cost);
      if (step.decision.allowed) core::sliding_log_commit(log_, step, now, cost);
      return step.decision;
    }
    const core::PackedState state = state_ ? *state_ : core::fresh_state(limit_, now);
    const core::PackedStep step = core::step(limit_, state, now, cost);
    if (step.decision.allowed) state_ = step.next;
    return step.decision;
  }

  // Gives back a charge made at `charged_at` (Store::refund), for the log
  // algorithms (sliding_log, concurrency).
  void refund_log(Nanos charged_at, Nanos now, uint64_t cost) {
    core::sliding_log_refund(log_, limit_, charged_at, now, cost);
  }

 private:
  Limit limit_;
  std::optional<core::PackedState> state_;
  core::SlidingLog log_;
};

struct Request {
  Nanos at;
  uint64_t cost;
};

// A seeded random trace: mostly gaps up to twice `typical_gap` (so the limit
// binds), some simultaneous requests, some long idle gaps; mostly cost 1, sometimes up
// to `max_cost`. Times never decrease.
inline std::vector<Request> random_trace(uint64_t seed, Nanos start, Nanos typical_gap,
                                         uint64_t max_cost, size_t steps) {
  std::mt19937_64 rng(seed);
  const auto below = [&](uint64_t n) { return n == 0 ? 0 : rng() % n; };
  const uint64_t gap = static_cast<uint64_t>(std::max<int64_t>(typical_gap.count(), 1));
  std::vector<Request> trace;
  trace.reserve(steps);
  Nanos now = start;
  for (size_t i = 0; i < steps; ++i) {
    const uint64_t g = below(100);
    if (g < 15) {
      // same instant
    } else if (g < 90) {
      now += Nanos{static_cast<int64_t>(below(2 * gap + 1))};
    } else if (g < 98) {
      now += Nanos{static_cast<int64_t>(below(20 * gap + 1))};
    } else {
      now += Nanos{static_cast<int64_t>(below(200 * gap + 1))};
    }
    const uint64_t c = below(100);
    uint64_t cost = 1;
    if (c >= 70 && c < 92) {
      cost = 1 + below(std::min<uint64_t>(max_cost, 5));
    } else if (c >= 92) {
      cost = 1 + below(max_cost);
    }
    trace.push_back({now, cost});
  }
  return trace;
}

// The largest total cost in any interval (t - window, t], counted the slow and
// obvious way. `events` are sorted by time; an interval holding the most
// events can always be slid right until it ends on one, so only those are tried.
inline uint64_t max_in_any_window(const std::vector<Request>& events, Nanos window) {
  uint64_t best = 0;
  for (size_t j = 0; j < events.size(); ++j) {
    uint64_t sum = 0;
    for (size_t i = 0; i <= j; ++i) {
      if (events[i].at > events[j].at - window) sum += events[i].cost;
    }
    best = std::max(best, sum);
  }
  return best;
}

// A typical gap between requests that makes `limit` bind: a quarter of the
// average spacing the limit allows. With the gap mix of random_trace() (about
// 3.5 typical gaps per request on average) requests of cost 1 alone come a
// little faster than the limit admits; larger costs push further.
inline Nanos binding_gap(const Limit& limit) {
  return Nanos{
      std::max<int64_t>(limit.period().count() / static_cast<int64_t>(limit.size()) / 4, 1)};
}

// The five rate algorithms, for a suite run once per algorithm:
// INSTANTIATE_TEST_SUITE_P(AllAlgorithms, Suite, rate_algorithms(), algorithm_test_name).
inline auto rate_algorithms() {
  return ::testing::Values(Algorithm::kTokenBucket, Algorithm::kGcra, Algorithm::kFixedWindow,
                           Algorithm::kSlidingLog, Algorithm::kSlidingWindow);
}

inline std::string algorithm_test_name(const ::testing::TestParamInfo<Algorithm>& info) {
  return std::string(algorithm_name(info.param));
}

}  // namespace sluice::testing
