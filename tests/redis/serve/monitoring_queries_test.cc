// The Grafana dashboard and the Prometheus alert rules of deploy/ query only
// metrics a live server exports: every sluice_* and process_* name in
// deploy/grafana/sluice.json and deploy/prometheus/alerts.yaml must be in a
// scrape of a server on the store it is about (sluice_redis_*: the Redis
// store; every other: the memory store, with the Envoy RLS on), before any
// traffic (a panel or rule on a missing series shows nothing and alerts on
// nothing).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "redis_server.h"
#include "sluice_process.h"
#include "test_support.h"

namespace sluice::test {
namespace {

namespace fs = std::filesystem;
using testing::RedisServer;

std::string read_source_file(const std::string& relative) {
  std::ifstream in(fs::path(SLUICE_SOURCE_DIR) / relative);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Every metric name the file's text mentions (PromQL in JSON strings or YAML).
std::set<std::string> metric_names_in(const std::string& text) {
  static const std::regex name(R"(\b(?:sluice|process)_[a-z0-9_]*[a-z0-9]\b)");
  std::set<std::string> names;
  for (std::sregex_iterator it(text.begin(), text.end(), name), end; it != end; ++it) {
    names.insert(it->str());
  }
  return names;
}

// The series names of a scrape (histograms as their _bucket, _sum, _count).
std::set<std::string> scraped_names(const std::string& scrape) {
  std::set<std::string> names;
  std::istringstream in(scrape);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    names.insert(line.substr(0, line.find_first_of("{ ")));
  }
  return names;
}

class ScratchDir {
 public:
  ScratchDir() {
    char templ[] = "/tmp/sluice-monitoring-XXXXXX";
    path_ = ::mkdtemp(templ);
  }
  ~ScratchDir() { fs::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(MonitoringQueries, EveryMetricTheDashboardAndTheAlertsQueryIsExported) {
  SLUICE_REQUIRE_REDIS();
  std::set<std::string> queried = metric_names_in(read_source_file("deploy/grafana/sluice.json"));
  const std::set<std::string> in_alerts =
      metric_names_in(read_source_file("deploy/prometheus/alerts.yaml"));
  ASSERT_GE(queried.size(), 15u) << "the dashboard was not read";
  ASSERT_GE(in_alerts.size(), 5u) << "the alert rules were not read";
  queried.insert(in_alerts.begin(), in_alerts.end());

  ScratchDir descriptors;
  std::ofstream(descriptors.path() + "/edge.yaml")
      << "domain: edge\ndescriptors:\n  - key: tenant\n    rate_limit: {unit: hour, "
         "requests_per_unit: 40}\n";
  // A gateway, so that the upstream series are there too (nothing is proxied).
  const auto memory = SluiceProcess::start(
      "grpc: 127.0.0.1:0\nrls:\n  config_dir: " + descriptors.path() +
      "\nupstream:\n  url: http://127.0.0.1:9\nroutes:\n  - match: GET /a\n    limits: [{capacity: 3, refill_rate: 1/h}]\n");
  ASSERT_NE(memory, nullptr);
  const std::set<std::string> memory_names = scraped_names(memory->admin_get("/metrics").body);

  RedisServer redis;
  ASSERT_TRUE(redis.start());
  const auto on_redis = SluiceProcess::start(
      "store:\n  backend: redis\n  redis:\n    addresses: [" + redis.address() +
      "]\nroutes:\n  - match: GET /a\n    limits: [{capacity: 3, refill_rate: 1/h}]\n");
  ASSERT_NE(on_redis, nullptr);
  const std::set<std::string> redis_names = scraped_names(on_redis->admin_get("/metrics").body);

  for (const std::string& name : queried) {
    const bool about_redis = name.rfind("sluice_redis_", 0) == 0;
    const std::set<std::string>& scraped = about_redis ? redis_names : memory_names;
    EXPECT_EQ(scraped.count(name), 1u)
        << name << " is queried by deploy/ but not exported by a server on the "
        << (about_redis ? "Redis" : "memory") << " store";
  }
}

}  // namespace
}  // namespace sluice::test
