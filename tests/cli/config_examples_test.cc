// Every example config under examples/ loads cleanly, and the seed's tiers in
// examples/tiered-api.yaml mean exactly what the article says. Also
// `sluice validate` on them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "cli/validate.h"
#include "policy/config_loader.h"
#include "source_dir.h"

namespace sluice::policy {
namespace {

using std::chrono::seconds;

using sluice::test::source_dir;

std::string load_errors(const std::filesystem::path& file) {
  const LoadResult r = load_config_file(file.string());
  std::string all;
  for (const ConfigError& e : r.errors) all += e.text() + "\n";
  return all;
}

TEST(ConfigExamples, EveryExampleFileLoadsCleanly) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(source_dir() / "examples")) {
    // consumers.yaml is tiered-api.yaml's consumers file, not a config.
    if (entry.path().filename() == "consumers.yaml") continue;
    if (entry.path().extension() == ".yaml" || entry.path().extension() == ".yml")
      files.push_back(entry.path());
  }
  ASSERT_GE(files.size(), 3u) << "expected quickstart.yaml, tiered-api.yaml and gateway.yaml";
  for (const auto& f : files) EXPECT_EQ(load_errors(f), "") << f;
}

const RouteLimit& only_limit(const Config& c, std::string_view name) {
  for (const Route& r : c.routes)
    if (r.name == name && r.limits.size() == 1) return r.limits[0];
  ADD_FAILURE() << "no route " << name << " with one limit";
  static const RouteLimit none{"", false, *Limit::token_bucket(1, 1, seconds(1)), {}};
  return none;
}

const Route* route(const Config& c, std::string_view name) {
  for (const Route& r : c.routes)
    if (r.name == name) return &r;
  return nullptr;
}

TEST(ConfigExamples, TieredApiHasTheSeedsTiers) {
  const LoadResult r = load_config_file((source_dir() / "examples/tiered-api.yaml").string());
  ASSERT_TRUE(r.config.has_value());
  const Config& c = *r.config;
  ASSERT_EQ(c.routes.size(), 4u);
  EXPECT_EQ(only_limit(c, "GET /api/status").limit, *Limit::token_bucket(1000, 100, seconds(1)));
  EXPECT_EQ(only_limit(c, "GET /api/search").limit, *Limit::token_bucket(20, 5, seconds(1)));
  EXPECT_EQ(only_limit(c, "POST /api/orders").limit, *Limit::token_bucket(10, 2, seconds(1)));
  EXPECT_EQ(c.routes[2].key.text, "header:x-api-key");
  const Route* login_route = route(c, "POST /api/auth/login");
  ASSERT_NE(login_route, nullptr);
  ASSERT_EQ(login_route->limits.size(), 2u);
  const RouteLimit& login = login_route->limits[0];
  EXPECT_TRUE(login.named_policy);
  EXPECT_EQ(login.name, "login");
  EXPECT_EQ(login.limit, *Limit::token_bucket(5, 1, seconds(1)));
  // The lockout: 5 failed logins in 15 minutes, then 30 minutes out.
  const RouteLimit& lockout = login_route->limits[1];
  EXPECT_EQ(lockout.limit.describe(), "fixed_window limit=5 window=15m block=30m");
  EXPECT_EQ(lockout.count_status, (std::vector<int>{401, 403}));
  // Plans per API key: a daily quota on search and orders, one per consumer.
  ASSERT_EQ(c.plans.size(), 2u);
  EXPECT_EQ(c.plans[0].name, "free");
  ASSERT_EQ(c.plans[1].limits.size(), 1u);
  EXPECT_EQ(c.plans[1].limits[0].limit.describe(), "fixed_window limit=100000 window=1d");
  ASSERT_TRUE(c.consumers.has_value());
  EXPECT_EQ(c.consumers->key.text, "header:x-api-key");
  EXPECT_EQ(c.consumers->unknown_plan, 0u);
  EXPECT_EQ(c.consumers->table->find("demo-pro-key"), 1);
  EXPECT_EQ(c.consumers->table->size(), 2u);
  EXPECT_EQ(route(c, "GET /api/search")->plan_at, 1u);
  EXPECT_EQ(route(c, "POST /api/orders")->plan_at, 1u);
  EXPECT_EQ(route(c, "GET /api/status")->plan_at, std::nullopt);
  ASSERT_TRUE(c.default_route.has_value());
  EXPECT_EQ(c.default_route->key.text, "ip");
  ASSERT_EQ(c.default_route->limits.size(), 1u);
  EXPECT_EQ(c.default_route->limits[0].limit, *Limit::token_bucket(100, 20, seconds(1)));
}

TEST(ConfigExamples, QuickstartIsAGatewayOnLoopbackWithASmallLimit) {
  const LoadResult r = load_config_file((source_dir() / "examples/quickstart.yaml").string());
  ASSERT_TRUE(r.config.has_value());
  const Config& c = *r.config;
  EXPECT_EQ(c.listen.text(), "127.0.0.1:8080");
  EXPECT_EQ(c.admin.text(), "127.0.0.1:9090");
  ASSERT_TRUE(c.upstream.has_value());
  EXPECT_EQ(c.upstream->url, "http://127.0.0.1:3000");
  EXPECT_EQ(c.store.backend, StoreConfig::Backend::kMemory);
  EXPECT_EQ(only_limit(c, "GET /api/hello").limit, *Limit::token_bucket(5, 1, seconds(1)));
}

// `sluice validate`: exit codes and output.
TEST(ConfigValidateCommand, ValidFileExitsZeroWithASummary) {
  const std::string file = (source_dir() / "examples/tiered-api.yaml").string();
  const std::vector<std::string_view> args = {"--config", file};
  testing::internal::CaptureStdout();
  const int rc = cli::run_validate(args);
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(out, "ok: " + file +
                     ": 4 routes, 1 policy, a default limit, memory store, listen 127.0.0.1:8080, "
                     "gateway to http://127.0.0.1:3000, 2 plans for 2 consumers by "
                     "header:x-api-key\n");
}

TEST(ConfigValidateCommand, InvalidFileExitsOneWithEveryError) {
  const std::filesystem::path file = std::filesystem::temp_directory_path() /
                                     ("sluice-validate-" + std::to_string(::getpid()) + ".yaml");
  {
    std::ofstream f(file);
    f << "listen: 8080\nroutes:\n  - match: GET /a\n    limits: [nope]\n";
  }
  const std::string path = file.string();
  const std::string flag = "--config=" + path;
  const std::vector<std::string_view> real_args = {flag};
  testing::internal::CaptureStderr();
  const int rc = cli::run_validate(real_args);
  const std::string err = testing::internal::GetCapturedStderr();
  std::filesystem::remove(file);
  EXPECT_EQ(rc, 1);
  EXPECT_EQ(err, path +
                     ":1:9: listen: must be host:port like 127.0.0.1:8080 or [::1]:8080, got "
                     "\"8080\" (the host is missing: write 127.0.0.1:8080)\n" +
                     path +
                     ":4:14: routes[0].limits[0]: unknown policy \"nope\" (no policies "
                     "are defined under `policies:`)\n" +
                     path + ": 2 errors\n");
}

TEST(ConfigValidateCommand, MissingConfigFlagIsAUsageError) {
  testing::internal::CaptureStderr();
  const int rc = cli::run_validate({});
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(rc, 2);
  EXPECT_EQ(err.rfind("sluice validate: --config FILE is required\n", 0), 0u);
}

}  // namespace
}  // namespace sluice::policy
