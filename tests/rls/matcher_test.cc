// The matching engine on its own: which rule applies to a request descriptor.
#include "rls/matcher.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace sluice::rls {
namespace {

using testing::load_text;

// The rule's requests_per_unit for `entries`, or -1 when no rule applies.
int64_t limit_of(const RlsConfig& config, std::vector<EntryView> entries,
                 const std::string& domain = "d") {
  const Domain* d = config.find_domain(domain);
  if (d == nullptr) return -1;
  std::optional<Match> m = match_descriptor(*d, entries);
  if (!m) return -1;
  return m->rule().requests_per_unit;
}

TEST(Glob, StarMatchesAnyRunIncludingEmpty) {
  const auto parts = split_glob("foo*");
  EXPECT_TRUE(glob_match(parts, "foo"));
  EXPECT_TRUE(glob_match(parts, "foobar"));
  EXPECT_FALSE(glob_match(parts, "fo"));
  EXPECT_FALSE(glob_match(parts, "xfoo"));
}

TEST(Glob, PrefixMiddleAndSeveralStars) {
  EXPECT_TRUE(glob_match(split_glob("*.example.com"), "api.example.com"));
  EXPECT_FALSE(glob_match(split_glob("*.example.com"), "example.com"));
  EXPECT_TRUE(glob_match(split_glob("/api*v1"), "/api/users/v1"));
  EXPECT_TRUE(glob_match(split_glob("/api*v1"), "/apiv1"));
  EXPECT_FALSE(glob_match(split_glob("/api*v1"), "/api/v2"));
  EXPECT_TRUE(glob_match(split_glob("svc*ep*rpc"), "svc-a-ep-b-rpc"));
  EXPECT_TRUE(glob_match(split_glob("svc*ep*rpc"), "svceprpc"));
  EXPECT_FALSE(glob_match(split_glob("svc*ep*rpc"), "svc-rpc"));
  // Prefix and suffix may not overlap: "ab*ba" needs at least four characters.
  EXPECT_FALSE(glob_match(split_glob("ab*ba"), "aba"));
  EXPECT_TRUE(glob_match(split_glob("ab*ba"), "abba"));
  EXPECT_TRUE(glob_match(split_glob("*"), ""));
  EXPECT_TRUE(glob_match(split_glob("a**b"), "ab"));
}

TEST(Glob, NoStarIsAnExactMatch) {
  EXPECT_TRUE(glob_match(split_glob("foo"), "foo"));
  EXPECT_FALSE(glob_match(split_glob("foo"), "foobar"));
}

constexpr char kTree[] = R"(
domain: d
descriptors:
  - key: key1
    value: value1
    descriptors:
      - key: subkey1
        rate_limit: {unit: second, requests_per_unit: 5}
      - key: subkey1
        value: subvalue1
        rate_limit: {unit: second, requests_per_unit: 10}
  - key: key2
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: key2
    value: value2
    rate_limit: {unit: minute, requests_per_unit: 30}
  - key: key2
    value: value3
  - key: key3
    value: v*
    rate_limit: {unit: hour, requests_per_unit: 40}
  - key: key3
    value: va*
    rate_limit: {unit: hour, requests_per_unit: 41}
  - key: key3
    value: vab
    rate_limit: {unit: hour, requests_per_unit: 42}
  - key: key4
    value: leaf
    rate_limit: {unit: day, requests_per_unit: 50}
  - key: key4
    rate_limit: {unit: day, requests_per_unit: 51}
    descriptors:
      - key: sub
        rate_limit: {unit: day, requests_per_unit: 52}
)";

TEST(Match, DefaultAppliesToEveryValueAndSpecificValueOverridesIt) {
  auto config = load_text(kTree);
  EXPECT_EQ(limit_of(*config, {{"key2", "anything"}}), 20);
  EXPECT_EQ(limit_of(*config, {{"key2", "value2"}}), 30);
}

TEST(Match, ValueWithoutRuleIsWhitelisted) {
  auto config = load_text(kTree);
  EXPECT_EQ(limit_of(*config, {{"key2", "value3"}}), -1);
}

TEST(Match, NestedRuleAppliesOnlyAtTheRequestsDepth) {
  auto config = load_text(kTree);
  EXPECT_EQ(limit_of(*config, {{"key1", "value1"}, {"subkey1", "x"}}), 5);
  EXPECT_EQ(limit_of(*config, {{"key1", "value1"}, {"subkey1", "subvalue1"}}), 10);
  // Too shallow: key1=value1 has no rule of its own.
  EXPECT_EQ(limit_of(*config, {{"key1", "value1"}}), -1);
  // Too deep: key2's rule is at depth 1.
  EXPECT_EQ(limit_of(*config, {{"key2", "value2"}, {"subkey", "x"}}), -1);
  // key1 with another value matches nothing.
  EXPECT_EQ(limit_of(*config, {{"key1", "other"}, {"subkey1", "x"}}), -1);
}

TEST(Match, ExactBeatsWildcardAndFirstWildcardInFileOrderWins) {
  auto config = load_text(kTree);
  EXPECT_EQ(limit_of(*config, {{"key3", "vab"}}), 42);
  EXPECT_EQ(limit_of(*config, {{"key3", "vax"}}), 40);  // v* comes before va*
  EXPECT_EQ(limit_of(*config, {{"key3", "x"}}), -1);
}

TEST(Match, MatchedValueWithoutChildrenStopsTheWalk) {
  auto config = load_text(kTree);
  // key4=leaf matches the leaf node (no children): the walk stops there and
  // does not fall back to key4's default, whose child would match.
  EXPECT_EQ(limit_of(*config, {{"key4", "leaf"}, {"sub", "x"}}), -1);
  EXPECT_EQ(limit_of(*config, {{"key4", "other"}, {"sub", "x"}}), 52);
  EXPECT_EQ(limit_of(*config, {{"key4", "other"}}), 51);
}

TEST(Match, UnknownDomainAndEmptyDescriptorMatchNothing) {
  auto config = load_text(kTree);
  EXPECT_EQ(limit_of(*config, {{"key2", "x"}}, "other"), -1);
  EXPECT_EQ(limit_of(*config, {}), -1);
}

TEST(Match, ShareThresholdReportsThePatternForTheWildcardEntry) {
  auto config = load_text(R"(
domain: d
descriptors:
  - key: files
    value: files/*
    share_threshold: true
    descriptors:
      - key: user
        rate_limit: {unit: minute, requests_per_unit: 3}
  - key: docs
    value: docs/*
    rate_limit: {unit: minute, requests_per_unit: 3}
)");
  std::vector<EntryView> entries{{"files", "files/a.pdf"}, {"user", "u1"}};
  std::optional<Match> m = match_descriptor(*config->find_domain("d"), entries);
  ASSERT_TRUE(m.has_value());
  ASSERT_EQ(m->shared_patterns.size(), 2u);
  ASSERT_NE(m->shared_patterns[0], nullptr);
  EXPECT_EQ(*m->shared_patterns[0], "files/*");
  EXPECT_EQ(m->shared_patterns[1], nullptr);

  std::vector<EntryView> docs{{"docs", "docs/x"}};
  m = match_descriptor(*config->find_domain("d"), docs);
  ASSERT_TRUE(m.has_value());
  EXPECT_TRUE(m->shared_patterns.empty());  // no share_threshold: each value counts alone
}

TEST(Match, StatKeysFollowDetailedMetricAndValueToMetric) {
  auto config = load_text(R"(
domain: d
descriptors:
  - key: plain
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: detailed
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: route
    value: api/*
    value_to_metric: true
    descriptors:
      - key: method
        rate_limit: {unit: minute, requests_per_unit: 1}
  - key: shared
    value: s*
    share_threshold: true
    descriptors:
      - key: endpoint
        detailed_metric: true
        rate_limit: {unit: minute, requests_per_unit: 1}
)");
  const Domain& d = *config->find_domain("d");
  auto stat = [&](std::vector<EntryView> e) { return match_descriptor(d, e)->stat_key; };
  EXPECT_EQ(stat({{"plain", "x"}}), "d.plain");
  EXPECT_EQ(stat({{"detailed", "x"}}), "d.detailed_x");
  EXPECT_EQ(stat({{"route", "api/users"}, {"method", "GET"}}), "d.route_api/users.method");
  EXPECT_EQ(stat({{"shared", "s1"}, {"endpoint", "e"}}), "d.shared_s*.endpoint_e");
}

}  // namespace
}  // namespace sluice::rls
