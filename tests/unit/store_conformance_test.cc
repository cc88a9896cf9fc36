// The conformance table: every Store implementation must pass these, through
// the Store interface only. Add a store by adding a row to kStores (a Redis
// store: a factory that connects to the test's redis-server). Scenario times
// are whole microseconds, the resolution a Redis store computes in.
#include <gtest/gtest.h>

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "test_util.h"

namespace sluice {
namespace {

using namespace std::chrono_literals;
using testing::allowed;
using testing::denied;
using testing::kNoon;
using testing::Model;
using testing::must;

struct StoreFactory {
  const char* name;
  std::function<std::shared_ptr<Store>()> make;
};

const StoreFactory kStores[] = {
    {"Memory", [] { return std::make_shared<MemoryStore>(); }},
    {"MemoryOneShard",
     [] { return std::make_shared<MemoryStore>(testing::store_options(1'000'000, 1)); }},
    {"MemoryFixedSeed",
     [] { return std::make_shared<MemoryStore>(testing::store_options(1'000'000, 64, 42)); }},
};

std::vector<Limit> one_of_each() {
  return {must(Limit::token_bucket(10, 1, 1s)), must(Limit::gcra(10, 3, 1s)),
          must(Limit::fixed_window(10, 1s)), must(Limit::sliding_log(10, 1s)),
          must(Limit::sliding_window(10, 1s))};
}

std::vector<testing::Request> whole_microseconds(std::vector<testing::Request> trace) {
  for (testing::Request& r : trace) r.at = r.at - r.at % Nanos(1us);
  return trace;
}

class StoreConformance : public ::testing::TestWithParam<StoreFactory> {
 protected:
  void SetUp() override { store_ = GetParam().make(); }

  Decision acquire(const Limit& limit, std::string_view key, Nanos now, uint64_t cost = 1) {
    const AcquireRequest request{&limit, key, cost};
    Decision out;
    Status s = store_->acquire({&request, 1}, now, {&out, 1});
    if (!s.ok()) throw std::runtime_error(s.error().message);
    return out;
  }

  std::shared_ptr<Store> store_;
};

// For each algorithm, a key's decisions through the store equal the pure
// function's, over a seeded random trace, while another key is interleaved.
TEST_P(StoreConformance, DecisionsEqualThePureAlgorithm) {
  for (const Limit& limit : one_of_each()) {
    SCOPED_TRACE(limit.describe());
    Model model(limit);
    const auto trace = whole_microseconds(
        testing::random_trace(0xc0f + limit.fingerprint() % 1000, kNoon, 75ms, 10, 3'000));
    for (size_t i = 0; i < trace.size(); ++i) {
      const Decision expected = model.apply(trace[i].at, trace[i].cost);
      ASSERT_EQ(acquire(limit, "key", trace[i].at, trace[i].cost), expected) << "step " << i;
      acquire(limit, "other key", trace[i].at, 1);
    }
  }
}

// After a denial the next decisions are those of a store that never saw the
// denied request: store A gets every request, store B only those A allowed.
TEST_P(StoreConformance, ADenialChangesNoState) {
  for (const Limit& limit : one_of_each()) {
    SCOPED_TRACE(limit.describe());
    std::shared_ptr<Store> without_denials = GetParam().make();
    const auto trace = whole_microseconds(
        testing::random_trace(0xde1 + limit.fingerprint() % 1000, kNoon, 50ms, 10, 3'000));
    size_t denials = 0;
    for (size_t i = 0; i < trace.size(); ++i) {
      const Decision d = acquire(limit, "k", trace[i].at, trace[i].cost);
      if (!d.allowed) {
        ++denials;
        continue;
      }
      const AcquireRequest request{&limit, "k", trace[i].cost};
      Decision other;
      ASSERT_TRUE(without_denials->acquire({&request, 1}, trace[i].at, {&other, 1}).ok());
      ASSERT_EQ(other, d) << "step " << i;
    }
    EXPECT_GT(denials, trace.size() / 5);
  }
}

TEST_P(StoreConformance, KeysAreIndependent) {
  const Limit limit = must(Limit::token_bucket(3, 1, 1min));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(acquire(limit, "alice", kNoon).allowed);
  EXPECT_FALSE(acquire(limit, "alice", kNoon).allowed);
  EXPECT_EQ(acquire(limit, "bob", kNoon), allowed(3, 2, 1min));
}

TEST_P(StoreConformance, LimitsWithDifferentDefinitionsKeepSeparateStates) {
  const Limit per_second = must(Limit::token_bucket(3, 1, 1s));
  const Limit per_minute = must(Limit::token_bucket(3, 1, 1min));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(acquire(per_second, "k", kNoon).allowed);
  EXPECT_EQ(acquire(per_minute, "k", kNoon), allowed(3, 2, 1min));
}

// Three limits on one request (say: per second, per minute, per day).
struct ThreeLimits {
  Limit burst = must(Limit::token_bucket(5, 1, 1s));
  Limit minute = must(Limit::fixed_window(3, 1min));
  Limit day = must(Limit::sliding_window(10, std::chrono::days(1)));
  std::array<AcquireRequest, 3> requests(std::string_view key, uint64_t cost = 1) const {
    return {AcquireRequest{&burst, key, cost}, AcquireRequest{&minute, key, cost},
            AcquireRequest{&day, key, cost}};
  }
};

TEST_P(StoreConformance, SeveralLimitsAreChargedTogether) {
  ThreeLimits l;
  std::array<Decision, 3> out;
  ASSERT_TRUE(store_->acquire(l.requests("k"), kNoon + 30s, out).ok());
  EXPECT_EQ(out[0], allowed(5, 4, 1s));
  EXPECT_EQ(out[1], allowed(3, 2, 30s));
  EXPECT_EQ(out[2], allowed(10, 9, std::chrono::days(2) - 12h - 30s));
}

TEST_P(StoreConformance, WhenOneLimitDeniesNoneIsCharged) {
  ThreeLimits l;
  std::array<Decision, 3> out;
  // minute: 3 -> 0; burst: 5 -> 2; day: 10 -> 7.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(store_->acquire(l.requests("k"), kNoon, out).ok());
  ASSERT_TRUE(store_->acquire(l.requests("k"), kNoon, out).ok());
  // The minute limit denies; the others would allow and say so, charging nothing.
  EXPECT_EQ(out[0], allowed(5, 1, 4s));
  EXPECT_EQ(out[1], denied(3, 0, 1min, 1min));
  EXPECT_EQ(out[2], allowed(10, 6, std::chrono::days(2) - 12h));
  EXPECT_FALSE(all_allowed(out));
  // Proof that nothing was charged: alone, each still has what it had.
  EXPECT_EQ(acquire(l.burst, "k", kNoon), allowed(5, 1, 4s));
  EXPECT_EQ(acquire(l.day, "k", kNoon), allowed(10, 6, std::chrono::days(2) - 12h));
}

TEST_P(StoreConformance, ADenialByTheFirstLimitChargesNoneOfTheOthers) {
  ThreeLimits l;
  ASSERT_TRUE(acquire(l.burst, "k", kNoon, 5).allowed);  // burst: 5 -> 0
  std::array<Decision, 3> out;
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(store_->acquire(l.requests("k"), kNoon, out).ok());
    EXPECT_FALSE(out[0].allowed);
  }
  EXPECT_EQ(acquire(l.minute, "k", kNoon), allowed(3, 2, 1min));
  EXPECT_EQ(acquire(l.day, "k", kNoon), allowed(10, 9, std::chrono::days(2) - 12h));
}

TEST_P(StoreConformance, OneLimitOnSeveralKeysIsAllOrNothingToo) {
  // A per-client limit and a global one: the same limit on two keys is fine.
  const Limit limit = must(Limit::token_bucket(2, 1, 1min));
  const std::array<AcquireRequest, 2> requests{AcquireRequest{&limit, "client:1"},
                                               AcquireRequest{&limit, "global"}};
  std::array<Decision, 2> out;
  ASSERT_TRUE(acquire(limit, "global", kNoon, 2).allowed);  // global: 2 -> 0
  ASSERT_TRUE(store_->acquire(requests, kNoon, out).ok());
  EXPECT_EQ(out[0], allowed(2, 1, 1min));
  EXPECT_EQ(out[1], denied(2, 0, 2min, 1min));
  EXPECT_EQ(acquire(limit, "client:1", kNoon), allowed(2, 1, 1min));
}

TEST_P(StoreConformance, TheSameLimitAndKeyTwiceInOneBatchIsAnError) {
  const Limit limit = must(Limit::token_bucket(5, 1, 1s));
  const Limit other = must(Limit::fixed_window(5, 1s));
  const std::array<AcquireRequest, 3> requests{
      AcquireRequest{&limit, "k"}, AcquireRequest{&other, "k"}, AcquireRequest{&limit, "k"}};
  std::array<Decision, 3> out;
  Status s = store_->acquire(requests, kNoon, out);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.error().message,
            "acquire: the same limit is applied twice to key 'k' in one request");
  EXPECT_EQ(acquire(limit, "k", kNoon), allowed(5, 4, 1s));
  EXPECT_EQ(acquire(other, "k", kNoon), allowed(5, 4, 1s));
}

TEST_P(StoreConformance, CostZeroIsAnInvalidArgumentAndChargesNothing) {
  ThreeLimits l;
  std::array<Decision, 3> out;
  Status s = store_->acquire(l.requests("k", 0), kNoon, out);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(store_->size(), 0u);
}

TEST_P(StoreConformance, CostAboveALimitsSizeIsAnErrorAndChargesNothing) {
  ThreeLimits l;
  std::array<Decision, 3> out;
  // 4 fits burst (5) and day (10) but can never fit minute (3).
  Status s = store_->acquire(l.requests("k", 4), kNoon, out);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kCostExceedsLimit);
  EXPECT_EQ(acquire(l.burst, "k", kNoon), allowed(5, 4, 1s));
}

TEST_P(StoreConformance, MalformedBatchesAreInvalidArguments) {
  const Limit limit = must(Limit::token_bucket(5, 1, 1s));
  const AcquireRequest one{&limit, "k"};
  std::array<Decision, 2> two;
  EXPECT_EQ(store_->acquire({&one, 1}, kNoon, two).error().code, ErrorCode::kInvalidArgument);
  const AcquireRequest null_limit{nullptr, "k"};
  Decision out;
  EXPECT_EQ(store_->acquire({&null_limit, 1}, kNoon, {&out, 1}).error().code,
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(store_->size(), 0u);
}

TEST_P(StoreConformance, ResetForgetsOneKeyUnderOneLimit) {
  for (const Limit& limit : one_of_each()) {
    SCOPED_TRACE(limit.describe());
    std::shared_ptr<Store> store = GetParam().make();
    std::swap(store, store_);
    ASSERT_TRUE(acquire(limit, "a", kNoon, 10).allowed);
    ASSERT_TRUE(acquire(limit, "b", kNoon, 10).allowed);
    EXPECT_EQ(store_->size(), 2u);
    EXPECT_TRUE(must(store_->reset(limit, "a")));
    EXPECT_EQ(store_->size(), 1u);
    EXPECT_FALSE(must(store_->reset(limit, "a")));
    EXPECT_TRUE(acquire(limit, "a", kNoon, 10).allowed) << "a starts full again";
    EXPECT_FALSE(acquire(limit, "b", kNoon, 1).allowed) << "b keeps its state";
  }
}

TEST_P(StoreConformance, ADeniedFirstRequestStoresNothing) {
  ThreeLimits l;
  ASSERT_TRUE(acquire(l.minute, "k", kNoon, 3).allowed);
  ASSERT_EQ(store_->size(), 1u);
  std::array<Decision, 3> out;
  ASSERT_TRUE(store_->acquire(l.requests("k"), kNoon, out).ok());
  ASSERT_FALSE(all_allowed(out));
  EXPECT_EQ(store_->size(), 1u);
}

TEST_P(StoreConformance, AsyncAcquireDecidesLikeAcquireAndCallsBackOnce) {
  ThreeLimits l;
  std::array<Decision, 3> out;
  for (int i = 0; i < 3; ++i) {
    int calls = 0;
    store_->acquire_async(l.requests("k"), kNoon, out, [&](Status s) {
      EXPECT_TRUE(s.ok());
      ++calls;
    });
    // The memory store answers before acquire_async returns; a network store
    // would need its event loop run here.
    ASSERT_EQ(calls, 1);
    ASSERT_TRUE(all_allowed(out)) << "call " << i;
  }
  int calls = 0;
  store_->acquire_async(l.requests("k"), kNoon, out, [&](Status s) {
    EXPECT_TRUE(s.ok());
    ++calls;
  });
  ASSERT_EQ(calls, 1);
  EXPECT_EQ(out[1], denied(3, 0, 1min, 1min));
  EXPECT_EQ(acquire(l.burst, "k", kNoon), allowed(5, 1, 4s));
}

TEST_P(StoreConformance, AsyncAcquireReportsErrors) {
  ThreeLimits l;
  std::array<Decision, 3> out;
  ErrorCode code = ErrorCode::kInternal;
  store_->acquire_async(l.requests("k", 4), kNoon, out, [&](Status s) {
    ASSERT_FALSE(s.ok());
    code = s.error().code;
  });
  EXPECT_EQ(code, ErrorCode::kCostExceedsLimit);
}

INSTANTIATE_TEST_SUITE_P(Stores, StoreConformance, ::testing::ValuesIn(kStores),
                         [](const ::testing::TestParamInfo<StoreFactory>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace sluice
