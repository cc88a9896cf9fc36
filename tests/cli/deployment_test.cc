// load_deployment(): the one load path of serve, validate and reload. The
// server config and its RLS descriptor files load together, all or nothing,
// and every limit of both is checked against the store: with store.backend
// redis a limit the Lua scripts cannot count exactly is an error at its
// file:line:col, wherever it is written.
#include "cli/deployment.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli/store_setup.h"

namespace sluice::cli {
namespace {

// A temporary folder with files, removed afterwards.
class Files {
 public:
  Files() {
    char dir[] = "/tmp/sluice-deployment-XXXXXX";
    dir_ = ::mkdtemp(dir) != nullptr ? dir : "";
  }
  ~Files() { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) const {
    const std::filesystem::path path = std::filesystem::path(dir_) / name;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << text;
    return path.string();
  }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

Deployment load(const std::string& path) {
  return load_deployment(path, {},
                         [](const policy::Config& c) { return limit_check_for(c.store); });
}

std::vector<std::string> texts(const std::vector<config::ConfigError>& errors) {
  std::vector<std::string> out;
  for (const config::ConfigError& e : errors) out.push_back(e.text());
  return out;
}

// capacity 53,000 refilled 1 per day: the core counts it in nanoseconds
// (53,000 x 8.64e13 < 2^62), but 2 x 53,000 x 8.64e10 us is beyond the 2^53
// the scripts' doubles count exactly.
constexpr const char* kTooBig = "{capacity: 53000, refill_rate: 1/d}";
const std::string kMessage = "with store.backend redis: the Redis store cannot count token_bucket";

TEST(Deployment, ALimitTheRedisStoreCannotCountIsAnErrorAtItsPosition) {
  Files files;
  const std::string path = files.write("sluice.yaml", std::string(R"(routes:
  - match: GET /a
    limits: [)") + kTooBig + R"(]
policies:
  big: )" + kTooBig + R"(
store:
  backend: redis
default:
  limits: [{algorithm: gcra, capacity: 53000, refill_rate: 1/d}]
)");
  const Deployment d = load(path);
  EXPECT_FALSE(d.config.has_value());
  const std::vector<std::string> errors = texts(d.errors);
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_EQ(errors[0].rfind(path + ":3:14: routes[0].limits[0]: " + kMessage, 0), 0u) << errors[0];
  EXPECT_EQ(errors[1].rfind(path + ":5:8: policies.big: " + kMessage, 0), 0u) << errors[1];
  EXPECT_EQ(errors[2].rfind(path + ":9:12: default.limits[0]: with store.backend redis: the "
                                   "Redis store cannot count gcra",
                            0),
            0u)
      << errors[2];
}

TEST(Deployment, CachedModeRefusesWhatItCannotDecideLocallyAtItsPosition) {
  Files files;
  const std::string path = files.write("sluice.yaml", R"(store:
  backend: redis
  redis: {mode: cached}
policies:
  bucket: {capacity: 5, refill_rate: 1/s}
  window: {algorithm: fixed_window, limit: 10, window: 1m}
  smooth: {algorithm: sliding_window, limit: 10, window: 1m}
  locked: {capacity: 5, refill_rate: 1/s, block: 1m}
)");
  const Deployment d = load(path);
  EXPECT_FALSE(d.config.has_value());
  EXPECT_EQ(
      texts(d.errors),
      (std::vector<std::string>{
          path + ":7:11: policies.smooth: with store.backend redis: store.redis.mode cached "
                 "cannot decide sliding_window limit=10 window=1m locally: only token_bucket and "
                 "fixed_window merge hits from several instances (use mode exact for this "
                 "limit's deployment)",
          path + ":8:11: policies.locked: with store.backend redis: store.redis.mode cached "
                 "cannot decide token_bucket capacity=5 refill=1/1s block=1m locally: a block must "
                 "be seen by every "
                 "instance the moment it starts (use mode exact for this limit's "
                 "deployment)"}));
}

TEST(Deployment, TheSameLimitIsFineOnTheMemoryStore) {
  Files files;
  EXPECT_TRUE(load(files.write("a.yaml", std::string("policies:\n  big: ") + kTooBig + "\n")).ok());
  EXPECT_TRUE(
      load(files.write("b.yaml", std::string("store: {backend: memory}\npolicies:\n  big: ") +
                                     kTooBig + "\n"))
          .ok());
}

TEST(Deployment, LimitsThatFitTheRedisStoreAreAccepted) {
  Files files;
  const Deployment d = load(files.write("sluice.yaml", R"(store: {backend: redis}
policies:
  login: {capacity: 5, refill_rate: 1/s}
  daily: {capacity: 100, refill_rate: 1/d}
  window: {algorithm: sliding_window, limit: 1000000, window: 1d}
)"));
  EXPECT_TRUE(d.ok()) << texts(d.errors).front();
  ASSERT_TRUE(d.config.has_value());
  EXPECT_EQ(d.config->policies.size(), 3u);
}

TEST(Deployment, TheDescriptorFilesLoadWithTheConfigAndTheirLimitsAreCheckedToo) {
  Files files;
  files.write("rls/edge.yaml", R"(domain: edge
descriptors:
  - key: path
    rate_limit: {algorithm: token_bucket, capacity: 53000, refill_rate: 1/d}
  - key: ip
    rate_limit: {unit: second, requests_per_unit: 10}
)");
  const std::string config = R"(grpc: 127.0.0.1:0
rls: {config_dir: rls}
)";
  const Deployment memory = load(files.write("memory.yaml", config));
  ASSERT_TRUE(memory.ok()) << texts(memory.errors).front();
  ASSERT_NE(memory.rls, nullptr);
  EXPECT_NE(memory.rls->find_domain("edge"), nullptr);

  const Deployment redis = load(files.write("redis.yaml", config + "store: {backend: redis}\n"));
  EXPECT_FALSE(redis.config.has_value());
  EXPECT_EQ(redis.rls, nullptr);
  ASSERT_EQ(redis.errors.size(), 1u);
  EXPECT_EQ(redis.errors[0].text().rfind(files.dir() +
                                             "/rls/edge.yaml:3:5: domain edge, "
                                             "descriptor path: " +
                                             kMessage,
                                         0),
            0u)
      << redis.errors[0].text();
  EXPECT_EQ(redis.descriptor_errors, 1u);
  EXPECT_EQ(redis.descriptor_dir, files.dir() + "/rls");
}

TEST(Deployment, ABadDescriptorFileRefusesTheWholeDeployment) {
  Files files;
  files.write("rls/bad.yaml", "domain: edge\ndescriptors:\n  - key: a\n    rate_limt: {}\n");
  const Deployment d =
      load(files.write("sluice.yaml", "grpc: 127.0.0.1:0\nrls: {config_dir: rls}\n"));
  EXPECT_FALSE(d.config.has_value());
  EXPECT_EQ(texts(d.errors),
            std::vector<std::string>{files.dir() + "/rls/bad.yaml:4:5: descriptors[0].rate_limt: "
                                                   "unknown key; did you mean `rate_limit`?"});
}

// serve and validate --listen/--admin/--upstream: the command line wins over
// the file, under the file's rules, and a bad value names its option.
TEST(Deployment, CommandLineOverridesWinOverTheFileUnderItsRules) {
  Files files;
  const std::string path = files.write("sluice.yaml", R"(listen: 127.0.0.1:8080
upstream: {url: http://127.0.0.1:3000, timeout: 5s}
)");
  const auto check = [](const policy::Config& c) { return limit_check_for(c.store); };
  const Deployment d = load_deployment(
      path, {"127.0.0.1:18080", "127.0.0.2:19090", "http://10.0.0.9:8000/v2"}, check);
  ASSERT_TRUE(d.ok()) << texts(d.errors).front();
  EXPECT_EQ(d.config->listen.text(), "127.0.0.1:18080");
  EXPECT_EQ(d.config->admin.text(), "127.0.0.2:19090");
  EXPECT_EQ(d.config->upstream->url, "http://10.0.0.9:8000/v2");
  EXPECT_EQ(d.config->upstream->base_path, "/v2");
  EXPECT_EQ(d.config->upstream->timeout, std::chrono::seconds(5));  // the file's stays

  const Deployment bad = load_deployment(path, {"nowhere", "0.0.0.0:9090", std::nullopt}, check);
  EXPECT_EQ(texts(bad.errors),
            (std::vector<std::string>{
                "--listen: must be host:port like 127.0.0.1:8080 or [::1]:8080, got \"nowhere\" "
                "(the port is missing)",
                path + ":1:1: an admin port on \"0.0.0.0\" is reachable from other hosts and can "
                       "reload the config and reset limits: set `admin_token_file` (a bearer token "
                       "for it), `admin_read_only: true` (no POST, PUT or DELETE), or bind it to "
                       "127.0.0.1"}));
}

}  // namespace
}  // namespace sluice::cli
