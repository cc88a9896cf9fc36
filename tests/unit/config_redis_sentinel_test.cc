// store.redis.sentinel and store.redis.username in the config loader: what a
// valid block gives the store, each mistake reported at its key, and the
// block written back by to_yaml.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "policy/config_loader.h"
#include "policy/config_yaml.h"

namespace sluice::policy {
namespace {

using Errors = std::vector<std::string>;

Errors errors_of(const std::string& yaml) {
  Errors out;
  for (const ConfigError& e : load_config_string(yaml, "t.yaml").errors) out.push_back(e.text());
  return out;
}

// A file of this test process, removed at the end of the test.
class TempFile {
 public:
  TempFile(const std::string& name, const std::string& content)
      : path_(std::filesystem::temp_directory_path() /
              ("sluice-" + std::to_string(::getpid()) + "-" + name)) {
    std::ofstream(path_) << content;
  }
  ~TempFile() { std::filesystem::remove(path_); }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

// store.redis with `lines` (each indented under redis:).
std::string redis_block(const std::string& lines) {
  return "store:\n  backend: redis\n  redis:\n" + lines;
}

TEST(RedisSentinelConfig, ABlockNamesTheMasterTheSentinelsAndTheirPassword) {
  const TempFile password("sentinel.pass", "sentinel-secret\n");
  const LoadResult r = load_config_string(
      redis_block("    sentinel:\n"
                  "      master: mymaster\n"
                  "      addresses: [10.0.0.1:26379, \"redis://watcher:pw@10.0.0.2:26379\"]\n"
                  "      password_file: " +
                  password.path() +
                  "\n"
                  "    username: alice\n"
                  "    password: s3cret\n"
                  "    database: 2\n"),
      "t.yaml");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front().text();
  const RedisConfig& redis = r.config->store.redis;
  EXPECT_EQ(redis.sentinel.master, "mymaster");
  EXPECT_EQ(redis.sentinel.addresses,
            (std::vector<std::string>{"10.0.0.1:26379", "redis://watcher:pw@10.0.0.2:26379"}));
  EXPECT_EQ(redis.sentinel.password_file, password.path());
  EXPECT_EQ(redis.sentinel.password, "sentinel-secret");
  EXPECT_TRUE(redis.addresses.empty());
  EXPECT_EQ(redis.username, "alice");
  EXPECT_EQ(redis.password, "s3cret");
  EXPECT_EQ(redis.database, 2);
  EXPECT_FALSE(redis.tls.enabled);

  // Written back, read again: the same config, the same text.
  const std::string yaml = to_yaml(*r.config);
  EXPECT_NE(yaml.find("sentinel:\n      master: \"mymaster\"\n      addresses:"), std::string::npos)
      << yaml;
  EXPECT_EQ(yaml.find("127.0.0.1:6379"), std::string::npos) << yaml;
  const LoadResult back = load_config_string(yaml, "t.yaml");
  ASSERT_TRUE(back.config.has_value()) << back.errors.front().text() << yaml;
  EXPECT_TRUE(*back.config == *r.config) << yaml;
  EXPECT_EQ(to_yaml(*back.config), yaml);
}

TEST(RedisSentinelConfig, ARedissSentinelTurnsTlsOnForEveryone) {
  const LoadResult r = load_config_string(
      redis_block("    sentinel: {master: m, addresses: [\"rediss://10.0.0.1:26379\"]}\n"),
      "t.yaml");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front().text();
  EXPECT_TRUE(r.config->store.redis.tls.enabled);
  const std::string yaml = to_yaml(*r.config);
  const LoadResult back = load_config_string(yaml, "t.yaml");
  ASSERT_TRUE(back.config.has_value()) << yaml;
  EXPECT_TRUE(*back.config == *r.config) << yaml;
}

TEST(RedisSentinelConfig, EachMistakeIsReportedAtItsKey) {
  EXPECT_EQ(errors_of(redis_block("    sentinel: {masters: m, addresses: [h:26379]}\n")),
            (Errors{"t.yaml:4:15: store.redis.sentinel: `master` is required: the name the "
                    "sentinels monitor the master by",
                    "t.yaml:4:16: store.redis.sentinel.masters: unknown key; did you mean "
                    "`master`?"}));
  EXPECT_EQ(errors_of(redis_block("    sentinel: {master: m}\n")),
            Errors{"t.yaml:4:15: store.redis.sentinel: `addresses` is required: the sentinels' "
                   "host:port (26379 is theirs)"});
  EXPECT_EQ(errors_of(redis_block("    sentinel: {master: \"my master\", addresses: []}\n")),
            (Errors{"t.yaml:4:24: store.redis.sentinel.master: must be the master's name as in "
                    "`sentinel monitor <name> ...`: visible characters, no spaces",
                    "t.yaml:4:48: store.redis.sentinel.addresses: must list at least one "
                    "sentinel"}));
  EXPECT_EQ(
      errors_of(redis_block("    sentinel: {master: m, addresses: [\"redis://h:26379/3\"]}\n")),
      Errors{"t.yaml:4:39: store.redis.sentinel.addresses[0]: a sentinel has no database: leave "
             "out the /3"});
  EXPECT_EQ(errors_of(redis_block("    sentinel: {master: m, addresses: [\"rediss://a:26379\", "
                                  "\"redis://b:26379\"]}\n")),
            Errors{"t.yaml:4:59: store.redis.sentinel.addresses[1]: TLS is all or nothing: this "
                   "sentinel is redis://, another rediss://"});
  EXPECT_EQ(errors_of(redis_block("    cluster: true\n"
                                  "    sentinel: {master: m, addresses: [h:26379]}\n")),
            Errors{"t.yaml:5:15: store.redis.sentinel: `sentinel` and `cluster: true` cannot go "
                   "together: a Redis Cluster fails over by itself"});
  EXPECT_EQ(errors_of(redis_block("    addresses: [h:6379]\n"
                                  "    sentinel: {master: m, addresses: [h:26379]}\n")),
            Errors{"t.yaml:4:16: store.redis.addresses: with `sentinel` the sentinels name the "
                   "master: leave out `addresses` (username, password, database and tls are the "
                   "master's)"});
  const Errors missing = errors_of(redis_block(
      "    sentinel: {master: m, addresses: [h:26379], password_file: /nonexistent/p}\n"));
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_EQ(missing[0].rfind("t.yaml:4:64: store.redis.sentinel.password_file: ", 0), 0u)
      << missing[0];
  EXPECT_NE(missing[0].find("the password file /nonexistent/p"), std::string::npos) << missing[0];
}

TEST(RedisSentinelConfig, AUsernameGoesWithAddressesNotWithAUrl) {
  const LoadResult r = load_config_string(
      redis_block("    addresses: [10.0.0.1:6379, 10.0.0.2:6379]\n    cluster: true\n"
                  "    username: alice\n    password: pw\n"),
      "t.yaml");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front().text();
  EXPECT_EQ(r.config->store.redis.username, "alice");
  const std::string yaml = to_yaml(*r.config);
  EXPECT_NE(yaml.find("username: \"alice\""), std::string::npos) << yaml;
  const LoadResult back = load_config_string(yaml, "t.yaml");
  ASSERT_TRUE(back.config.has_value()) << yaml;
  EXPECT_TRUE(*back.config == *r.config) << yaml;

  EXPECT_EQ(errors_of(redis_block("    url: redis://h:6379\n    username: bob\n")),
            Errors{"t.yaml:5:15: store.redis.username: set either `url` or `username`, not both"});
  EXPECT_EQ(errors_of(redis_block("    username: \"\"\n")),
            Errors{"t.yaml:4:15: store.redis.username: must not be empty (leave it out for the "
                   "default user)"});
}

}  // namespace
}  // namespace sluice::policy
