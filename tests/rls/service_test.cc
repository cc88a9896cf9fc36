// ShouldRateLimit through a real gRPC client: every semantic of the service.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rls_fixture.h"
#include "test_util.h"

namespace sluice::rls {
namespace {

using namespace std::chrono_literals;
using ::testing::ElementsAre;
using testing::Entries;
using testing::load_text;
using testing::OK;
using testing::OVER;
using testing::request;
using testing::RlsHarness;
namespace pb = testing::pb;

constexpr char kConfig[] = R"(domain: d
descriptors:
  - key: ip
    rate_limit: {unit: second, requests_per_unit: 3}
  - key: ip
    value: 10.0.0.9
    rate_limit: {unit: second, requests_per_unit: 1, name: vip}
  - key: ip
    value: 10.0.0.1
  - key: tenant
    value: acme
    descriptors:
      - key: user
        rate_limit: {unit: minute, requests_per_unit: 2}
  - key: path
    value: /api/*
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: host
    value: "*.example.com"
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: rpc
    value: svc*ep*rpc
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: files
    value: files/*
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: blocked
    rate_limit: {unit: hour, requests_per_unit: 0}
  - key: ldap
    rate_limit: {unlimited: true}
  - key: soft
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: a_b
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: bucket
    rate_limit: {algorithm: token_bucket, capacity: 2, refill_rate: 1/s, name: burst}
  - key: slide
    rate_limit: {algorithm: sliding_window, limit: 4, window: 90s}
  - key: month
    rate_limit: {unit: month, requests_per_unit: 1}
)";

pb::RateLimitRequest one(const std::string& key, const std::string& value, uint32_t hits = 0) {
  return request("d", {Entries{{key, value}}}, hits);
}

TEST(RlsService, UnknownDomainOrNoMatchIsOkWithoutALimit) {
  RlsHarness rls(load_text(kConfig));
  for (const pb::RateLimitRequest& r :
       {request("other", {Entries{{"ip", "1.2.3.4"}}}), one("nothing", "x")}) {
    pb::RateLimitResponse response = rls.call(r);
    EXPECT_EQ(response.overall_code(), OK);
    ASSERT_EQ(response.statuses_size(), 1);
    EXPECT_EQ(response.statuses(0).code(), OK);
    EXPECT_FALSE(response.statuses(0).has_current_limit());
    EXPECT_EQ(response.statuses(0).limit_remaining(), 0u);
  }
  EXPECT_EQ(rls.store.size(), 0u);
}

TEST(RlsService, FixedWindowOfOneUnitAlignedToTheEpoch) {
  RlsHarness rls(load_text(kConfig));
  rls.clock.advance(250ms);  // 0.75 s left in this second
  const pb::RateLimitRequest r = one("ip", "1.2.3.4");
  for (uint32_t remaining : {2u, 1u, 0u}) {
    pb::RateLimitResponse response = rls.call(r);
    EXPECT_EQ(response.overall_code(), OK);
    const auto& s = response.statuses(0);
    EXPECT_EQ(s.code(), OK);
    EXPECT_EQ(s.current_limit().requests_per_unit(), 3u);
    EXPECT_EQ(s.current_limit().unit(), pb::RateLimitResponse::RateLimit::SECOND);
    EXPECT_EQ(s.limit_remaining(), remaining);
    EXPECT_EQ(s.duration_until_reset().seconds(), 1);  // 0.75 s, rounded up
    EXPECT_EQ(s.duration_until_reset().nanos(), 0);
  }
  pb::RateLimitResponse over = rls.call(r);
  EXPECT_EQ(over.overall_code(), OVER);
  EXPECT_EQ(over.statuses(0).code(), OVER);
  EXPECT_EQ(over.statuses(0).limit_remaining(), 0u);
  EXPECT_EQ(over.statuses(0).duration_until_reset().seconds(), 1);
  rls.clock.advance(749ms);  // 1 ms before the next second
  EXPECT_EQ(rls.call(r).overall_code(), OVER);
  rls.clock.advance(1ms);
  EXPECT_EQ(rls.allowed(r, 4), 3);
}

TEST(RlsService, ValuelessDescriptorIsAPerValueDefault) {
  RlsHarness rls(load_text(kConfig));
  EXPECT_EQ(rls.allowed(one("ip", "1.1.1.1"), 5), 3);
  EXPECT_EQ(rls.allowed(one("ip", "2.2.2.2"), 5), 3);
}

TEST(RlsService, SpecificValueOverridesTheDefaultAndItsNameIsReported) {
  RlsHarness rls(load_text(kConfig));
  pb::RateLimitResponse first = rls.call(one("ip", "10.0.0.9"));
  EXPECT_EQ(first.statuses(0).current_limit().name(), "vip");
  EXPECT_EQ(first.statuses(0).current_limit().requests_per_unit(), 1u);
  EXPECT_EQ(rls.call(one("ip", "10.0.0.9")).overall_code(), OVER);
}

TEST(RlsService, ValueWithoutRateLimitIsWhitelisted) {
  RlsHarness rls(load_text(kConfig));
  for (int i = 0; i < 10; ++i) {
    pb::RateLimitResponse response = rls.call(one("ip", "10.0.0.1"));
    EXPECT_EQ(response.overall_code(), OK);
    EXPECT_FALSE(response.statuses(0).has_current_limit());
  }
}

TEST(RlsService, NestedDescriptorsMatchAtTheRequestsDepth) {
  RlsHarness rls(load_text(kConfig));
  const auto nested = request("d", {Entries{{"tenant", "acme"}, {"user", "u1"}}});
  EXPECT_EQ(rls.allowed(nested, 3), 2);
  const auto nested2 = request("d", {Entries{{"tenant", "acme"}, {"user", "u2"}}});
  EXPECT_EQ(rls.allowed(nested2, 3), 2);
  // Shallower or deeper than the rule: no limit.
  EXPECT_EQ(rls.allowed(one("tenant", "acme"), 5), 5);
  EXPECT_EQ(rls.allowed(request("d", {Entries{{"tenant", "acme"}, {"user", "u1"}, {"x", "y"}}}), 5),
            5);
}

TEST(RlsService, WildcardsAnywhereInAValueEachValueItsOwnCounter) {
  RlsHarness rls(load_text(kConfig));
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, std::string>>{{"path", "/api/users"},
                                                        {"path", "/api/orders"},
                                                        {"host", "a.example.com"},
                                                        {"host", "b.example.com"},
                                                        {"rpc", "svc-a-ep-b-rpc"},
                                                        {"rpc", "svc-x-ep-y-rpc"}}) {
    EXPECT_THAT(rls.codes(one(key, value), 2), ElementsAre(OK, OVER)) << key << "=" << value;
  }
  EXPECT_EQ(rls.allowed(one("host", "example.com"), 3), 3);  // no match
  EXPECT_EQ(rls.allowed(one("rpc", "svc-rpc"), 3), 3);
}

TEST(RlsService, ShareThresholdMakesAllMatchingValuesShareOneCounter) {
  RlsHarness rls(load_text(kConfig));
  EXPECT_EQ(rls.call(one("files", "files/a.pdf")).overall_code(), OK);
  EXPECT_EQ(rls.call(one("files", "files/b.csv")).overall_code(), OK);
  EXPECT_EQ(rls.call(one("files", "files/c.txt")).overall_code(), OVER);
  EXPECT_EQ(rls.call(one("files", "files/a.pdf")).overall_code(), OVER);
}

TEST(RlsService, RequestsPerUnitZeroRefusesEverything) {
  RlsHarness rls(load_text(kConfig));
  rls.clock.advance(10min);
  pb::RateLimitResponse response = rls.call(one("blocked", "x"));
  EXPECT_EQ(response.overall_code(), OVER);
  EXPECT_EQ(response.statuses(0).current_limit().requests_per_unit(), 0u);
  EXPECT_EQ(response.statuses(0).duration_until_reset().seconds(), 50 * 60);
  EXPECT_EQ(rls.store.size(), 0u);
}

TEST(RlsService, UnlimitedIsOkWithMaxRemainingAndNoLimit) {
  RlsHarness rls(load_text(kConfig));
  for (int i = 0; i < 5; ++i) {
    pb::RateLimitResponse response = rls.call(one("ldap", "bind"));
    EXPECT_EQ(response.overall_code(), OK);
    EXPECT_EQ(response.statuses(0).code(), OK);
    EXPECT_FALSE(response.statuses(0).has_current_limit());
    EXPECT_EQ(response.statuses(0).limit_remaining(), 4294967295u);
  }
  EXPECT_EQ(rls.store.size(), 0u);
  EXPECT_EQ(rls.service.counters().unlimited.load(), 5u);
}

TEST(RlsService, ShadowModeAnswersOkButCountsTheOverLimit) {
  RlsHarness rls(load_text(kConfig));
  pb::RateLimitResponse first = rls.call(one("soft", "x"));
  EXPECT_EQ(first.statuses(0).limit_remaining(), 0u);
  for (int i = 0; i < 3; ++i) {
    pb::RateLimitResponse response = rls.call(one("soft", "x"));
    EXPECT_EQ(response.overall_code(), OK);
    EXPECT_EQ(response.statuses(0).code(), OK);
    EXPECT_EQ(response.statuses(0).limit_remaining(), 0u);
    EXPECT_EQ(response.statuses(0).current_limit().requests_per_unit(), 1u);
  }
  EXPECT_EQ(rls.service.counters().shadow_mode.load(), 3u);
  EXPECT_EQ(rls.service.counters().over_limit.load(), 3u);
  EXPECT_EQ(rls.service.counters().within_limit.load(), 1u);
  EXPECT_EQ(rls.service.counters().calls_over_limit.load(), 0u);
}

// What on_detailed_result reported, as "descriptor result" lines.
struct DetailedLog {
  std::mutex mutex;
  std::vector<std::string> lines;

  RlsOptions options(double near_limit_ratio) {
    RlsOptions o;
    o.near_limit_ratio = near_limit_ratio;
    o.on_detailed_result = [this](const DetailedResult& r) {
      const char* result = r.result == DetailedResult::Kind::kOk          ? "ok"
                           : r.result == DetailedResult::Kind::kNearLimit ? "near_limit"
                                                                          : "over_limit";
      std::lock_guard lock(mutex);
      lines.push_back(std::string(r.domain) + " " + std::string(r.descriptor) + " " + result);
    };
    return o;
  }
};

constexpr char kDetailedConfig[] = R"(domain: d
descriptors:
  - key: tenant
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: team
    descriptors:
      - key: user
        detailed_metric: true
        shadow_mode: true
        rate_limit: {unit: hour, requests_per_unit: 2}
  - key: plain
    rate_limit: {unit: minute, requests_per_unit: 1}
)";

TEST(RlsService, DetailedMetricReportsOkNearLimitAndOverLimitPerDescriptorValue) {
  DetailedLog log;
  RlsHarness rls(load_text(kDetailedConfig), log.options(0.8));
  // 10 a minute, near limit past floor(0.8 * 10) = 8 used: the 9th and 10th.
  EXPECT_EQ(rls.allowed(one("tenant", "acme"), 11), 10);
  EXPECT_EQ(rls.call(one("tenant", "globex")).overall_code(), OK);
  // Not detailed: not reported. Check only (hits_addend 0): not reported.
  EXPECT_EQ(rls.call(one("plain", "x")).overall_code(), OK);
  pb::RateLimitRequest check = one("tenant", "acme");
  check.mutable_descriptors(0)->mutable_hits_addend()->set_value(0);
  EXPECT_EQ(rls.call(check).overall_code(), OK);
  // Shadow mode answers OK but the descriptor is reported over its limit.
  const pb::RateLimitRequest nested = request("d", {Entries{{"team", "core"}, {"user", "ann"}}});
  EXPECT_EQ(rls.codes(nested, 3), (std::vector<testing::Code>{OK, OK, OK}));

  std::vector<std::string> expected(8, "d tenant_acme ok");
  expected.insert(expected.end(), 2, "d tenant_acme near_limit");
  expected.push_back("d tenant_acme over_limit");
  expected.push_back("d tenant_globex ok");
  // 2 an hour: floor(0.8 * 2) = 1 used is the threshold, so the 2nd is near.
  expected.push_back("d team_core.user_ann ok");
  expected.push_back("d team_core.user_ann near_limit");
  expected.push_back("d team_core.user_ann over_limit");
  std::lock_guard lock(log.mutex);
  EXPECT_EQ(log.lines, expected);
}

TEST(RlsService, NearLimitRatioIsConfigurable) {
  DetailedLog log;
  RlsHarness rls(load_text(kDetailedConfig), log.options(0.5));
  EXPECT_EQ(rls.allowed(one("tenant", "acme"), 10), 10);
  std::vector<std::string> expected(5, "d tenant_acme ok");
  expected.insert(expected.end(), 5, "d tenant_acme near_limit");
  std::lock_guard lock(log.mutex);
  EXPECT_EQ(log.lines, expected);
}

TEST(RlsService, OverallIsOverIfAnyDescriptorIsOverAndEachIsChargedOnItsOwn) {
  RlsHarness rls(load_text(kConfig));
  const auto both = request("d", {Entries{{"ip", "10.0.0.9"}}, Entries{{"ip", "3.3.3.3"}}});
  pb::RateLimitResponse first = rls.call(both);
  EXPECT_EQ(first.overall_code(), OK);
  pb::RateLimitResponse second = rls.call(both);
  EXPECT_EQ(second.overall_code(), OVER);
  EXPECT_EQ(second.statuses(0).code(), OVER);
  EXPECT_EQ(second.statuses(1).code(), OK);  // still charged: 3 -> 1 left
  EXPECT_EQ(second.statuses(1).limit_remaining(), 1u);
  // The over-limit descriptor was not charged by the refusal.
  rls.clock.advance(1s);
  EXPECT_EQ(rls.call(one("ip", "10.0.0.9")).overall_code(), OK);
}

TEST(RlsService, HitsAddendFromTheRequestAndOverriddenPerDescriptor) {
  RlsHarness rls(load_text(kConfig));
  pb::RateLimitResponse two = rls.call(one("ip", "4.4.4.4", /*hits=*/2));
  EXPECT_EQ(two.statuses(0).limit_remaining(), 1u);
  // 2 more do not fit in the 1 left: refused, and nothing is charged.
  EXPECT_EQ(rls.call(one("ip", "4.4.4.4", 2)).overall_code(), OVER);

  pb::RateLimitRequest r =
      request("d", {Entries{{"ip", "5.5.5.5"}}, Entries{{"ip", "6.6.6.6"}}}, 2);
  r.mutable_descriptors(1)->mutable_hits_addend()->set_value(3);
  pb::RateLimitResponse response = rls.call(r);
  EXPECT_EQ(response.statuses(0).limit_remaining(), 1u);  // request's 2
  EXPECT_EQ(response.statuses(1).limit_remaining(), 0u);  // descriptor's 3

  // hits_addend 0 on a descriptor: check only, nothing charged.
  pb::RateLimitRequest check = one("ip", "4.4.4.4");
  check.mutable_descriptors(0)->mutable_hits_addend()->set_value(0);
  for (int i = 0; i < 3; ++i) {
    pb::RateLimitResponse c = rls.call(check);
    EXPECT_EQ(c.overall_code(), OK);
    EXPECT_EQ(c.statuses(0).current_limit().requests_per_unit(), 3u);
  }
  EXPECT_EQ(rls.call(one("ip", "4.4.4.4")).statuses(0).limit_remaining(), 0u);
  pb::RateLimitRequest check_blocked = one("blocked", "x");
  check_blocked.mutable_descriptors(0)->mutable_hits_addend()->set_value(0);
  EXPECT_EQ(rls.call(check_blocked).overall_code(), OK);  // 0 hits exceed nothing

  // More hits than the limit can ever hold: over, not an error.
  EXPECT_EQ(rls.call(one("ip", "7.7.7.7", 4)).overall_code(), OVER);
}

TEST(RlsService, PerRequestLimitOverride) {
  RlsHarness rls(load_text(kConfig));
  pb::RateLimitRequest r = one("ip", "8.8.8.8");
  r.mutable_descriptors(0)->mutable_limit()->set_requests_per_unit(5);
  r.mutable_descriptors(0)->mutable_limit()->set_unit(::envoy::type::v3::DAY);
  pb::RateLimitResponse response = rls.call(r);
  EXPECT_EQ(response.statuses(0).current_limit().requests_per_unit(), 5u);
  EXPECT_EQ(response.statuses(0).current_limit().unit(), pb::RateLimitResponse::RateLimit::DAY);
  EXPECT_EQ(response.statuses(0).duration_until_reset().seconds(), 86400);
  EXPECT_EQ(rls.allowed(r, 5), 4);
  // An override applies even where no rule matches (in a known domain).
  pb::RateLimitRequest unmatched = one("nothing", "x");
  unmatched.mutable_descriptors(0)->mutable_limit()->set_requests_per_unit(1);
  unmatched.mutable_descriptors(0)->mutable_limit()->set_unit(::envoy::type::v3::HOUR);
  EXPECT_THAT(rls.codes(unmatched, 2), ElementsAre(OK, OVER));
  // Without a unit it is an invalid request.
  pb::RateLimitRequest no_unit = one("ip", "8.8.8.8");
  no_unit.mutable_descriptors(0)->mutable_limit()->set_requests_per_unit(5);
  pb::RateLimitResponse ignored;
  grpc::Status status = rls.call_status(no_unit, &ignored);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "descriptor 0: the limit override has no unit");
}

TEST(RlsService, ValuesCannotForgeAnotherDescriptorsKey) {
  RlsHarness rls(load_text(kConfig));
  // ("a", "b_c") and ("a_b", "c") spell the same "a_b_c" when joined naively.
  EXPECT_EQ(rls.call(one("a", "b_c")).overall_code(), OK);
  EXPECT_EQ(rls.call(one("a_b", "c")).overall_code(), OK);
  EXPECT_EQ(rls.call(one("a", "b_c")).overall_code(), OVER);
}

TEST(RlsService, SluiceAlgorithmsThroughTheSameApi) {
  RlsHarness rls(load_text(kConfig));
  // token_bucket: capacity 2, 1 token per second.
  EXPECT_THAT(rls.codes(one("bucket", "x"), 3), ElementsAre(OK, OK, OVER));
  pb::RateLimitResponse over = rls.call(one("bucket", "x"));
  EXPECT_EQ(over.statuses(0).current_limit().name(), "burst");
  EXPECT_EQ(over.statuses(0).current_limit().requests_per_unit(), 2u);
  EXPECT_EQ(over.statuses(0).current_limit().unit(), pb::RateLimitResponse::RateLimit::UNKNOWN);
  EXPECT_EQ(over.statuses(0).duration_until_reset().seconds(), 1);  // one token away
  rls.clock.advance(1s);
  EXPECT_THAT(rls.codes(one("bucket", "x"), 2), ElementsAre(OK, OVER));
  // sliding_window: 4 per 90 s; half a window later half the old count still weighs.
  EXPECT_EQ(rls.allowed(one("slide", "x"), 5), 4);
  rls.clock.advance(90s + 45s);
  EXPECT_EQ(rls.allowed(one("slide", "x"), 5), 2);
}

TEST(RlsService, MonthIsThirtyDaysAlignedToTheEpoch) {
  RlsHarness rls(load_text(kConfig));
  pb::RateLimitResponse response = rls.call(one("month", "x"));
  const int64_t month = 30 * 86400;
  const int64_t now = 1'699'920'000;
  EXPECT_EQ(response.statuses(0).duration_until_reset().seconds(), month - now % month);
  EXPECT_EQ(response.statuses(0).current_limit().unit(), pb::RateLimitResponse::RateLimit::MONTH);
}

TEST(RlsService, ReplacesDropsTheReplacedRuleLeavingItsCounterUntouched) {
  RlsHarness rls(load_text(R"(domain: d
descriptors:
  - key: category
    value: read
    descriptors:
      - key: user
        rate_limit: {name: reads, unit: second, requests_per_unit: 1}
  - key: endpoint
    value: search
    descriptors:
      - key: user
        rate_limit:
          unit: second
          requests_per_unit: 3
          replaces: [{name: reads}]
)"));
  const Entries read{{"category", "read"}, {"user", "u"}};
  const Entries search{{"endpoint", "search"}, {"user", "u"}};
  const auto both = request("d", {read, search});
  for (uint32_t remaining : {2u, 1u, 0u}) {
    pb::RateLimitResponse response = rls.call(both);
    EXPECT_EQ(response.overall_code(), OK);
    EXPECT_FALSE(response.statuses(0).has_current_limit());  // replaced
    EXPECT_EQ(response.statuses(1).limit_remaining(), remaining);
  }
  EXPECT_EQ(rls.call(both).overall_code(), OVER);
  // The replaced rule's own counter was never charged.
  EXPECT_THAT(rls.codes(request("d", {read}), 2), ElementsAre(OK, OVER));
}

TEST(RlsService, QuotaModeAllowsWhileAnotherQuotaHasRoom) {
  RlsHarness rls(load_text(R"(domain: d
descriptors:
  - key: backend
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
)"));
  const auto r = request("d", {Entries{{"backend", "a"}}, Entries{{"backend", "b"}}});
  pb::RateLimitResponse first = rls.call(r);
  EXPECT_EQ(first.overall_code(), OK);
  EXPECT_TRUE(first.dynamic_metadata().fields().at("quotaModeEnabled").bool_value());
  EXPECT_EQ(first.dynamic_metadata().fields().count("quotaModeViolations"), 0u);
  // a is over its quota, b has room: allowed, and a is reported.
  pb::RateLimitRequest only_a =
      request("d", {Entries{{"backend", "a"}}, Entries{{"backend", "c"}}});
  pb::RateLimitResponse second = rls.call(only_a);
  EXPECT_EQ(second.overall_code(), OK);
  EXPECT_EQ(second.statuses(0).code(), OK);
  const auto& violations =
      second.dynamic_metadata().fields().at("quotaModeViolations").list_value();
  ASSERT_EQ(violations.values_size(), 1);
  EXPECT_EQ(violations.values(0).number_value(), 0);
  // Every quota over: refused.
  pb::RateLimitResponse third = rls.call(r);
  EXPECT_EQ(third.overall_code(), OVER);
  EXPECT_EQ(third.statuses(0).code(), OVER);
  EXPECT_EQ(third.statuses(1).code(), OVER);
  EXPECT_EQ(rls.service.counters().quota_mode_over.load(), 3u);
}

TEST(RlsService, DescriptorMetadataIsSentWhileUnderTheLimit) {
  RlsHarness rls(load_text(R"(domain: d
descriptors:
  - key: model
    metadata:
      service_with_quota: {name: backend_1}
    rate_limit: {unit: minute, requests_per_unit: 1}
)"));
  pb::RateLimitResponse under = rls.call(request("d", {Entries{{"model", "m"}}}));
  EXPECT_EQ(under.dynamic_metadata()
                .fields()
                .at("service_with_quota")
                .struct_value()
                .fields()
                .at("name")
                .string_value(),
            "backend_1");
  pb::RateLimitResponse over = rls.call(request("d", {Entries{{"model", "m"}}}));
  EXPECT_EQ(over.dynamic_metadata().fields().count("service_with_quota"), 0u);
}

TEST(RlsService, DynamicMetadataListsDomainAndDescriptorsWhenEnabled) {
  RlsOptions options;
  options.dynamic_metadata = true;
  RlsHarness rls(load_text(kConfig), options);
  pb::RateLimitResponse response = rls.call(
      request("d", {Entries{{"tenant", "acme"}, {"user", "u"}}, Entries{{"ip", "1.1.1.1"}}}));
  const auto& fields = response.dynamic_metadata().fields();
  EXPECT_EQ(fields.at("domain").string_value(), "d");
  const auto& list = fields.at("descriptors").list_value();
  ASSERT_EQ(list.values_size(), 2);
  const auto& entries = list.values(0).struct_value().fields().at("entries").list_value();
  ASSERT_EQ(entries.values_size(), 2);
  EXPECT_EQ(entries.values(0).string_value(), "tenant=acme");
  EXPECT_EQ(entries.values(1).string_value(), "user=u");
  EXPECT_FALSE(fields.at("quotaModeEnabled").bool_value());
}

TEST(RlsService, RateLimitResponseHeadersOfTheMostRestrictiveDescriptor) {
  RlsOptions options;
  options.response_headers = ResponseHeaders::kRateLimit;
  RlsHarness rls(load_text(kConfig), options);
  rls.clock.advance(30s);
  const auto r =
      request("d", {Entries{{"ip", "1.1.1.1"}}, Entries{{"tenant", "acme"}, {"user", "u"}}});
  pb::RateLimitResponse response = rls.call(r);
  // ip: 2 of 3 left (resets in 1 s); tenant/user: 1 of 2 left (resets in 30 s).
  ASSERT_EQ(response.response_headers_to_add_size(), 3);
  EXPECT_EQ(response.response_headers_to_add(0).key(), "RateLimit-Limit");
  EXPECT_EQ(response.response_headers_to_add(0).value(), "2");
  EXPECT_EQ(response.response_headers_to_add(1).key(), "RateLimit-Remaining");
  EXPECT_EQ(response.response_headers_to_add(1).value(), "1");
  EXPECT_EQ(response.response_headers_to_add(2).key(), "RateLimit-Reset");
  EXPECT_EQ(response.response_headers_to_add(2).value(), "30");
  rls.call(r);
  pb::RateLimitResponse refused = rls.call(r);  // both over: the longer wait wins
  EXPECT_EQ(refused.overall_code(), OVER);
  EXPECT_EQ(refused.response_headers_to_add(1).value(), "0");
  EXPECT_EQ(refused.response_headers_to_add(2).value(), "30");
}

TEST(RlsService, Draft10ResponseHeadersOneItemPerLimitedDescriptor) {
  RlsOptions options;
  options.response_headers = ResponseHeaders::kDraft10;
  RlsHarness rls(load_text(kConfig), options);
  const auto r = request(
      "d", {Entries{{"ip", "10.0.0.9"}}, Entries{{"ip", "1.1.1.1"}}, Entries{{"nothing", "x"}}});
  pb::RateLimitResponse response = rls.call(r);
  ASSERT_EQ(response.response_headers_to_add_size(), 2);
  EXPECT_EQ(response.response_headers_to_add(0).key(), "RateLimit-Policy");
  EXPECT_EQ(response.response_headers_to_add(0).value(), "\"vip\";q=1;w=1, \"d.ip\";q=3;w=1");
  EXPECT_EQ(response.response_headers_to_add(1).key(), "RateLimit");
  EXPECT_EQ(response.response_headers_to_add(1).value(), "\"vip\";r=0;t=1, \"d.ip\";r=2;t=1");
}

TEST(RlsService, GlobalShadowModeAlwaysAnswersOk) {
  RlsOptions options;
  options.global_shadow_mode = true;
  RlsHarness rls(load_text(kConfig), options);
  EXPECT_EQ(rls.allowed(one("ip", "10.0.0.9"), 3), 3);
  EXPECT_EQ(rls.service.counters().calls_over_limit.load(), 2u);
}

TEST(RlsService, InvalidRequestsAreGrpcErrors) {
  RlsHarness rls(load_text(kConfig));
  pb::RateLimitResponse ignored;
  grpc::Status s = rls.call_status(request("", {Entries{{"ip", "1"}}}), &ignored);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "rate limit domain must not be empty");
  s = rls.call_status(request("d", {}), &ignored);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "rate limit descriptor list must not be empty");
  EXPECT_EQ(rls.service.counters().call_errors.load(), 2u);
}

TEST(RlsService, NoConfigIsUnavailableAndSetConfigSwapsAtomically) {
  RlsHarness rls(nullptr);
  pb::RateLimitResponse ignored;
  grpc::Status s = rls.call_status(one("ip", "1"), &ignored);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(s.error_message(), "no rate limit configuration loaded");

  rls.service.set_config(load_text(kConfig));
  EXPECT_EQ(rls.allowed(one("ip", "10.0.0.9"), 2), 1);
  // A changed definition starts afresh; an unchanged one keeps its state.
  rls.service.set_config(load_text(R"(domain: d
descriptors:
  - key: ip
    value: 10.0.0.9
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: ip
    rate_limit: {unit: second, requests_per_unit: 3}
)"));
  EXPECT_EQ(rls.allowed(one("ip", "10.0.0.9"), 3), 2);
  EXPECT_EQ(rls.allowed(one("ip", "1.1.1.1"), 2), 2);
  rls.service.set_config(load_text(kConfig));
  EXPECT_EQ(rls.allowed(one("ip", "1.1.1.1"), 2), 1);  // 3 per second, 2 already used
}

TEST(RlsService, ConcurrentClientsGetExactlyTheLimit) {
  RlsHarness rls(load_text(R"(domain: d
descriptors:
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 60}
)"));
  constexpr int kThreads = 4;
  constexpr int kCalls = 40;  // 160 calls for 60 slots
  std::atomic<int> ok{0}, over{0}, errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      auto stub = pb::RateLimitService::NewStub(rls.channel);
      for (int i = 0; i < kCalls; ++i) {
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
        pb::RateLimitResponse response;
        if (!stub->ShouldRateLimit(&context, request("d", {Entries{{"k", "v"}}}), &response).ok()) {
          errors.fetch_add(1);
        } else if (response.overall_code() == OK) {
          ok.fetch_add(1);
        } else {
          over.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(ok.load(), 60);
  EXPECT_EQ(over.load(), kThreads * kCalls - 60);
}

}  // namespace
}  // namespace sluice::rls

namespace sluice::rls {
namespace {

// A one-thread task queue standing in for an event loop.
class Worker {
 public:
  Worker() : thread_([this] { run(); }) {}
  ~Worker() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    ready_.notify_one();
    thread_.join();
  }
  void post(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      tasks_.push_back(std::move(task));
    }
    ready_.notify_one();
  }
  std::thread::id id() const { return thread_.get_id(); }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      ready_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;
      std::function<void()> task = std::move(tasks_.front());
      tasks_.pop_front();
      lock.unlock();
      task();
      lock.lock();
    }
  }
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::thread thread_;
};

// Records the thread each store call is made on.
class ThreadRecordingStore final : public Store {
 public:
  explicit ThreadRecordingStore(Store& inner) : inner_(inner) {}
  Status acquire(std::span<const AcquireRequest> requests, Nanos now,
                 std::span<Decision> out) override {
    std::lock_guard<std::mutex> lock(mutex_);
    threads.push_back(std::this_thread::get_id());
    return inner_.acquire(requests, now, out);
  }
  Result<bool> reset(const Limit& limit, std::string_view key) override {
    return inner_.reset(limit, key);
  }
  size_t size() const override { return inner_.size(); }
  std::vector<std::thread::id> threads;

 private:
  Store& inner_;
  std::mutex mutex_;
};

TEST(RlsServiceExecutor, DecisionsRunWhereTheExecutorPutsThem) {
  ManualClock clock(testing::kT0);
  MemoryStore memory(testing::test_store_options());
  ThreadRecordingStore store(memory);
  // Declared before the service and server: destroyed after them.
  Worker worker;
  RlsOptions options;
  options.executor = [&worker](std::function<void()> task) { worker.post(std::move(task)); };
  RlsService service(store, clock, load_text(kConfig), options);
  grpc::Service* services[] = {&service};
  Result<std::unique_ptr<GrpcServer>> server = GrpcServer::start("127.0.0.1:0", services);
  ASSERT_TRUE(server.ok());
  auto stub = pb::RateLimitService::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string((*server)->port()), grpc::InsecureChannelCredentials()));
  std::vector<testing::Code> codes;
  for (int i = 0; i < 3; ++i) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    pb::RateLimitResponse response;
    ASSERT_TRUE(stub->ShouldRateLimit(&context, one("ip", "10.0.0.9"), &response).ok());
    codes.push_back(response.overall_code());
  }
  EXPECT_THAT(codes, ElementsAre(OK, OVER, OVER));
  (*server)->stop();
  ASSERT_EQ(store.threads.size(), 3u);
  for (std::thread::id id : store.threads) EXPECT_EQ(id, worker.id());
}

// An executor that drops a task unrun (a worker loop that stopped before
// running it): the call is answered UNAVAILABLE, never left hanging, and
// nothing is decided or charged.
TEST(RlsServiceExecutor, ATaskDroppedUnrunIsAnsweredUnavailable) {
  RlsOptions options;
  options.executor = [](std::function<void()> task) { task = nullptr; };
  RlsHarness rls(load_text(kConfig), options);
  for (int i = 0; i < 2; ++i) {
    pb::RateLimitResponse response;
    const grpc::Status status = rls.call_status(one("ip", "10.0.0.9"), &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_EQ(status.error_message(), "rate limit service stopping");
  }
  rls.server->stop();
  EXPECT_EQ(rls.service.calls_in_flight(), 0u);
  EXPECT_EQ(rls.service.counters().calls.load(), 0u);
  EXPECT_EQ(rls.store.size(), 0u);
}

// A client that gives up while its call waits for the executor: it sees
// CANCELLED; the call, decided afterwards, is answered into the cancelled
// call, and gRPC's OnDone (run inline, service.cc) still ends it: nothing
// stays in flight, nothing leaks.
TEST(RlsServiceExecutor, ACallCancelledWhileHeldIsStillDoneOnceDecided) {
  std::mutex mutex;
  std::condition_variable posted;
  std::function<void()> held;
  RlsOptions options;
  options.executor = [&](std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      held = std::move(task);
    }
    posted.notify_all();
  };
  RlsHarness rls(load_text(kConfig), options);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  pb::RateLimitResponse response;
  grpc::Status status;
  std::thread caller(
      [&] { status = rls.stub->ShouldRateLimit(&context, one("ip", "10.0.0.9"), &response); });
  bool taken = false;
  {
    std::unique_lock<std::mutex> lock(mutex);
    taken = posted.wait_for(lock, 10s, [&] { return held != nullptr; });
  }
  EXPECT_TRUE(taken);
  EXPECT_EQ(rls.service.calls_in_flight(), taken ? 1u : 0u);
  context.TryCancel();
  caller.join();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED);
  ASSERT_TRUE(taken);
  held();
  held = nullptr;
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (rls.service.calls_in_flight() != 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::yield();
  }
  EXPECT_EQ(rls.service.calls_in_flight(), 0u);
  EXPECT_EQ(rls.service.counters().calls.load(), 1u);
  EXPECT_EQ(rls.store.size(), 1u);
}

// ---------------------------------------------------------------- store failures

// A store that cannot answer (as a Redis that is down): every call fails with
// kStoreUnavailable.
class UnavailableStore final : public Store {
 public:
  Status acquire(std::span<const AcquireRequest>, Nanos, std::span<Decision>) override {
    return Error{ErrorCode::kStoreUnavailable, "redis down"};
  }
  Result<bool> reset(const Limit&, std::string_view) override { return false; }
  size_t size() const override { return 0; }
};

struct Answer {
  grpc::Status status;
  pb::RateLimitResponse response;
};

// The store keys the service asks for, then the memory store's decisions.
class KeyRecordingStore final : public Store {
 public:
  explicit KeyRecordingStore(Store& inner) : inner_(inner) {}
  Status acquire(std::span<const AcquireRequest> requests, Nanos now,
                 std::span<Decision> out) override {
    for (const AcquireRequest& r : requests) keys.emplace_back(r.key);
    return inner_.acquire(requests, now, out);
  }
  Result<bool> reset(const Limit& limit, std::string_view key) override {
    return inner_.reset(limit, key);
  }
  size_t size() const override { return inner_.size(); }
  std::vector<std::string> keys;

 private:
  Store& inner_;
};

// One call decided by `service` (no gRPC in between; the store answers inline).
Answer decide(RlsService& service, const pb::RateLimitRequest& r) {
  Answer a;
  bool done = false;
  service.decide(r, &a.response, [&](grpc::Status s) {
    a.status = std::move(s);
    done = true;
  });
  EXPECT_TRUE(done);
  return a;
}

TEST(RlsServiceStoreFailure, ByDefaultTheCallIsAGrpcError) {
  ManualClock clock(testing::kT0);
  UnavailableStore store;
  RlsService service(store, clock, load_text(kConfig));
  const Answer a = decide(service, one("ip", "10.0.0.9"));
  EXPECT_EQ(a.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(a.status.error_message(), "rate limit store: redis down");
  EXPECT_EQ(service.counters().call_errors.load(), 1u);
  EXPECT_EQ(service.counters().store_errors.load(), 0u);
}

TEST(RlsServiceStoreFailure, OnFailureAllowAnswersOkWithNothingRemaining) {
  ManualClock clock(testing::kT0);
  UnavailableStore store;
  RlsOptions options;
  options.on_store_failure = OnStoreFailure::kAllow;
  std::vector<std::string> logged;
  options.on_store_error = [&](const Error& e, bool allowed) {
    logged.push_back(e.message + (allowed ? " allow" : " deny"));
  };
  RlsService service(store, clock, load_text(kConfig), options);
  // An unknown key needs no store: only the ip descriptor fails.
  const Answer a =
      decide(service, request("d", {Entries{{"ip", "10.0.0.9"}}, Entries{{"x", "y"}}}));
  ASSERT_TRUE(a.status.ok()) << a.status.error_message();
  EXPECT_EQ(a.response.overall_code(), OK);
  ASSERT_EQ(a.response.statuses_size(), 2);
  const auto& s = a.response.statuses(0);
  EXPECT_EQ(s.code(), OK);
  EXPECT_EQ(s.current_limit().name(), "vip");
  EXPECT_EQ(s.limit_remaining(), 0u);
  EXPECT_FALSE(s.has_duration_until_reset());
  EXPECT_EQ(a.response.statuses(1).code(), OK);
  EXPECT_FALSE(a.response.statuses(1).has_current_limit());
  EXPECT_EQ(service.counters().store_errors.load(), 1u);
  EXPECT_EQ(service.counters().call_errors.load(), 0u);
  EXPECT_EQ(service.counters().within_limit.load(), 0u);
  EXPECT_THAT(logged, ElementsAre("redis down allow"));
}

TEST(RlsServiceStoreFailure, OnFailureDenyAnswersOverLimitExceptInShadowMode) {
  ManualClock clock(testing::kT0);
  UnavailableStore store;
  RlsOptions options;
  options.on_store_failure = OnStoreFailure::kDeny;
  RlsService service(store, clock, load_text(kConfig), options);
  Answer a = decide(service, one("ip", "10.0.0.9"));
  ASSERT_TRUE(a.status.ok());
  EXPECT_EQ(a.response.overall_code(), OVER);
  EXPECT_EQ(a.response.statuses(0).code(), OVER);
  EXPECT_EQ(a.response.statuses(0).limit_remaining(), 0u);
  EXPECT_EQ(a.response.statuses(0).duration_until_reset().seconds(), 1);
  // shadow_mode: never refused, not even when the store is down.
  a = decide(service, one("soft", "1"));
  ASSERT_TRUE(a.status.ok());
  EXPECT_EQ(a.response.overall_code(), OK);
  EXPECT_EQ(service.counters().store_errors.load(), 2u);
  EXPECT_EQ(service.counters().over_limit.load(), 0u);

  // store.redis.on_failure is reloadable: later calls allow.
  service.set_on_store_failure(OnStoreFailure::kAllow);
  a = decide(service, one("ip", "10.0.0.9"));
  EXPECT_EQ(a.response.overall_code(), OK);
}

// What a request sends never sizes what the store keeps: a long descriptor
// value is stored as a fixed-size digest, and the same value is one counter.
TEST(RlsServiceKeys, ALongDescriptorValueIsStoredBoundedAndCountedAsOne) {
  ManualClock clock(testing::kT0);
  MemoryStore memory(testing::test_store_options());
  KeyRecordingStore store(memory);
  RlsService service(store, clock, load_text(kConfig));
  const std::string long_ip(10'000, '9');
  std::vector<pb::RateLimitResponse::Code> codes;
  for (int i = 0; i < 4; ++i)
    codes.push_back(decide(service, one("ip", long_ip)).response.overall_code());
  // 3 per second: the fourth is over, as for any value.
  EXPECT_THAT(codes, ElementsAre(OK, OK, OK, OVER));
  ASSERT_EQ(store.keys.size(), 4u);
  EXPECT_EQ(store.keys[0].size(), std::string("rls|%sha256:").size() + 32) << store.keys[0];
  EXPECT_TRUE(store.keys[0].starts_with("rls|%sha256:")) << store.keys[0].substr(0, 40);
  for (const std::string& k : store.keys) EXPECT_EQ(k, store.keys[0]);
  // Another long value: another counter. A short one keeps its readable key.
  EXPECT_EQ(decide(service, one("ip", long_ip + "8")).response.overall_code(), OK);
  EXPECT_NE(store.keys.back(), store.keys[0]);
  EXPECT_EQ(decide(service, one("ip", "10.0.0.7")).response.overall_code(), OK);
  EXPECT_EQ(store.keys.back(), "rls|1:d2:ip=8:10.0.0.7");
}

// What the decision step reported, one line per decided descriptor.
struct RecordingObserver final : policy::DecisionObserver {
  void decided(const policy::Decided& d) const override {
    const std::lock_guard<std::mutex> lock(mutex);
    lines.push_back(std::string(d.verdict.allowed() ? "allowed" : "denied") +
                    (d.verdict.store_failed() ? " store_failed" : "") +
                    (d.shadow ? " shadow" : "") + " " +
                    std::string(policy::decision_key(d.plan, d.verdict)));
  }
  mutable std::mutex mutex;
  mutable std::vector<std::string> lines;
};

TEST(RlsServiceObserver, EveryDecidedDescriptorIsReportedOnceAsTheHttpDoorsReportTheirs) {
  ManualClock clock(testing::kT0);
  MemoryStore store(testing::test_store_options());
  RlsService service(store, clock, load_text(kConfig));
  RecordingObserver observer;
  service.set_observer(&observer);
  // vip: 1 per second. Unlimited, no-limit and check-only descriptors are
  // not decided by the store, so not reported.
  decide(service,
         request("d", {Entries{{"ip", "10.0.0.9"}}, Entries{{"ldap", "x"}}, Entries{{"x", "y"}}}));
  decide(service, one("ip", "10.0.0.9"));
  decide(service, request("d", {Entries{{"ip", "10.0.0.9"}}}, 0));
  decide(service, request("d", {Entries{{"soft", "s"}}}));
  decide(service, request("d", {Entries{{"soft", "s"}}}));
  pb::RateLimitRequest check_only = one("ip", "10.0.0.8");
  check_only.mutable_descriptors(0)->mutable_hits_addend()->set_value(0);
  decide(service, check_only);
  EXPECT_THAT(observer.lines,
              ElementsAre("allowed rls|1:d2:ip=8:10.0.0.9", "denied rls|1:d2:ip=8:10.0.0.9",
                          "denied rls|1:d2:ip=8:10.0.0.9", "allowed shadow rls|1:d4:soft=1:s",
                          "denied shadow rls|1:d4:soft=1:s"));

  // Nothing is reported once stop_observing() returned.
  service.stop_observing();
  decide(service, one("ip", "10.0.0.9"));
  EXPECT_EQ(observer.lines.size(), 5u);
}

TEST(RlsServiceObserver, AFailedStoreIsReportedWithTheVerdictOnFailureGave) {
  ManualClock clock(testing::kT0);
  UnavailableStore store;
  RlsOptions options;
  options.on_store_failure = OnStoreFailure::kDeny;
  RlsService service(store, clock, load_text(kConfig), options);
  RecordingObserver observer;
  service.set_observer(&observer);
  decide(service, one("ip", "10.0.0.9"));
  service.set_on_store_failure(OnStoreFailure::kAllow);
  decide(service, one("ip", "10.0.0.9"));
  EXPECT_THAT(observer.lines, ElementsAre("denied store_failed rls|1:d2:ip=8:10.0.0.9",
                                          "allowed store_failed rls|1:d2:ip=8:10.0.0.9"));
}

}  // namespace
}  // namespace sluice::rls
