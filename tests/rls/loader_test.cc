// Loading descriptor files: what loads, and every kind of rejection with its
// exact file:line:col message.
#include "rls/config_loader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <google/protobuf/struct.pb.h>

#include "test_util.h"

namespace sluice::rls {
namespace {

using ::testing::ElementsAre;
using testing::load_errors;
using testing::load_text;

TEST(Loader, LoadsNestedDescriptorsWithTheirRules) {
  auto config = load_text(R"(domain: messaging
descriptors:
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit:
          unit: day
          requests_per_unit: 5
  - key: to_number
    rate_limit:
      unit: DAY
      requests_per_unit: 100
      name: per_number
)");
  ASSERT_NE(config, nullptr);
  const Domain* d = config->find_domain("messaging");
  ASSERT_NE(d, nullptr);
  ASSERT_EQ(d->root.nodes.size(), 2u);
  const DescriptorNode& marketing = d->root.nodes[0];
  EXPECT_FALSE(marketing.rule.has_value());
  ASSERT_EQ(marketing.children.nodes.size(), 1u);
  const RateLimitRule& five = *marketing.children.nodes[0].rule;
  EXPECT_EQ(five.requests_per_unit, 5u);
  EXPECT_EQ(five.unit, Unit::kDay);
  ASSERT_TRUE(five.limit.has_value());
  EXPECT_EQ(five.limit->algorithm(), Algorithm::kFixedWindow);
  EXPECT_EQ(five.limit->size(), 5u);
  EXPECT_EQ(five.limit->period(), std::chrono::hours(24));
  EXPECT_EQ(marketing.children.nodes[0].stat_key, "messaging.message_type_marketing.to_number");
  const RateLimitRule& hundred = *d->root.nodes[1].rule;
  EXPECT_EQ(hundred.name, "per_number");
  EXPECT_EQ(hundred.unit, Unit::kDay);  // unit names are case-insensitive
}

TEST(Loader, UnitsHaveEnvoyRatelimitLengths) {
  auto config = load_text(R"(domain: d
descriptors:
  - {key: w, rate_limit: {unit: week, requests_per_unit: 1}}
  - {key: m, rate_limit: {unit: month, requests_per_unit: 1}}
  - {key: y, rate_limit: {unit: year, requests_per_unit: 1}}
  - {key: x, rate_limit: {unit: minute, requests_per_unit: 1, unit_multiplier: 5}}
)");
  const auto& nodes = config->find_domain("d")->root.nodes;
  EXPECT_EQ(nodes[0].rule->limit->period(), std::chrono::hours(24 * 7));
  EXPECT_EQ(nodes[1].rule->limit->period(), std::chrono::hours(24 * 30));
  EXPECT_EQ(nodes[2].rule->limit->period(), std::chrono::hours(24 * 365));
  EXPECT_EQ(nodes[3].rule->limit->period(), std::chrono::minutes(5));
  EXPECT_EQ(nodes[3].rule->unit, Unit::kMinute);
}

TEST(Loader, ZeroRequestsPerUnitRefusesEverythingWithoutALimit) {
  auto config = load_text(R"(domain: d
descriptors:
  - key: remote_address
    value: 50.0.0.5
    rate_limit:
      unit: second
      requests_per_unit: 0
)");
  const RateLimitRule& rule = *config->find_domain("d")->root.nodes[0].rule;
  EXPECT_FALSE(rule.limit.has_value());
  EXPECT_FALSE(rule.unlimited);
  EXPECT_EQ(rule.window, std::chrono::seconds(1));
}

TEST(Loader, QuirksEnvoyRatelimitAcceptsAreAccepted) {
  // `rate_limit:` with no body is no rule; unlimited ignores an invalid unit;
  // a bare key is a value-less default; metadata holds any keys.
  auto config = load_text(R"(domain: d
descriptors:
  - key: a
    rate_limit:
  - key: b
    rate_limit:
      unlimited: true
      unit: fortnight
  - key: c
    metadata:
      service_with_quota:
        name: svc
        weight: 3
      anything: [1, two]
    rate_limit: {unit: second, requests_per_unit: 1}
)");
  ASSERT_NE(config, nullptr);
  const auto& nodes = config->find_domain("d")->root.nodes;
  EXPECT_FALSE(nodes[0].rule.has_value());
  EXPECT_TRUE(nodes[1].rule->unlimited);
  ASSERT_TRUE(nodes[2].metadata != nullptr);  // (printing a Struct trips GCC 12 at -O2)
  const auto& svc = nodes[2].metadata->fields().at("service_with_quota").struct_value();
  EXPECT_EQ(svc.fields().at("name").string_value(), "svc");
  EXPECT_EQ(svc.fields().at("weight").number_value(), 3);
}

TEST(Loader, KnownKeyInTheWrongPlaceIsIgnoredWithAWarning) {
  std::vector<RlsFile> files{RlsFile{"w.yaml", R"(domain: d
descriptors:
  - key: k
    unit: second
    rate_limit: {unit: second, requests_per_unit: 1}
)"}};
  LoadResult result = load_rls_config(files);
  ASSERT_TRUE(result.ok()) << result.error_text();
  EXPECT_THAT(testing::texts(result.warnings),
              ElementsAre("w.yaml:4:5: descriptors[0].unit: has no effect here and is ignored"));
  EXPECT_EQ(result.config->warnings, result.warnings);
}

// A known key in the wrong place holding a list (`replaces` beside `key`) is
// ignored, its elements still checked as envoyproxy/ratelimit checks them.
// The list was once walked through a dangling reference (a range-for over
// `*sequence(...)`, heap-use-after-free under ASan); clang's -Wdangling-gsl in
// the fuzz build and GCC's Release build both flagged it. No test reached it.
TEST(Loader, KnownKeyInTheWrongPlaceHoldingAListIsCheckedAndIgnored) {
  std::vector<RlsFile> files{RlsFile{"w.yaml", R"(domain: d
descriptors:
  - key: k
    replaces: [{name: a}, {name: b}]
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: j
    replaces: [{name: a}, 3]
)"}};
  LoadResult result = load_rls_config(files);
  EXPECT_THAT(testing::texts(result.errors),
              ElementsAre("w.yaml:7:27: descriptors[1].replaces[1]: a list may only hold "
                          "mappings, got \"3\""));
  EXPECT_THAT(
      testing::texts(result.warnings),
      ElementsAre("w.yaml:4:5: descriptors[0].replaces: has no effect here and is ignored",
                  "w.yaml:7:5: descriptors[1].replaces: has no effect here and is ignored"));
}

TEST(Loader, SluiceAlgorithmsWithAnyPeriod) {
  auto config = load_text(R"(domain: d
descriptors:
  - key: tb
    rate_limit: {algorithm: token_bucket, capacity: 10, refill_rate: 1/s}
  - key: sw
    rate_limit: {algorithm: sliding_window, limit: 100, window: 90s}
  - key: gcra
    rate_limit: {algorithm: gcra, requests_per_unit: 60, unit: minute}
  - key: log
    rate_limit: {algorithm: sliding_log, requests_per_unit: 3, unit: second, unit_multiplier: 10}
  - key: fw
    rate_limit: {algorithm: fixed_window, limit: 7, window: 2w, name: fortnightly, block: 1h}
  - key: envoy_lockout
    rate_limit: {unit: minute, requests_per_unit: 5, block: 30m}
)");
  ASSERT_NE(config, nullptr);
  const auto& nodes = config->find_domain("d")->root.nodes;
  const RateLimitRule& tb = *nodes[0].rule;
  EXPECT_TRUE(tb.sluice_algorithm);
  EXPECT_EQ(tb.limit->algorithm(), Algorithm::kTokenBucket);
  EXPECT_EQ(tb.limit->size(), 10u);
  EXPECT_EQ(tb.limit->period(), std::chrono::seconds(10));  // empty to full
  EXPECT_EQ(tb.requests_per_unit, 10u);
  EXPECT_EQ(tb.unit, Unit::kUnknown);  // 10 s is no unit
  const RateLimitRule& sw = *nodes[1].rule;
  EXPECT_EQ(sw.limit->algorithm(), Algorithm::kSlidingWindow);
  EXPECT_EQ(sw.limit->period(), std::chrono::seconds(90));
  const RateLimitRule& gcra = *nodes[2].rule;
  EXPECT_EQ(gcra.limit->algorithm(), Algorithm::kGcra);
  EXPECT_EQ(gcra.limit->size(), 60u);
  EXPECT_EQ(gcra.unit, Unit::kMinute);
  EXPECT_EQ(nodes[3].rule->limit->algorithm(), Algorithm::kSlidingLog);
  EXPECT_EQ(nodes[3].rule->limit->period(), std::chrono::seconds(10));
  EXPECT_EQ(nodes[4].rule->limit->period(), std::chrono::hours(24 * 14));
  EXPECT_EQ(nodes[4].rule->name, "fortnightly");
  // block: a lockout once the limit denies, with either way of writing it.
  EXPECT_EQ(nodes[4].rule->limit->block(), std::chrono::hours(1));
  EXPECT_EQ(nodes[0].rule->limit->block(), Nanos{0});
  EXPECT_EQ(nodes[5].rule->limit->describe(), "fixed_window limit=5 window=1m block=30m");
}

// --- Rejections: one kind per test, exact messages ---

TEST(LoaderRejects, MisspelledKeysWithAHint) {
  EXPECT_THAT(
      load_errors(R"(domain: d
descriptors:
  - key: k
    ratelimit:
      unit: second
      requests_per_unit: 1
)"),
      ElementsAre(
          "bad.yaml:4:5: descriptors[0].ratelimit: unknown key; did you mean `rate_limit`?"));
  EXPECT_THAT(load_errors(R"(domain: d
descriptors:
  - key: k
    rate_limit:
      unit: second
      requestsperunit: 1
)"),
              ElementsAre("bad.yaml:6:7: descriptors[0].rate_limit.requestsperunit: unknown key; "
                          "did you mean `requests_per_unit`?"));
  EXPECT_THAT(load_errors("domian: d\n"),
              ElementsAre("bad.yaml:1:1: domian: unknown key; did you mean `domain`?",
                          "bad.yaml:1:1: config file cannot have empty domain"));
  EXPECT_THAT(load_errors("domain: d\nfoo: 1\n"),
              ElementsAre("bad.yaml:2:1: foo: unknown key (known keys: domain, descriptors)"));
}

TEST(LoaderRejects, BadUnit) {
  EXPECT_THAT(load_errors(R"(domain: d
descriptors:
  - key: k
    rate_limit:
      unit: fortnight
      requests_per_unit: 1
)"),
              ElementsAre("bad.yaml:5:13: descriptors[0].rate_limit.unit: invalid rate limit unit "
                          "'fortnight' (valid units: "
                          "second, minute, hour, day, week, month, year)"));
  EXPECT_THAT(
      load_errors(R"(domain: d
descriptors:
  - key: k
    rate_limit:
      requests_per_unit: 1
)"),
      ElementsAre(
          "bad.yaml:5:7: descriptors[0].rate_limit: invalid rate limit unit '' (valid units: "
          "second, minute, hour, day, week, month, year)"));
  EXPECT_THAT(load_errors(R"(domain: d
descriptors:
  - key: k
    rate_limit: {unit: unknown, requests_per_unit: 1}
)"),
              ElementsAre("bad.yaml:4:24: descriptors[0].rate_limit.unit: invalid rate limit unit "
                          "'unknown' (valid units: "
                          "second, minute, hour, day, week, month, year)"));
}

TEST(LoaderRejects, DuplicateDomainAcrossFiles) {
  std::vector<RlsFile> files{RlsFile{"a.yaml", "domain: d\n"},
                             RlsFile{"b.yaml", "# again\ndomain: d\n"}};
  LoadResult result = load_rls_config(files);
  EXPECT_EQ(result.config, nullptr);
  EXPECT_THAT(testing::texts(result.errors),
              ElementsAre("b.yaml:2:9: domain: duplicate domain 'd' (first in a.yaml:1:9)"));
}

TEST(LoaderRejects, DuplicateDescriptors) {
  EXPECT_THAT(load_errors(R"(domain: d
descriptors:
  - key: k
    value: v
  - key: k
    value: v
    rate_limit: {unit: second, requests_per_unit: 1}
)"),
              ElementsAre("bad.yaml:5:5: descriptors[1]: duplicate descriptor composite key "
                          "'d.k_v' (first at bad.yaml:3:5)"));
  // Nested, and two spellings of one composite key ("a_b_c").
  EXPECT_THAT(load_errors(R"(domain: d
descriptors:
  - key: top
    descriptors:
      - key: a
        value: b_c
      - key: a_b
        value: c
)"),
              ElementsAre("bad.yaml:7:9: descriptors[0].descriptors[1]: duplicate descriptor "
                          "composite key 'd.top.a_b_c' (first at bad.yaml:5:9)"));
}

TEST(LoaderRejects, EmptyDomain) {
  EXPECT_THAT(load_errors("domain: \"\"\ndescriptors: []\n"),
              ElementsAre("bad.yaml:1:9: domain: config file cannot have empty domain"));
  EXPECT_THAT(load_errors("descriptors: []\n"),
              ElementsAre("bad.yaml:1:1: config file cannot have empty domain"));
  EXPECT_THAT(load_errors(""), ElementsAre("bad.yaml:1:1: config file cannot have empty domain"));
}

TEST(LoaderRejects, EmptyKey) {
  EXPECT_THAT(load_errors(R"(domain: d
descriptors:
  - value: v
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: ""
)"),
              ElementsAre("bad.yaml:3:5: descriptors[0]: descriptor has empty key",
                          "bad.yaml:5:5: descriptors[1]: descriptor has empty key"));
}

TEST(LoaderRejects, UnlimitedWithAUnit) {
  EXPECT_THAT(load_errors(R"(domain: d
descriptors:
  - key: ldap
    rate_limit:
      unlimited: true
      unit: second
)"),
              ElementsAre("bad.yaml:6:13: descriptors[0].rate_limit.unit: should not specify rate "
                          "limit unit when unlimited"));
}

TEST(LoaderRejects, ReplacesEmptyOrNamingItself) {
  EXPECT_THAT(load_errors(R"(domain: d
descriptors:
  - key: k
    rate_limit:
      name: mine
      unit: second
      requests_per_unit: 1
      replaces:
        - name: ""
        - name:
        - name: mine
)"),
              ElementsAre("bad.yaml:9:11: descriptors[0].rate_limit.replaces[0]: should not have "
                          "an empty replaces entry",
                          "bad.yaml:10:11: descriptors[0].rate_limit.replaces[1]: should not have "
                          "an empty replaces entry",
                          "bad.yaml:11:11: descriptors[0].rate_limit.replaces[2]: replaces should "
                          "not contain name of same descriptor"));
}

TEST(LoaderRejects, MalformedYaml) {
  EXPECT_THAT(load_errors("domain: d\ndescriptors:\n  - key: [a, b\n"),
              ElementsAre("bad.yaml:4:1: YAML syntax error: end of sequence flow not found"));
  EXPECT_THAT(load_errors("domain: d\n  bad indent: x\n"),
              ElementsAre("bad.yaml:2:13: YAML syntax error: illegal map value"));
}

// A ',' outside [...] or {...} made yaml-cpp read empty documents forever
// (the load never returned). Found by fuzz/rls_config.cc.
TEST(LoaderRejects, AStrayCommaIsASyntaxErrorNotAHang) {
  EXPECT_THAT(load_errors("[domain: d] ,"),
              ElementsAre("bad.yaml:1:13: YAML syntax error: a ',' outside a flow collection "
                          "([...] or {...})"));
}

TEST(LoaderRejects, NonStringKeysListsOfNonMapsAndFloats) {
  EXPECT_THAT(load_errors("domain: d\n0.25: x\n"),
              ElementsAre("bad.yaml:2:1: key is not of type string: 0.25"));
  EXPECT_THAT(
      load_errors("domain: d\ndescriptors:\n  - a\n"),
      ElementsAre("bad.yaml:3:5: descriptors[0]: a list may only hold mappings, got \"a\""));
  EXPECT_THAT(load_errors("domain: d\ndescriptors:\n  - key: k\n    value: 1.5\n"),
              ElementsAre("bad.yaml:4:12: descriptors[0].value: floating-point value \"1.5\" is "
                          "not allowed (quote it to make it a string)"));
  // Quoted, it is a string value.
  EXPECT_NE(load_text("domain: d\ndescriptors:\n  - key: k\n    value: \"1.5\"\n"), nullptr);
}

TEST(LoaderRejects, WrongTypes) {
  EXPECT_THAT(
      load_errors(R"(domain: d
descriptors:
  - key: k
    shadow_mode: maybe
    rate_limit:
      unit: second
      requests_per_unit: -1
  - key: l
    rate_limit:
      unit: [second]
      requests_per_unit: 4294967296
  - key: m
    descriptors: {key: n}
  - key: o
    rate_limit: 5
)"),
      ElementsAre("bad.yaml:4:18: descriptors[0].shadow_mode: must be true or false, got \"maybe\"",
                  "bad.yaml:7:26: descriptors[0].rate_limit.requests_per_unit: must be an unsigned "
                  "32-bit integer, got \"-1\"",
                  "bad.yaml:10:13: descriptors[1].rate_limit.unit: must be a string, got a list",
                  "bad.yaml:11:26: descriptors[1].rate_limit.requests_per_unit: must be an "
                  "unsigned 32-bit integer, got \"4294967296\"",
                  "bad.yaml:13:18: descriptors[2].descriptors: must be a list of descriptors, got "
                  "a mapping",
                  "bad.yaml:15:17: descriptors[3].rate_limit: must be a mapping, got \"5\""));
}

TEST(LoaderRejects, ShareThresholdWithoutWildcard) {
  EXPECT_THAT(
      load_errors(R"(domain: d
descriptors:
  - key: files
    value: files/a
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 1}
)"),
      ElementsAre("bad.yaml:5:22: descriptors[0].share_threshold: share_threshold can only be used "
                  "with wildcard values (containing '*'), but found key 'files_files/a'"));
}

TEST(LoaderRejects, DuplicateMapKeys) {
  EXPECT_THAT(load_errors("domain: d\ndescriptors:\n  - key: k\n    key: j\n"),
              ElementsAre("bad.yaml:4:5: descriptors[0].key: duplicate key (first set on line 3)"));
}

TEST(LoaderRejects, ReportsEveryErrorNotOnlyTheFirst) {
  EXPECT_THAT(
      load_errors(R"(domain: d
descriptors:
  - key: a
    rate_limit: {unit: sec, requests_per_unit: 1}
  - key: b
    rate_limt: {}
  - value: c
)"),
      ElementsAre("bad.yaml:4:24: descriptors[0].rate_limit.unit: invalid rate limit unit 'sec' "
                  "(valid units: "
                  "second, minute, hour, day, week, month, year)",
                  "bad.yaml:6:5: descriptors[1].rate_limt: unknown key; did you mean `rate_limit`?",
                  "bad.yaml:7:5: descriptors[2]: descriptor has empty key"));
}

TEST(LoaderRejects, SluiceExtensionMistakes) {
  EXPECT_THAT(
      load_errors(R"(domain: d
descriptors:
  - key: a
    rate_limit: {algorithm: leaky_bucket, capacity: 1, refill_rate: 1/s}
  - key: b
    rate_limit: {capacity: 10, unit: second, requests_per_unit: 1}
  - key: c
    rate_limit: {algorithm: token_bucket, limit: 10, window: 1m}
  - key: d
    rate_limit: {algorithm: token_bucket, capacity: 10}
  - key: e
    rate_limit: {algorithm: token_bucket, capacity: 10, refill_rate: fast}
  - key: f
    rate_limit: {algorithm: sliding_window, limit: 0, window: 1m}
  - key: g
    rate_limit: {algorithm: gcra, unlimited: true}
  - key: h
    rate_limit: {algorithm: fixed_window, limit: 5, window: 1m, unit: second}
  - key: i
    algorithm: token_bucket
  - key: j
    rate_limit: {algorithm: sliding_window, limit: 5, window: 90}
)"),
      ElementsAre(
          "bad.yaml:4:29: descriptors[0].rate_limit.algorithm: must be one of token_bucket, gcra, "
          "fixed_window, sliding_log, sliding_window, concurrency, got \"leaky_bucket\"; did you "
          "mean `gcra`?",
          "bad.yaml:6:28: descriptors[1].rate_limit.capacity: needs `algorithm` (token_bucket, "
          "gcra, fixed_window, sliding_log or sliding_window)",
          "bad.yaml:8:50: descriptors[2].rate_limit.limit: token_bucket takes capacity and "
          "refill_rate (or `requests_per_unit` and `unit`), not limit (limit and window are for "
          "fixed_window, sliding_log and sliding_window)",
          "bad.yaml:10:17: descriptors[3].rate_limit: token_bucket needs `refill_rate` (or "
          "`requests_per_unit` and `unit`)",
          "bad.yaml:12:70: descriptors[4].rate_limit.refill_rate: must be a rate like 10/s, 100/m, "
          "1000/h, 5/d or 10/2s, got \"fast\" (write a count, '/', and a unit or a duration)",
          "bad.yaml:14:52: descriptors[5].rate_limit.limit: must be a positive integer, got \"0\"",
          "bad.yaml:16:46: descriptors[6].rate_limit.unlimited: cannot be combined with "
          "`algorithm`",
          "bad.yaml:18:17: descriptors[7].rate_limit: use either the limit's own fields (capacity "
          "and refill_rate, or limit and window) or `requests_per_unit` and `unit`, not both",
          "bad.yaml:20:5: descriptors[8].algorithm: valid only inside rate_limit",
          "bad.yaml:22:63: descriptors[9].rate_limit.window: must be a duration like 500ms, 1s, "
          "1m, 1h, 1d or 1w, got \"90\" (the unit is missing: add ms, s, m, h, d or w)"));
}

TEST(LoaderRejects, ConcurrencyWhichEnvoyCouldNeverGiveBack) {
  EXPECT_THAT(load_errors(R"(domain: d
descriptors:
  - key: a
    rate_limit: {algorithm: concurrency, unit: second, requests_per_unit: 4}
)"),
              ElementsAre("bad.yaml:4:29: descriptors[0].rate_limit.algorithm: concurrency is "
                          "not available to Envoy's rate limit API: Envoy never says when a "
                          "request ends, so its slot could not be given back; use it on a route "
                          "of `sluice serve` or a policy of /v1/check"));
}

// --- Folders ---

TEST(LoaderDir, LoadsEveryYamlFileInPathOrder) {
  LoadResult result = load_rls_config_dir(testing::testdata("dir"));
  ASSERT_TRUE(result.ok()) << result.error_text();
  EXPECT_EQ(result.config->domains.size(), 2u);
  EXPECT_NE(result.config->find_domain("first"), nullptr);
  EXPECT_NE(result.config->find_domain("second"), nullptr);
  ASSERT_EQ(result.config->files.size(), 2u);  // .hidden.yaml and notes.txt are skipped
  EXPECT_EQ(result.config->files[0], testing::testdata("dir/a.yaml"));
  EXPECT_EQ(result.config->files[1], testing::testdata("dir/sub/b.yml"));
}

TEST(LoaderDir, MissingFolderIsAnError) {
  LoadResult result = load_rls_config_dir(testing::testdata("no-such-folder"));
  EXPECT_FALSE(result.ok());
  EXPECT_EQ(result.config, nullptr);
  ASSERT_EQ(result.errors.size(), 1u);
  EXPECT_EQ(result.errors[0].text().rfind(
                testing::testdata("no-such-folder") + ": cannot read the folder", 0),
            0u);
}

TEST(LoaderDir, MergedDomainsStillRejectDuplicateDescriptors) {
  std::vector<RlsFile> files{
      RlsFile{"a.yaml", "domain: d\ndescriptors:\n  - key: k\n"},
      RlsFile{"b.yaml", "domain: d\ndescriptors:\n  - key: j\n  - key: k\n"}};
  LoadOptions options;
  options.merge_domains = true;
  LoadResult result = load_rls_config(files, options);
  EXPECT_THAT(testing::texts(result.errors),
              ElementsAre("b.yaml:4:5: descriptors[1]: duplicate descriptor composite key 'd.k' "
                          "(first at a.yaml:3:5)"));
  files.pop_back();
  files.push_back(RlsFile{"b.yaml", "domain: d\ndescriptors:\n  - key: j\n"});
  result = load_rls_config(files, options);
  ASSERT_TRUE(result.ok()) << result.error_text();
  EXPECT_EQ(result.config->find_domain("d")->root.nodes.size(), 2u);
}

}  // namespace
}  // namespace sluice::rls
