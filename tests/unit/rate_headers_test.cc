#include "render/rate_headers.h"

#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <string>

#include "sluice/memory_store.h"

namespace sluice::render {
namespace {

using namespace std::chrono_literals;
using policy::HeaderModes;
using policy::LimitOutcome;
using policy::OnFailure;
using policy::Plan;
using policy::RouteLimit;
using policy::Verdict;

const Nanos kNow = 1'700'000'000s;  // a whole epoch second
constexpr HeaderModes kLegacy{true, false};
constexpr HeaderModes kDraft{false, true};
constexpr HeaderModes kBoth{true, true};
constexpr HeaderModes kNone{false, false};

// "Name: value" lines, in order: the exact header block a response gets.
std::string headers_of(const Verdict& v, HeaderModes modes, Nanos now = kNow) {
  RateHeaders headers;
  append_rate_headers(v, modes, now, headers);
  std::string out;
  for (const RateHeaders::Field& f : headers) {
    out += std::string(f.name) + ": " + std::string(f.value) + "\n";
  }
  return out;
}

RouteLimit login() {
  return RouteLimit{"login", true, Limit::token_bucket(5, 1, 1s).value()};
}
RouteLimit hourly() {
  return RouteLimit{"POST /api/auth/login#1", false, Limit::fixed_window(100, 3600s).value()};
}

class Route {
 public:
  explicit Route(std::vector<RouteLimit> limits) : limits_(std::move(limits)) {
    for (const RouteLimit& l : limits_) plan_.limits.push_back({&l, l.name + "|ip:192.0.2.1"});
  }
  Verdict decide(Nanos now = kNow) { return policy::decide(store_, plan_, now, OnFailure::kAllow); }
  const RouteLimit& limit(size_t i) const { return limits_[i]; }

 private:
  std::vector<RouteLimit> limits_;
  Plan plan_;
  MemoryStore store_{MemoryStoreOptions{.seed = 1}};
};

// A hand-made verdict with one limit and one decision.
struct OneLimit {
  RouteLimit limit;
  Verdict verdict;
  OneLimit(Limit l, Decision d, std::string name = "x") : limit{std::move(name), false, l} {
    verdict.result = d.allowed ? Verdict::Result::kAllowed : Verdict::Result::kDenied;
    verdict.decision = d;
    verdict.reported = &limit;
    verdict.outcomes = {LimitOutcome{&limit, d}};
  }
};

Decision allowed(uint64_t limit, uint64_t remaining, Nanos reset_after) {
  return Decision{true, limit, remaining, reset_after, 0ns};
}
Decision denied(uint64_t limit, uint64_t remaining, Nanos reset_after, Nanos retry_after) {
  return Decision{false, limit, remaining, reset_after, retry_after};
}

// --- the seed's login example, end to end through decide() ---

TEST(RateHeaders, AllowedLegacy) {
  Route route({login()});
  EXPECT_EQ(headers_of(route.decide(), kLegacy),
            "X-RateLimit-Limit: 5\n"
            "X-RateLimit-Remaining: 4\n"
            "X-RateLimit-Reset: 1700000001\n");
}

TEST(RateHeaders, DeniedLegacy) {
  Route route({login()});
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(route.decide().allowed());
  EXPECT_EQ(headers_of(route.decide(), kLegacy),
            "X-RateLimit-Limit: 5\n"
            "X-RateLimit-Remaining: 0\n"
            "X-RateLimit-Reset: 1700000005\n"
            "Retry-After: 1\n");
}

TEST(RateHeaders, AllowedDraft) {
  Route route({login()});
  EXPECT_EQ(headers_of(route.decide(), kDraft),
            "RateLimit-Policy: \"login\";q=5;w=5\n"
            "RateLimit: \"login\";r=4;t=1\n");
}

TEST(RateHeaders, DeniedDraftStillCarriesRetryAfter) {
  Route route({login()});
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(route.decide().allowed());
  EXPECT_EQ(headers_of(route.decide(), kDraft),
            "RateLimit-Policy: \"login\";q=5;w=5\n"
            "RateLimit: \"login\";r=0;t=1\n"
            "Retry-After: 1\n");
}

TEST(RateHeaders, BothModes) {
  Route route({login()});
  EXPECT_EQ(headers_of(route.decide(), kBoth),
            "X-RateLimit-Limit: 5\n"
            "X-RateLimit-Remaining: 4\n"
            "X-RateLimit-Reset: 1700000001\n"
            "RateLimit-Policy: \"login\";q=5;w=5\n"
            "RateLimit: \"login\";r=4;t=1\n");
}

// --- several limits on one route ---

TEST(RateHeaders, SeveralLimitsAllowed) {
  // The hour window started at 1699999200: 2800 s are left of it.
  Route route({login(), hourly()});
  EXPECT_EQ(headers_of(route.decide(), kBoth),
            "X-RateLimit-Limit: 5\n"  // login has the least remaining
            "X-RateLimit-Remaining: 4\n"
            "X-RateLimit-Reset: 1700000001\n"
            "RateLimit-Policy: \"login\";q=5;w=5, \"POST /api/auth/login#1\";q=100;w=3600\n"
            "RateLimit: \"login\";r=4;t=1, \"POST /api/auth/login#1\";r=99;t=2800\n");
}

TEST(RateHeaders, SeveralLimitsDeniedByOne) {
  Route route({login(), hourly()});
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(route.decide().allowed());
  // login denies; the hourly window would allow and was not charged: 95 left.
  EXPECT_EQ(headers_of(route.decide(), kBoth),
            "X-RateLimit-Limit: 5\n"
            "X-RateLimit-Remaining: 0\n"
            "X-RateLimit-Reset: 1700000005\n"
            "RateLimit-Policy: \"login\";q=5;w=5, \"POST /api/auth/login#1\";q=100;w=3600\n"
            "RateLimit: \"login\";r=0;t=1, \"POST /api/auth/login#1\";r=95;t=2800\n"
            "Retry-After: 1\n");
}

TEST(RateHeaders, SeveralLimitsLeastRemainingIsTheHourly) {
  Route route({RouteLimit{"burst", true, Limit::token_bucket(100, 10, 1s).value()},
               RouteLimit{"hour", true, Limit::fixed_window(3, 3600s).value()}});
  EXPECT_EQ(headers_of(route.decide(), kLegacy),
            "X-RateLimit-Limit: 3\n"
            "X-RateLimit-Remaining: 2\n"
            "X-RateLimit-Reset: 1700002800\n");
  route.decide();
  route.decide();
  EXPECT_EQ(headers_of(route.decide(), kBoth),
            "X-RateLimit-Limit: 3\n"
            "X-RateLimit-Remaining: 0\n"
            "X-RateLimit-Reset: 1700002800\n"
            "RateLimit-Policy: \"burst\";q=100;w=10, \"hour\";q=3;w=3600\n"
            "RateLimit: \"burst\";r=97;t=1, \"hour\";r=0;t=2800\n"
            "Retry-After: 2800\n");
}

// --- rounding ---

TEST(RateHeadersRounding, RetryAfterExactlyOneSecond) {
  const Limit l = Limit::token_bucket(1, 1, 1s).value();
  OneLimit one(l, denied(1, 0, 1s, 1s));
  EXPECT_EQ(headers_of(one.verdict, kBoth),
            "X-RateLimit-Limit: 1\n"
            "X-RateLimit-Remaining: 0\n"
            "X-RateLimit-Reset: 1700000001\n"
            "RateLimit-Policy: \"x\";q=1;w=1\n"
            "RateLimit: \"x\";r=0;t=1\n"
            "Retry-After: 1\n");
}

TEST(RateHeadersRounding, OneNanosecondOverRoundsUp) {
  const Limit l = Limit::token_bucket(1, 1, 1s).value();
  OneLimit one(l, denied(1, 0, 1s + 1ns, 1s + 1ns));
  EXPECT_EQ(headers_of(one.verdict, kBoth),
            "X-RateLimit-Limit: 1\n"
            "X-RateLimit-Remaining: 0\n"
            "X-RateLimit-Reset: 1700000002\n"
            "RateLimit-Policy: \"x\";q=1;w=1\n"
            "RateLimit: \"x\";r=0;t=2\n"
            "Retry-After: 2\n");
}

TEST(RateHeadersRounding, ZeroRetryIsNeverSent) {
  // No algorithm denies with retry_after 0, but the header must never say 0.
  const Limit l = Limit::token_bucket(1, 1, 1s).value();
  OneLimit one(l, denied(1, 0, 0ns, 0ns));
  EXPECT_EQ(headers_of(one.verdict, kBoth),
            "X-RateLimit-Limit: 1\n"
            "X-RateLimit-Remaining: 0\n"
            "X-RateLimit-Reset: 1700000000\n"
            "RateLimit-Policy: \"x\";q=1;w=1\n"
            "RateLimit: \"x\";r=0;t=1\n"
            "Retry-After: 1\n");
}

TEST(RateHeadersRounding, SubSecondWaitsRoundUpToOne) {
  const Limit l = Limit::token_bucket(1, 1, 1s).value();
  EXPECT_EQ(headers_of(OneLimit(l, denied(1, 0, 1ns, 1ns)).verdict, kNone), "Retry-After: 1\n");
  EXPECT_EQ(headers_of(OneLimit(l, denied(1, 0, 999'999'999ns, 999'999'999ns)).verdict, kNone),
            "Retry-After: 1\n");
  EXPECT_EQ(headers_of(OneLimit(l, denied(1, 0, 61s, 60s + 1ns)).verdict, kNone),
            "Retry-After: 61\n");
}

TEST(RateHeadersRounding, ResetIsTheEpochSecondRoundedUp) {
  const Limit l = Limit::token_bucket(10, 1, 1s).value();
  auto reset = [&](Nanos now, Nanos reset_after) {
    RateHeaders h;
    append_rate_headers(OneLimit(l, allowed(10, 5, reset_after)).verdict, kLegacy, now, h);
    return std::string(h.find(kXRateLimitReset).value_or("absent"));
  };
  EXPECT_EQ(reset(kNow, 0ns), "1700000000");
  EXPECT_EQ(reset(kNow + 1ns, 0ns), "1700000001");
  EXPECT_EQ(reset(kNow, 1s), "1700000001");
  EXPECT_EQ(reset(kNow, 1s + 1ns), "1700000002");
  EXPECT_EQ(reset(kNow + 500ms, 500ms), "1700000001");
  EXPECT_EQ(reset(kNow + 500ms, 499ms), "1700000001");
  EXPECT_EQ(reset(kNow + 500ms, 501ms), "1700000002");
}

TEST(RateHeadersRounding, WindowSecondsRoundUp) {
  // 2 per second, capacity 3: an empty bucket refills in 1.5 s.
  OneLimit bucket(Limit::token_bucket(3, 2, 1s).value(), allowed(3, 2, 500ms));
  EXPECT_EQ(headers_of(bucket.verdict, kDraft),
            "RateLimit-Policy: \"x\";q=3;w=2\n"
            "RateLimit: \"x\";r=2;t=1\n");
  OneLimit window(Limit::fixed_window(7, 1500ms).value(), allowed(7, 6, 1500ms));
  EXPECT_EQ(headers_of(window.verdict, kDraft),
            "RateLimit-Policy: \"x\";q=7;w=2\n"
            "RateLimit: \"x\";r=6;t=2\n");
  OneLimit tiny(Limit::fixed_window(7, 1ms).value(), allowed(7, 6, 1ms));
  EXPECT_EQ(headers_of(tiny.verdict, kDraft),
            "RateLimit-Policy: \"x\";q=7;w=1\n"
            "RateLimit: \"x\";r=6;t=1\n");
}

// --- t for allowed limits: seconds until at least one more unit ---

TEST(RateHeadersT, TokenBucketEmptiedByAllowedRequestsWaitsOneRefillNotAFullOne) {
  // 10 tokens, one every 2 s: empty after 10, one more in 2 s (full in 20 s).
  Route route({RouteLimit{"slow", true, Limit::token_bucket(10, 1, 2s).value()}});
  EXPECT_EQ(headers_of(route.decide(), kBoth),
            "X-RateLimit-Limit: 10\n"
            "X-RateLimit-Remaining: 9\n"
            "X-RateLimit-Reset: 1700000002\n"
            "RateLimit-Policy: \"slow\";q=10;w=20\n"
            "RateLimit: \"slow\";r=9;t=2\n");
  for (int i = 0; i < 8; ++i) route.decide();
  EXPECT_EQ(headers_of(route.decide(), kBoth),
            "X-RateLimit-Limit: 10\n"
            "X-RateLimit-Remaining: 0\n"
            "X-RateLimit-Reset: 1700000020\n"
            "RateLimit-Policy: \"slow\";q=10;w=20\n"
            "RateLimit: \"slow\";r=0;t=2\n");
}

TEST(RateHeadersT, GcraMatchesTokenBucket) {
  Route route({RouteLimit{"g", true, Limit::gcra(10, 1, 2s).value()}});
  for (int i = 0; i < 9; ++i) route.decide();
  EXPECT_EQ(headers_of(route.decide(), kDraft),
            "RateLimit-Policy: \"g\";q=10;w=20\n"
            "RateLimit: \"g\";r=0;t=2\n");
}

TEST(RateHeadersT, FixedWindowIsTheWindowEnd) {
  Route route({RouteLimit{"w", true, Limit::fixed_window(10, 60s).value()}});
  // 1700000000 is 20 s into its minute: 40 s left.
  EXPECT_EQ(headers_of(route.decide(), kDraft),
            "RateLimit-Policy: \"w\";q=10;w=60\n"
            "RateLimit: \"w\";r=9;t=40\n");
}

TEST(RateHeadersT, SlidingWindowIsTheFullRestoration) {
  // Counted in this minute, the request weighs until the end of the next one.
  Route route({RouteLimit{"s", true, Limit::sliding_window(10, 60s).value()}});
  EXPECT_EQ(headers_of(route.decide(), kDraft),
            "RateLimit-Policy: \"s\";q=10;w=60\n"
            "RateLimit: \"s\";r=9;t=100\n");
}

TEST(RateHeadersT, SlidingLogIsTheFullRestoration) {
  Route route({RouteLimit{"l", true, Limit::sliding_log(10, 60s).value()}});
  EXPECT_EQ(headers_of(route.decide(), kDraft),
            "RateLimit-Policy: \"l\";q=10;w=60\n"
            "RateLimit: \"l\";r=9;t=60\n");
}

TEST(RateHeadersT, FullLimitHasNothingMoreToCome) {
  OneLimit full(Limit::token_bucket(5, 1, 1s).value(), allowed(5, 5, 0ns));
  EXPECT_EQ(headers_of(full.verdict, kDraft),
            "RateLimit-Policy: \"x\";q=5;w=5\n"
            "RateLimit: \"x\";r=5;t=0\n");
}

TEST(RateHeadersT, UntilMoreQuotaIsExactEnoughForBuckets) {
  // After any number of requests, one more token is there at until_more_quota().
  for (Limit l : {Limit::token_bucket(10, 3, 1s).value(), Limit::token_bucket(7, 2, 3s).value(),
                  Limit::gcra(4, 5, 1s).value(), Limit::token_bucket(3, 1, 1ms).value()}) {
    for (uint64_t used = 1; used <= l.size(); ++used) {
      MemoryStore store(MemoryStoreOptions{.seed = 3});
      const AcquireRequest r{&l, "k", 1};
      Decision d;
      for (uint64_t i = 0; i < used; ++i) ASSERT_TRUE(store.acquire({&r, 1}, kNow, {&d, 1}).ok());
      const Nanos wait = until_more_quota(l, d);
      Decision next;
      ASSERT_TRUE(store.acquire({&r, 1}, kNow + wait, {&next, 1}).ok());
      EXPECT_TRUE(next.allowed) << l.describe() << " used " << used;
      EXPECT_GE(next.remaining, d.remaining) << l.describe() << " used " << used;
    }
  }
}

// --- the promise: waiting what the headers say is always enough ---

TEST(RateHeaders, WaitingExactlyRetryAfterIsAlwaysAllowed) {
  std::mt19937_64 rng(99);
  for (Limit l : {Limit::token_bucket(5, 1, 1s).value(), Limit::token_bucket(10, 3, 1s).value(),
                  Limit::gcra(4, 1, 700ms).value(), Limit::fixed_window(5, 1500ms).value(),
                  Limit::sliding_log(5, 2s).value(), Limit::sliding_window(5, 2s).value()}) {
    Route route({RouteLimit{"r", true, l}});
    Nanos now = kNow;
    int denials = 0;
    for (int step = 0; step < 300; ++step) {
      now += Nanos{static_cast<int64_t>(rng() % 400'000'000)};
      const Verdict v = route.decide(now);
      if (v.allowed()) continue;
      ++denials;
      RateHeaders h;
      append_rate_headers(v, kDraft, now, h);
      const int64_t seconds = std::stoll(std::string(h.find(kRetryAfter).value()));
      ASSERT_GE(seconds, 1);
      const Verdict retry = route.decide(now + std::chrono::seconds(seconds));
      ASSERT_TRUE(retry.allowed()) << l.describe() << " at step " << step;
      now += std::chrono::seconds(seconds);
    }
    EXPECT_GT(denials, 0) << l.describe();
  }
}

// --- what is not written ---

TEST(RateHeaders, UnlimitedVerdictHasNoHeaders) {
  EXPECT_EQ(headers_of(Verdict{}, kBoth), "");
}

TEST(RateHeaders, BothModesOffLeaveOnlyRetryAfter) {
  Route route({login()});
  EXPECT_EQ(headers_of(route.decide(), kNone), "");
  for (int i = 0; i < 4; ++i) route.decide();
  EXPECT_EQ(headers_of(route.decide(), kNone), "Retry-After: 1\n");
}

TEST(RateHeaders, StoreFailureClaimsNoQuota) {
  RouteLimit l = login();
  Verdict open;
  open.result = Verdict::Result::kFailedAllowed;
  open.decision = allowed(5, 0, 0ns);
  open.reported = &l;
  open.outcomes = {LimitOutcome{&l, open.decision}};
  EXPECT_EQ(headers_of(open, kBoth), "");

  Verdict closed = open;
  closed.result = Verdict::Result::kFailedDenied;
  closed.decision = denied(5, 0, 0ns, 1s);
  closed.outcomes = {LimitOutcome{&l, closed.decision}};
  EXPECT_EQ(headers_of(closed, kBoth), "Retry-After: 1\n");
}

TEST(RateHeaders, InvalidRequestHasNoHeaders) {
  Route route({login()});
  Verdict v = route.decide();
  v.result = Verdict::Result::kInvalid;
  EXPECT_EQ(headers_of(v, kBoth), "");
}

// --- names and storage ---

TEST(RateHeaders, NamesAreSfStrings) {
  OneLimit quoted(Limit::token_bucket(5, 1, 1s).value(), allowed(5, 4, 1s), "a\"b\\c d");
  EXPECT_EQ(headers_of(quoted.verdict, kDraft),
            "RateLimit-Policy: \"a\\\"b\\\\c d\";q=5;w=5\n"
            "RateLimit: \"a\\\"b\\\\c d\";r=4;t=1\n");
  OneLimit odd(Limit::token_bucket(5, 1, 1s).value(), allowed(5, 4, 1s), "caf\xc3\xa9\t");
  EXPECT_EQ(headers_of(odd.verdict, kDraft),
            "RateLimit-Policy: \"caf???\";q=5;w=5\n"
            "RateLimit: \"caf???\";r=4;t=1\n");
}

TEST(RateHeaders, LongListsSpillToTheHeapAndStayIntact) {
  std::vector<RouteLimit> limits;
  for (int i = 0; i < 12; ++i) {
    limits.push_back(RouteLimit{std::string(60, static_cast<char>('a' + i)), true,
                                Limit::fixed_window(50, 60s).value()});
  }
  Route route(std::move(limits));
  const Verdict v = route.decide();
  RateHeaders h;
  for (int round = 0; round < 3; ++round) {  // reused after clear()
    h.clear();
    append_rate_headers(v, kBoth, kNow, h);
    ASSERT_EQ(h.size(), 5u);
    std::string policy;
    std::string limit;
    for (int i = 0; i < 12; ++i) {
      const std::string name(60, static_cast<char>('a' + i));
      policy += (i ? ", \"" : "\"") + name + "\";q=50;w=60";
      limit += (i ? ", \"" : "\"") + name + "\";r=49;t=40";
    }
    EXPECT_EQ(h[0].name, kXRateLimitLimit);
    EXPECT_EQ(h[0].value, "50");
    EXPECT_EQ(h.find(kRateLimitPolicy).value(), policy);
    EXPECT_EQ(h.find(kRateLimit).value(), limit);
    EXPECT_EQ(h.find(kXRateLimitReset).value(), "1700000040");
    EXPECT_FALSE(h.find(kRetryAfter).has_value());
  }
}

TEST(RateHeadersList, AddFindClearAndCapacity) {
  RateHeaders h;
  EXPECT_TRUE(h.empty());
  EXPECT_TRUE(h.add("A", "1"));
  EXPECT_TRUE(h.add("B", std::string(2000, 'b')));  // spills
  EXPECT_TRUE(h.add("C", ""));
  EXPECT_EQ(h.size(), 3u);
  EXPECT_EQ(h.find("A").value(), "1");
  EXPECT_EQ(h.find("B").value(), std::string(2000, 'b'));
  EXPECT_EQ(h.find("C").value(), "");
  EXPECT_FALSE(h.find("a").has_value());
  for (size_t i = h.size(); i < RateHeaders::kMaxFields; ++i) EXPECT_TRUE(h.add("X", "x"));
  EXPECT_FALSE(h.add("Y", "y"));
  EXPECT_EQ(h.find("A").value(), "1");  // earlier values untouched
  h.clear();
  EXPECT_TRUE(h.empty());
  EXPECT_FALSE(h.find("A").has_value());
}

// --- concurrency: the draft's quota unit "concurrent-requests" ---

TEST(ConcurrencyHeaders, AllowedSaysTheSlotsLeftWithoutWindowOrReset) {
  Route route({RouteLimit{"POST /api/reports", false, Limit::concurrency(4, 60s).value()}});
  EXPECT_EQ(headers_of(route.decide(), kBoth),
            "X-RateLimit-Limit: 4\n"
            "X-RateLimit-Remaining: 3\n"
            "X-RateLimit-Reset: 1700000060\n"
            "RateLimit-Policy: \"POST /api/reports\";q=4;qu=\"concurrent-requests\"\n"
            "RateLimit: \"POST /api/reports\";r=3\n");
}

TEST(ConcurrencyHeaders, DeniedSaysRetryAfterOne) {
  Route route({RouteLimit{"POST /api/reports", false, Limit::concurrency(1, 60s).value()}});
  ASSERT_TRUE(route.decide().allowed());
  EXPECT_EQ(headers_of(route.decide(kNow + 1s), kBoth, kNow + 1s),
            "X-RateLimit-Limit: 1\n"
            "X-RateLimit-Remaining: 0\n"
            "X-RateLimit-Reset: 1700000060\n"
            "RateLimit-Policy: \"POST /api/reports\";q=1;qu=\"concurrent-requests\"\n"
            "RateLimit: \"POST /api/reports\";r=0;t=1\n"
            "Retry-After: 1\n");
}

TEST(ConcurrencyHeaders, BesideARateLimitEachItemKeepsItsOwnParameters) {
  Route route({RouteLimit{"slots", true, Limit::concurrency(2, 60s).value()},
               RouteLimit{"rate", true, Limit::token_bucket(1, 1, 1s).value()}});
  ASSERT_TRUE(route.decide().allowed());
  // The bucket denies; the concurrency limit would have allowed (2 free).
  EXPECT_EQ(headers_of(route.decide(), kDraft),
            "RateLimit-Policy: \"slots\";q=2;qu=\"concurrent-requests\", \"rate\";q=1;w=1\n"
            "RateLimit: \"slots\";r=1, \"rate\";r=0;t=1\n"
            "Retry-After: 1\n");
}

TEST(RateLimitedBody, IsTheSeedsBodyByteForByte) {
  EXPECT_EQ(kRateLimitedBody,
            "{\"error\":{\"code\":\"RATE_LIMITED\",\"message\":\"Too many requests. Please retry "
            "after the Retry-After period.\"}}");
  EXPECT_EQ(kRateLimitedContentType, "application/json");
}

TEST(RateLimitedBody, NamesTheLimitThatFiredJsonEscaped) {
  EXPECT_EQ(rate_limited_body("per-minute"),
            "{\"error\":{\"code\":\"RATE_LIMITED\",\"message\":\"Too many requests. Please retry "
            "after the Retry-After period.\",\"limit\":\"per-minute\"}}");
  EXPECT_EQ(rate_limited_body("GET /q\"a\\b#1"),
            "{\"error\":{\"code\":\"RATE_LIMITED\",\"message\":\"Too many requests. Please retry "
            "after the Retry-After period.\",\"limit\":\"GET /q\\\"a\\\\b#1\"}}");
  EXPECT_EQ(rate_limited_body(""), kRateLimitedBody);
}

TEST(SecondsRoundedUp, Edges) {
  EXPECT_EQ(seconds_rounded_up(0ns), 0);
  EXPECT_EQ(seconds_rounded_up(-5ns), 0);
  EXPECT_EQ(seconds_rounded_up(1ns), 1);
  EXPECT_EQ(seconds_rounded_up(1s), 1);
  EXPECT_EQ(seconds_rounded_up(1s + 1ns), 2);
  EXPECT_EQ(seconds_rounded_up(2s - 1ns), 2);
}

}  // namespace
}  // namespace sluice::render
