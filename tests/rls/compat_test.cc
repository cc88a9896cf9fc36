// Compatibility: descriptor files in envoyproxy/ratelimit's documented example
// format (testdata/compat), loaded unchanged from a folder, give the decisions
// its documentation describes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "rls_fixture.h"
#include "test_util.h"

namespace sluice::rls {
namespace {

using namespace std::chrono_literals;
using ::testing::ElementsAre;
using testing::Entries;
using testing::OK;
using testing::OVER;
using testing::request;
using testing::RlsHarness;
namespace pb = testing::pb;

std::shared_ptr<const RlsConfig> compat_config() {
  LoadResult result = load_rls_config_dir(testing::testdata("compat"));
  EXPECT_TRUE(result.ok()) << result.error_text();
  return result.config;
}

TEST(Compat, EveryDocumentedExampleLoadsWithoutWarnings) {
  LoadResult result = load_rls_config_dir(testing::testdata("compat"));
  ASSERT_TRUE(result.ok()) << result.error_text();
  EXPECT_EQ(result.config->domains.size(), 11u);
  EXPECT_TRUE(result.warnings.empty());
}

TEST(Compat, Example1TwoValuesEachWithItsOwnLimit) {
  RlsHarness rls(compat_config());
  EXPECT_EQ(rls.allowed(request("mongo_cps", {Entries{{"database", "users"}}}), 501), 500);
  EXPECT_EQ(rls.allowed(request("mongo_cps", {Entries{{"database", "default"}}}), 501), 500);
  EXPECT_EQ(rls.allowed(request("mongo_cps", {Entries{{"database", "logs"}}}), 600), 600);
  rls.clock.advance(1s);
  EXPECT_EQ(rls.allowed(request("mongo_cps", {Entries{{"database", "users"}}}), 501), 500);
}

TEST(Compat, Example2NestedLimitAndAggregateLimitInOneRequest) {
  RlsHarness rls(compat_config());
  const Entries marketing{{"message_type", "marketing"}, {"to_number", "2061111111"}};
  const Entries number{{"to_number", "2061111111"}};
  const auto both = request("messaging", {marketing, number});
  EXPECT_THAT(rls.codes(both, 6), ElementsAre(OK, OK, OK, OK, OK, OVER));
  // The aggregate limit was charged by all six calls: 100 - 6 = 94, then 93.
  pb::RateLimitResponse alone = rls.call(request("messaging", {number}));
  EXPECT_EQ(alone.statuses(0).limit_remaining(), 93u);
  EXPECT_EQ(alone.statuses(0).current_limit().unit(), pb::RateLimitResponse::RateLimit::DAY);
  // Each number has its own 5 marketing messages.
  const Entries other{{"message_type", "marketing"}, {"to_number", "2062222222"}};
  EXPECT_EQ(rls.allowed(request("messaging", {other}), 6), 5);
  // A day later, all is restored.
  rls.clock.advance(24h);
  EXPECT_EQ(rls.allowed(both, 6), 5);
}

TEST(Compat, Example3MostSpecificMatchFirst) {
  RlsHarness rls(compat_config());
  EXPECT_EQ(
      rls.allowed(request("edge_proxy_per_ip", {Entries{{"remote_address", "50.0.0.1"}}}), 11), 10);
  EXPECT_EQ(rls.allowed(request("edge_proxy_per_ip", {Entries{{"remote_address", "50.0.0.5"}}}), 3),
            0);
}

TEST(Compat, Example4RuleAtTheRequestsDepthOnly) {
  RlsHarness rls(compat_config());
  pb::RateLimitResponse deep =
      rls.call(request("example4", {Entries{{"key", "value"}, {"subkey", "subvalue"}}}));
  EXPECT_EQ(deep.statuses(0).current_limit().requests_per_unit(), 300u);
  EXPECT_EQ(deep.statuses(0).limit_remaining(), 299u);
  pb::RateLimitResponse shallow = rls.call(request("example4", {Entries{{"key", "value"}}}));
  EXPECT_FALSE(shallow.statuses(0).has_current_limit());
}

TEST(Compat, Example5UnlimitedDescriptor) {
  RlsHarness rls(compat_config());
  pb::RateLimitResponse ldap = rls.call(request("internal", {Entries{{"ldap", "cn=admin"}}}));
  EXPECT_EQ(ldap.statuses(0).code(), OK);
  EXPECT_EQ(ldap.statuses(0).limit_remaining(), 4294967295u);
  EXPECT_EQ(rls.allowed(request("internal", {Entries{{"azure", "x"}}}), 101), 100);
}

TEST(Compat, Example6ShadowModeNeverLimitsButTheOtherUserIsLimited) {
  RlsHarness rls(compat_config());
  EXPECT_EQ(
      rls.allowed(request("example6", {Entries{{"service", "auth-service"}, {"user", "user-a"}}}),
                  15),
      15);
  EXPECT_EQ(rls.service.counters().shadow_mode.load(), 5u);
  EXPECT_EQ(
      rls.allowed(request("example6", {Entries{{"service", "auth-service"}, {"user", "user-b"}}}),
                  21),
      20);
}

TEST(Compat, Example7ReplacesKeepsTheReplacedLimitUntouched) {
  RlsHarness rls(compat_config());
  const Entries first{{"key_1", "value_1"}, {"user", "bkthomps"}};
  const Entries second{{"key_2", "value_2"}, {"user", "bkthomps"}};
  // Both together: only the replacing 10 / s applies.
  EXPECT_EQ(rls.allowed(request("example7", {first, second}), 11), 10);
  // The 5 / s limit was not touched; the 10 / s one is spent.
  EXPECT_EQ(rls.allowed(request("example7", {first}), 6), 5);
  EXPECT_EQ(rls.allowed(request("example7", {second}), 1), 0);
  rls.clock.advance(1s);
  EXPECT_EQ(rls.allowed(request("example7", {second}), 11), 10);
}

TEST(Compat, Example8DetailedMetricKeepsTheLimits) {
  RlsHarness rls(compat_config());
  EXPECT_EQ(rls.allowed(request("example8", {Entries{{"key1", "unspecified_value"}}}), 11), 10);
  EXPECT_EQ(rls.allowed(request("example8", {Entries{{"key1", "unspecified_value2"}}}), 11), 10);
  EXPECT_EQ(rls.allowed(request("example8", {Entries{{"key1", "value1"}}}), 21), 20);
}

TEST(Compat, Example9TrailingWildcardEachValueItsOwnCounter) {
  RlsHarness rls(compat_config());
  EXPECT_EQ(rls.allowed(request("example9", {Entries{{"key1", "value_1"}}}), 21), 20);
  EXPECT_EQ(rls.allowed(request("example9", {Entries{{"key1", "value_2"}}}), 21), 20);
  EXPECT_EQ(rls.allowed(request("example9", {Entries{{"key1", "other"}}}), 25), 25);
}

TEST(Compat, ShareThresholdOneCounterPerWildcard) {
  RlsHarness rls(compat_config());
  EXPECT_EQ(rls.allowed(request("shared", {Entries{{"files", "files/a.pdf"}}}), 60), 60);
  EXPECT_EQ(rls.allowed(request("shared", {Entries{{"files", "files/b.csv"}}}), 50), 40);
  // The exact value keeps its own limit; the other test* values share 100.
  EXPECT_EQ(rls.allowed(request("shared", {Entries{{"file", "test1"}}}), 51), 50);
  EXPECT_EQ(rls.allowed(request("shared", {Entries{{"file", "test2"}}}), 70), 70);
  EXPECT_EQ(rls.allowed(request("shared", {Entries{{"file", "test3"}}}), 40), 30);
  // A middle wildcard shares as well.
  EXPECT_EQ(rls.allowed(request("shared", {Entries{{"midpath", "/api/a/v1"}}}), 2), 2);
  EXPECT_EQ(rls.allowed(request("shared", {Entries{{"midpath", "/api/b/v1"}}}), 2), 1);
}

TEST(Compat, QuotaModeAndMetadata) {
  RlsHarness rls(compat_config());
  const auto r =
      request("quota", {Entries{{"backend", "primary"}}, Entries{{"backend", "fallback"}}});
  pb::RateLimitResponse first = rls.call(r);
  EXPECT_EQ(first.overall_code(), OK);
  const auto& f1 = first.dynamic_metadata().fields();
  EXPECT_EQ(f1.count("quotaModeViolations"), 0u);
  EXPECT_EQ(f1.count("service_with_quota"), 1u);
  EXPECT_EQ(f1.count("fallback_service"), 1u);

  pb::RateLimitResponse second = rls.call(r);  // fallback is out of quota
  EXPECT_EQ(second.overall_code(), OK);
  const auto& f2 = second.dynamic_metadata().fields();
  ASSERT_EQ(f2.count("quotaModeViolations"), 1u);
  ASSERT_EQ(f2.at("quotaModeViolations").list_value().values_size(), 1);
  EXPECT_EQ(f2.at("quotaModeViolations").list_value().values(0).number_value(), 1);
  EXPECT_EQ(f2.count("service_with_quota"), 1u);
  EXPECT_EQ(f2.count("fallback_service"), 0u);

  pb::RateLimitResponse third = rls.call(r);  // both out of quota
  EXPECT_EQ(third.overall_code(), OVER);
}

}  // namespace
}  // namespace sluice::rls
