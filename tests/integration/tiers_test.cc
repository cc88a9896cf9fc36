// Exact allowed counts per route for the seed's tiers, through the real server.
#include "test_support.h"

namespace sluice::test {
namespace {

class Tiers : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = SluiceProcess::start(kTieredYaml);
    ASSERT_NE(server_, nullptr);
  }
  std::unique_ptr<SluiceProcess> server_;
};

TEST_F(Tiers, StatusAllowsExactly1000ThenDenies) {
  EXPECT_EQ(count_allowed(*server_, "GET", "/api/status", 1005), 1000);
}

TEST_F(Tiers, SearchAllowsExactly20ThenDenies) {
  EXPECT_EQ(count_allowed(*server_, "GET", "/api/search", 25), 20);
}

TEST_F(Tiers, OrdersAllowExactly10PerApiKey) {
  EXPECT_EQ(count_allowed(*server_, "POST", "/api/orders", 15, {{"X-Api-Key", "alpha"}}, "{}"), 10);
  // Another key has its own bucket; the first stays empty.
  EXPECT_EQ(count_allowed(*server_, "POST", "/api/orders", 15, {{"X-Api-Key", "beta"}}, "{}"), 10);
  EXPECT_EQ(count_allowed(*server_, "POST", "/api/orders", 1, {{"X-Api-Key", "alpha"}}, "{}"), 0);
}

TEST_F(Tiers, OrdersWithoutApiKeyFallBackToTheClientAddress) {
  EXPECT_EQ(count_allowed(*server_, "POST", "/api/orders", 12, {}, "{}"), 10);
  // An empty header is no key either: same address bucket, already empty.
  EXPECT_EQ(count_allowed(*server_, "POST", "/api/orders", 1, {{"X-Api-Key", ""}}, "{}"), 0);
}

TEST_F(Tiers, LoginAllowsExactly5) {
  EXPECT_EQ(count_allowed(*server_, "POST", "/api/auth/login", 8, {}, "user=a"), 5);
}

TEST_F(Tiers, UnmatchedPathsShareTheDefault100) {
  EXPECT_EQ(count_allowed(*server_, "GET", "/other", 60), 60);
  // A different unmatched path draws on the same default bucket (same client).
  EXPECT_EQ(count_allowed(*server_, "GET", "/something/else", 45), 40);
}

TEST_F(Tiers, RoutesDoNotShareBuckets) {
  EXPECT_EQ(count_allowed(*server_, "GET", "/api/search", 21), 20);
  // Search is exhausted; login and the default are untouched.
  EXPECT_EQ(count_allowed(*server_, "POST", "/api/auth/login", 6, {}, "x"), 5);
  EXPECT_EQ(count_allowed(*server_, "GET", "/api/other", 1), 1);
  // A method the route does not name falls to the default.
  EXPECT_EQ(count_allowed(*server_, "POST", "/api/search", 1, {}, "x"), 1);
}

}  // namespace
}  // namespace sluice::test
