// The memory store on the conformance table (tests/conformance, which the
// Redis tests run too), and on seeded random traces against the pure
// algorithm functions. (The Redis store meets random traces in
// tests/redis/differential_test.cc, against the memory store.)
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "conformance/store_conformance.h"
#include "test_util.h"

namespace sluice {
namespace conformance {
namespace {

const StoreRow kMemoryRows[] = {
    {"Memory", [] { return std::make_shared<MemoryStore>(); }},
    {"MemoryOneShard",
     [] { return std::make_shared<MemoryStore>(testing::store_options(1'000'000, 1)); }},
    {"MemoryFixedSeed",
     [] { return std::make_shared<MemoryStore>(testing::store_options(1'000'000, 64, 42)); }},
};

}  // namespace

SLUICE_STORE_CONFORMANCE(Stores, ::testing::ValuesIn(kMemoryRows));

namespace {

using namespace std::chrono_literals;
using testing::kNoon;
using testing::Model;
using testing::must;

std::vector<Limit> one_of_each() {
  return {must(Limit::token_bucket(10, 1, 1s)), must(Limit::gcra(10, 3, 1s)),
          must(Limit::fixed_window(10, 1s)), must(Limit::sliding_log(10, 1s)),
          must(Limit::sliding_window(10, 1s))};
}

std::vector<testing::Request> whole_microseconds(std::vector<testing::Request> trace) {
  for (testing::Request& r : trace) r.at = r.at - r.at % Nanos(1us);
  return trace;
}

class RandomTraces : public ::testing::TestWithParam<StoreRow> {
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
TEST_P(RandomTraces, DecisionsEqualThePureAlgorithm) {
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
TEST_P(RandomTraces, ADenialChangesNoState) {
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

INSTANTIATE_TEST_SUITE_P(Stores, RandomTraces, ::testing::ValuesIn(kMemoryRows),
                         [](const ::testing::TestParamInfo<StoreRow>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace conformance
}  // namespace sluice
