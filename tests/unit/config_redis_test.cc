// store.backend redis at config load: limits the Redis scripts cannot count
// exactly are refused with their position, wherever they are written.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "policy/config_loader.h"

namespace sluice::policy {
namespace {

std::vector<std::string> errors_of(std::string_view yaml) {
  const LoadResult r = load_config_string(yaml, "t.yaml");
  std::vector<std::string> out;
  for (const ConfigError& e : r.errors) out.push_back(e.text());
  EXPECT_EQ(r.config.has_value(), r.errors.empty());
  return out;
}

// capacity 53,000 refilled 1 per day: the core counts it in nanoseconds
// (53,000 x 8.64e13 < 2^62), but 2 x 53,000 x 8.64e10 us is beyond the 2^53
// the scripts' doubles count exactly.
constexpr const char* kTooBig = "{capacity: 53000, refill_rate: 1/d}";
const std::string kMessage = "with store.backend redis: the Redis store cannot count token_bucket";

TEST(ConfigRedis, ALimitTheScriptsCannotCountIsAnErrorAtItsPosition) {
  const std::vector<std::string> errors = errors_of(std::string(R"(routes:
  - match: GET /a
    limits: [)") + kTooBig + R"(]
policies:
  big: )" + kTooBig + R"(
store:
  backend: redis
default:
  limits: [{algorithm: gcra, capacity: 53000, refill_rate: 1/d}]
)");
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_EQ(errors[0].rfind("t.yaml:3:14: routes[0].limits[0]: " + kMessage, 0), 0u) << errors[0];
  EXPECT_EQ(errors[1].rfind("t.yaml:5:8: policies.big: " + kMessage, 0), 0u) << errors[1];
  EXPECT_EQ(errors[2].rfind("t.yaml:9:12: default.limits[0]: with store.backend redis: the "
                            "Redis store cannot count gcra",
                            0),
            0u)
      << errors[2];
}

TEST(ConfigRedis, TheSameLimitIsFineOnTheMemoryStore) {
  EXPECT_TRUE(errors_of(std::string("policies:\n  big: ") + kTooBig + "\n").empty());
  EXPECT_TRUE(
      errors_of(std::string("store: {backend: memory}\npolicies:\n  big: ") + kTooBig + "\n")
          .empty());
}

TEST(ConfigRedis, LimitsThatFitAreAccepted) {
  EXPECT_TRUE(errors_of(R"(store: {backend: redis}
policies:
  login: {capacity: 5, refill_rate: 1/s}
  daily: {capacity: 100, refill_rate: 1/d}
  window: {algorithm: sliding_window, limit: 1000000, window: 1d}
)")
                  .empty());
}

}  // namespace
}  // namespace sluice::policy
