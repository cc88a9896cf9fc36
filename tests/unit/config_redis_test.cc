// store.backend redis at config load: limits the Redis scripts cannot count
// exactly are refused with their position, wherever they are written; the
// store.redis keys of a config file become the Redis store's options.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli/store_setup.h"
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

// The options `sluice serve` builds its Redis store with, from a config file
// holding `yaml` (read as serve reads it: load_config_file).
RedisStoreOptions store_options_from_file(const std::string& yaml) {
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() /
      ("sluice-config-redis-" + std::to_string(::getpid()) + ".yaml");
  {
    std::ofstream out(file);
    out << yaml;
  }
  const LoadResult r = load_config_file(file.string());
  std::filesystem::remove(file);
  std::string all;
  for (const ConfigError& e : r.errors) all += e.text() + "\n";
  EXPECT_TRUE(r.config.has_value()) << all;
  return r.config ? cli::redis_store_options(r.config->store.redis) : RedisStoreOptions{};
}

TEST(ConfigRedis, TimeSourceLocalInTheFileMakesTheStoreDecideOnThisHostsClock) {
  const RedisStoreOptions o =
      store_options_from_file("store:\n  backend: redis\n  redis:\n    time_source: local\n");
  EXPECT_EQ(o.time_source, RedisTimeSource::kLocal);
  // Keys outlive their state by 1 s, for clocks somewhat ahead of Redis's.
  EXPECT_EQ(o.ttl_extra, std::chrono::milliseconds(1000));
}

TEST(ConfigRedis, TimeSourceIsRedisUnlessTheFileSaysOtherwise) {
  for (const char* yaml : {"store:\n  backend: redis\n",
                           "store:\n  backend: redis\n  redis:\n    time_source: redis\n"}) {
    const RedisStoreOptions o = store_options_from_file(yaml);
    EXPECT_EQ(o.time_source, RedisTimeSource::kRedis) << yaml;
    EXPECT_EQ(o.ttl_extra, std::chrono::milliseconds(0)) << yaml;
  }
}

TEST(ConfigRedis, AnUnknownTimeSourceIsAnErrorAtItsPosition) {
  EXPECT_EQ(errors_of("store:\n  redis:\n    time_source: ntp\n"),
            std::vector<std::string>{
                "t.yaml:3:18: store.redis.time_source: must be one of redis, local, got \"ntp\""});
}

}  // namespace
}  // namespace sluice::policy
