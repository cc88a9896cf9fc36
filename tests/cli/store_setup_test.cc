// The store.redis keys of a config file become the Redis store's options,
// as `sluice serve` builds its store (cli/store_setup.h).
#include "cli/store_setup.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "policy/config_loader.h"

namespace sluice::cli {
namespace {

// The options `sluice serve` builds its Redis store with, from a config file
// holding `yaml` (read as serve reads it: load_config_file).
RedisStoreOptions store_options_from_file(const std::string& yaml) {
  const std::filesystem::path file = std::filesystem::temp_directory_path() /
                                     ("sluice-store-setup-" + std::to_string(::getpid()) + ".yaml");
  {
    std::ofstream out(file);
    out << yaml;
  }
  const policy::LoadResult r = policy::load_config_file(file.string());
  std::filesystem::remove(file);
  std::string all;
  for (const policy::ConfigError& e : r.errors) all += e.text() + "\n";
  EXPECT_TRUE(r.config.has_value()) << all;
  return r.config ? redis_store_options(r.config->store.redis) : RedisStoreOptions{};
}

TEST(StoreSetup, TimeSourceLocalInTheFileMakesTheStoreDecideOnThisHostsClock) {
  const RedisStoreOptions o =
      store_options_from_file("store:\n  backend: redis\n  redis:\n    time_source: local\n");
  EXPECT_EQ(o.time_source, RedisTimeSource::kLocal);
  // Keys outlive their state by 1 s, for clocks somewhat ahead of Redis's.
  EXPECT_EQ(o.ttl_extra, std::chrono::milliseconds(1000));
}

TEST(StoreSetup, TimeSourceIsRedisUnlessTheFileSaysOtherwise) {
  for (const char* yaml : {"store:\n  backend: redis\n",
                           "store:\n  backend: redis\n  redis:\n    time_source: redis\n"}) {
    const RedisStoreOptions o = store_options_from_file(yaml);
    EXPECT_EQ(o.time_source, RedisTimeSource::kRedis) << yaml;
    EXPECT_EQ(o.ttl_extra, std::chrono::milliseconds(0)) << yaml;
  }
}

TEST(StoreSetup, AnUnknownTimeSourceIsAnErrorAtItsPosition) {
  const policy::LoadResult r =
      policy::load_config_string("store:\n  redis:\n    time_source: ntp\n", "t.yaml");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].text(),
            "t.yaml:3:18: store.redis.time_source: must be one of redis, local, got \"ntp\"");
}

TEST(StoreSetup, ASentinelGivesTheStoreNoAddressesButTheSentinelsAndTheMastersCredentials) {
  const std::filesystem::path password =
      std::filesystem::temp_directory_path() /
      ("sluice-store-setup-" + std::to_string(::getpid()) + ".pass");
  std::ofstream(password) << "sentinel-secret\n";
  const RedisStoreOptions o = store_options_from_file(
      "store:\n  backend: redis\n  redis:\n    sentinel:\n      master: mymaster\n"
      "      addresses: [10.0.0.1:26379, \"redis://watcher:pw@10.0.0.2:26379\"]\n"
      "      password_file: " +
      password.string() + "\n    username: alice\n    password: s3cret\n    database: 2\n");
  std::filesystem::remove(password);
  EXPECT_TRUE(o.addresses.empty());
  EXPECT_FALSE(o.cluster);
  EXPECT_EQ(o.sentinel.master, "mymaster");
  EXPECT_EQ(o.sentinel.addresses,
            (std::vector<std::string>{"10.0.0.1:26379", "redis://watcher:pw@10.0.0.2:26379"}));
  // For the sentinels whose address carries no credentials.
  EXPECT_EQ(o.sentinel.password, "sentinel-secret");
  EXPECT_EQ(o.sentinel.username, "");
  EXPECT_EQ(o.username, "alice");
  EXPECT_EQ(o.password, "s3cret");
  EXPECT_EQ(o.database, 2);
}

TEST(StoreSetup, TheDenyCacheIsOnUnlessTheFileTurnsItOff) {
  EXPECT_TRUE(store_options_from_file("store:\n  backend: redis\n").deny_cache);
  EXPECT_FALSE(
      store_options_from_file("store:\n  backend: redis\n  redis:\n    deny_cache: false\n")
          .deny_cache);
}

TEST(StoreSetup, ModeIsExactUnlessTheFileAsksForCachedWithItsSyncInterval) {
  const RedisStoreOptions exact = store_options_from_file("store:\n  backend: redis\n");
  EXPECT_EQ(exact.mode, RedisMode::kExact);
  const RedisStoreOptions cached = store_options_from_file(
      "store:\n  backend: redis\n  redis:\n    mode: cached\n    sync_interval: 20ms\n");
  EXPECT_EQ(cached.mode, RedisMode::kCached);
  EXPECT_EQ(cached.sync_interval, std::chrono::milliseconds(20));
  EXPECT_EQ(store_options_from_file("store:\n  backend: redis\n  redis:\n    mode: cached\n")
                .sync_interval,
            std::chrono::milliseconds(50));
}

TEST(StoreSetup, ADenyCacheThatIsNotABooleanIsAnErrorAtItsPosition) {
  const policy::LoadResult r =
      policy::load_config_string("store:\n  redis:\n    deny_cache: sometimes\n", "t.yaml");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].text(),
            "t.yaml:3:17: store.redis.deny_cache: must be true or false, got \"sometimes\"");
}

// A redis:// URL's ACL user and password reach the store's AUTH.
TEST(StoreSetup, TheUrlsUserAndPasswordBecomeTheStoresCredentials) {
  const RedisStoreOptions o = store_options_from_file(
      "store:\n  backend: redis\n  redis:\n    url: redis://sluice:s%40cret@10.0.0.5:6380/2\n");
  EXPECT_EQ(o.addresses, std::vector<std::string>{"10.0.0.5:6380"});
  EXPECT_EQ(o.username, "sluice");
  EXPECT_EQ(o.password, "s@cret");
  EXPECT_EQ(o.database, 2);
}

}  // namespace
}  // namespace sluice::cli
