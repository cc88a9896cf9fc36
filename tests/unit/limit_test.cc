// Limit::create: every spec that can never work is refused with a message that
// says what is wrong; valid specs derive exact sizes and periods.
#include <gtest/gtest.h>

#include <string>

#include "core/step.h"
#include "test_util.h"

namespace sluice {
namespace {

using namespace std::chrono_literals;
using testing::must;

struct InvalidSpecCase {
  const char* name;
  LimitSpec spec;
  std::string message;
};

class LimitCreate : public ::testing::TestWithParam<InvalidSpecCase> {};

TEST_P(LimitCreate, RefusesTheSpecWithAnExactMessage) {
  const InvalidSpecCase& c = GetParam();
  Result<Limit> r = Limit::create(c.spec);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(r.error().message, c.message);
}

constexpr Algorithm kTb = Algorithm::kTokenBucket;
constexpr Algorithm kGcra = Algorithm::kGcra;
constexpr Algorithm kFw = Algorithm::kFixedWindow;
constexpr Algorithm kSl = Algorithm::kSlidingLog;
constexpr Algorithm kSw = Algorithm::kSlidingWindow;

INSTANTIATE_TEST_SUITE_P(
    InvalidSpecs, LimitCreate,
    ::testing::Values(
        InvalidSpecCase{"CapacityZero",
                        {.algorithm = kTb, .capacity = 0, .refill_tokens = 10, .refill_period = 1s},
                        "token_bucket: capacity must be at least 1"},
        InvalidSpecCase{
            "GcraCapacityZero",
            {.algorithm = kGcra, .capacity = 0, .refill_tokens = 1, .refill_period = 1s},
            "gcra: capacity must be at least 1"},
        InvalidSpecCase{"RateZero",
                        {.algorithm = kTb, .capacity = 10, .refill_tokens = 0, .refill_period = 1s},
                        "token_bucket: refill rate must be greater than 0"},
        InvalidSpecCase{
            "RefillPeriodZero",
            {.algorithm = kGcra, .capacity = 10, .refill_tokens = 1, .refill_period = 0s},
            "gcra: refill period must be greater than 0"},
        InvalidSpecCase{
            "RefillPeriodNegative",
            {.algorithm = kTb, .capacity = 10, .refill_tokens = 1, .refill_period = -1s},
            "token_bucket: refill period must be greater than 0"},
        InvalidSpecCase{"WindowZero",
                        {.algorithm = kSw, .limit = 10, .window = 0s},
                        "sliding_window: window must be greater than 0"},
        InvalidSpecCase{"FixedWindowLimitZero",
                        {.algorithm = kFw, .limit = 0, .window = 1min},
                        "fixed_window: limit must be at least 1"},
        InvalidSpecCase{"SlidingLogLimitZero",
                        {.algorithm = kSl, .limit = 0, .window = 1min},
                        "sliding_log: limit must be at least 1"},
        InvalidSpecCase{"BucketGivenLimitAndWindow",
                        {.algorithm = kTb,
                         .capacity = 10,
                         .refill_tokens = 1,
                         .refill_period = 1s,
                         .limit = 10,
                         .window = 1s},
                        "token_bucket takes capacity and refill_rate, not limit and window"},
        InvalidSpecCase{"BucketGivenOnlyWindow",
                        {.algorithm = kGcra, .window = 1s},
                        "gcra takes capacity and refill_rate, not limit and window"},
        InvalidSpecCase{"WindowGivenCapacity",
                        {.algorithm = kFw, .capacity = 10, .limit = 10, .window = 1min},
                        "fixed_window takes limit and window, not capacity and refill_rate"},
        InvalidSpecCase{"WindowGivenRefillPeriod",
                        {.algorithm = kSw, .refill_period = 1s, .limit = 10, .window = 1min},
                        "sliding_window takes limit and window, not capacity and refill_rate"},
        InvalidSpecCase{"SlidingLogAboveTenThousand",
                        {.algorithm = kSl, .limit = 10'001, .window = 1min},
                        "sliding_log keeps one entry per allowed request, so its limit must be at "
                        "most 10000 (got 10001); use sliding_window for large limits"},
        InvalidSpecCase{"WindowNotWholeMicroseconds",
                        {.algorithm = kFw, .limit = 10, .window = 1500ns},
                        "fixed_window: window must be a whole number of microseconds, got 1500ns"},
        InvalidSpecCase{
            "RefillPeriodNotWholeMicroseconds",
            {.algorithm = kTb, .capacity = 1, .refill_tokens = 1, .refill_period = 1s + 1ns},
            "token_bucket: refill period must be a whole number of microseconds, got "
            "1000000001ns"},
        InvalidSpecCase{"WindowAboveTenYears",
                        {.algorithm = kSw, .limit = 1, .window = std::chrono::days(3661)},
                        "sliding_window: window must be at most 10 years, got 3661d"},
        InvalidSpecCase{
            "CapacityAbove32Bits",
            {.algorithm = kTb, .capacity = 4'294'967'296, .refill_tokens = 1, .refill_period = 1s},
            "token_bucket: capacity must be at most 4294967295"},
        InvalidSpecCase{"LimitAbove32Bits",
                        {.algorithm = kFw, .limit = 4'294'967'296, .window = 1s},
                        "fixed_window: limit must be at most 4294967295"},
        InvalidSpecCase{"BucketTooLargeToCountExactly",
                        {.algorithm = kGcra,
                         .capacity = 4'294'967'295,
                         .refill_tokens = 1,
                         .refill_period = std::chrono::days(3650)},
                        "gcra: capacity 4294967295 with a refill of 1 per 3650d is too large to "
                        "count exactly"}),
    [](const ::testing::TestParamInfo<InvalidSpecCase>& info) { return info.param.name; });

TEST(Limit, SlidingLogAcceptsExactlyTenThousand) {
  Result<Limit> r = Limit::sliding_log(10'000, 1min);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->size(), 10'000u);
}

TEST(Limit, ConvenienceConstructorsValidateLikeCreate) {
  EXPECT_EQ(Limit::token_bucket(0, 1, 1s).error().message,
            "token_bucket: capacity must be at least 1");
  EXPECT_EQ(Limit::gcra(1, 0, 1s).error().message, "gcra: refill rate must be greater than 0");
  EXPECT_EQ(Limit::fixed_window(1, 0s).error().message,
            "fixed_window: window must be greater than 0");
  EXPECT_EQ(Limit::sliding_log(20'000, 1s).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(Limit::sliding_window(0, 1s).error().message,
            "sliding_window: limit must be at least 1");
}

TEST(Limit, BucketPeriodIsTheTimeToRefillFromEmptyRoundedUp) {
  // 100 tokens at 10 per second: 10 s exactly.
  EXPECT_EQ(must(Limit::token_bucket(100, 10, 1s)).period(), 10s);
  // 10 tokens at 3 per second: 3.333... s, rounded up to the nanosecond.
  EXPECT_EQ(must(Limit::gcra(10, 3, 1s)).period(), Nanos{3'333'333'334});
  // 7 per minute, capacity 7: one minute.
  EXPECT_EQ(must(Limit::token_bucket(7, 7, 1min)).period(), 1min);
}

TEST(Limit, BucketUnitsAreTheReducedRefillFraction) {
  // 3 tokens per second = 3 units per 10^9 ns: a token is 10^9 units, 3 units per ns.
  const Limit three = must(Limit::token_bucket(5, 3, 1s));
  EXPECT_EQ(three.token_units(), 1'000'000'000);
  EXPECT_EQ(three.units_per_ns(), 3);
  // 10^6 per second reduces to one token per 1000 ns.
  const Limit million = must(Limit::token_bucket(1'000'000, 1'000'000, 1s));
  EXPECT_EQ(million.token_units(), 1'000);
  EXPECT_EQ(million.units_per_ns(), 1);
}

TEST(Limit, WindowPeriodIsTheWindow) {
  const Limit l = must(Limit::sliding_window(60, 1min));
  EXPECT_EQ(l.size(), 60u);
  EXPECT_EQ(l.period(), 1min);
}

TEST(Limit, EqualSpecsHaveEqualFingerprintsAndDifferentSpecsDiffer) {
  EXPECT_EQ(must(Limit::token_bucket(100, 10, 1s)).fingerprint(),
            must(Limit::token_bucket(100, 10, 1s)).fingerprint());
  EXPECT_NE(must(Limit::token_bucket(100, 10, 1s)).fingerprint(),
            must(Limit::gcra(100, 10, 1s)).fingerprint());
  EXPECT_NE(must(Limit::token_bucket(100, 10, 1s)).fingerprint(),
            must(Limit::token_bucket(100, 10, 2s)).fingerprint());
  EXPECT_NE(must(Limit::fixed_window(100, 1min)).fingerprint(),
            must(Limit::sliding_window(100, 1min)).fingerprint());
}

TEST(Limit, DescribeNamesTheAlgorithmAndItsParameters) {
  EXPECT_EQ(must(Limit::token_bucket(100, 10, 1s)).describe(),
            "token_bucket capacity=100 refill=10/1s");
  EXPECT_EQ(must(Limit::gcra(5, 1, 1500ms)).describe(), "gcra capacity=5 refill=1/1500ms");
  EXPECT_EQ(must(Limit::fixed_window(100, 1min)).describe(), "fixed_window limit=100 window=1m");
  EXPECT_EQ(must(Limit::sliding_log(3, 1h)).describe(), "sliding_log limit=3 window=1h");
  EXPECT_EQ(must(Limit::sliding_window(60, std::chrono::days(1))).describe(),
            "sliding_window limit=60 window=1d");
}

TEST(Limit, AlgorithmNamesRoundTrip) {
  for (Algorithm a : {Algorithm::kTokenBucket, Algorithm::kGcra, Algorithm::kFixedWindow,
                      Algorithm::kSlidingLog, Algorithm::kSlidingWindow}) {
    Algorithm parsed = Algorithm::kTokenBucket;
    ASSERT_TRUE(parse_algorithm(algorithm_name(a), &parsed)) << algorithm_name(a);
    EXPECT_EQ(parsed, a);
  }
  Algorithm unused = Algorithm::kGcra;
  EXPECT_FALSE(parse_algorithm("leaky_bucket", &unused));
  EXPECT_EQ(unused, Algorithm::kGcra);
}

TEST(CheckCost, CostZeroIsAnInvalidArgument) {
  Status s = core::check_cost(must(Limit::token_bucket(100, 10, 1s)), 0);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.error().message, "cost must be at least 1");
}

TEST(CheckCost, CostAboveTheSizeCanNeverBeAllowed) {
  Status s = core::check_cost(must(Limit::token_bucket(100, 10, 1s)), 101);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kCostExceedsLimit);
  EXPECT_EQ(s.error().message,
            "cost 101 exceeds the limit's size 100 (token_bucket capacity=100 refill=10/1s): this "
            "request can never be allowed");
}

TEST(CheckCost, CostEqualToTheSizeIsAccepted) {
  EXPECT_TRUE(core::check_cost(must(Limit::sliding_window(100, 1min)), 100).ok());
}

}  // namespace
}  // namespace sluice
