// watch_config: true through the real binary: a change on disk of the config
// or of a file it names reloads as SIGHUP does (edited in place, renamed
// over, a Kubernetes ConfigMap's `..data` swap, the consumers file); a
// broken, missing or unreadable file keeps the running config and is
// logged once; the watch follows the files the config in force names.
// Every wait is on a metric or a log line.
#include <sys/stat.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "reload_configs.h"
#include "test_support.h"

namespace sluice::test {
namespace {

namespace fs = std::filesystem;

const std::string kWatch = "watch_config: true\n";

// Plans by consumer, the consumers file named relative to the config.
std::string consumers_config(const std::string& file) {
  return kWatch + R"(
headers: [legacy]
plans:
  free: [{capacity: 1, refill_rate: 1/h}]
  pro: [{capacity: 3, refill_rate: 1/h}]
consumers: {key: header:x-api-key, file: )" +
         file + R"(, unknown: reject}
routes:
  - match: GET /api
    limits: [plan]
)";
}

const std::string kWatchReloaded = R"(sluice_config_watch_checks_total{result="reloaded"})";
const std::string kWatchRefused = R"(sluice_config_watch_checks_total{result="refused"})";
const std::string kWatchUnchanged = R"(sluice_config_watch_checks_total{result="unchanged"})";

void write_in_place(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

// An editor's save: a temporary file renamed over the old one.
void write_by_rename(const std::string& path, const std::string& text) {
  write_in_place(path + ".swp", text);
  fs::rename(path + ".swp", path);
}

size_t occurrences(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

std::unique_ptr<SluiceProcess> start_watching(const std::string& yaml,
                                              const SluiceProcess::Files& files = {}) {
  auto server = SluiceProcess::start(yaml, "127.0.0.1", files);
  // The watch starts once the ports serve; a change before it would be missed.
  if (server && !server->wait_for_log("watch_config: watching")) {
    ADD_FAILURE() << "the watch did not start; log:\n" << server->log();
    return nullptr;
  }
  return server;
}

Headers api_key(const std::string& id) {
  return {{"X-Api-Key", id}};
}

TEST(WatchConfig, AnEditInPlaceReloadsTheConfig) {
  auto server = start_watching(kWatch + kBefore);
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(count_allowed(*server, "GET", "/a", 3), 2);  // /a exhausted

  write_in_place(server->config_path(), SluiceProcess::kListenLines + kWatch + kAfter);
  ASSERT_TRUE(server->wait_for_metric(kWatchReloaded, 1)) << server->log();
  EXPECT_EQ(server->metric(kReloadSuccesses), 1);
  EXPECT_EQ(server->metric(kWatchRefused), 0);
  EXPECT_NE(server->log().find("watch_config: " + server->config_path() + " changed on disk"),
            std::string::npos)
      << server->log();
  // The same reload as SIGHUP's: /a unchanged keeps its state, /b is new, /c added.
  EXPECT_EQ(count_allowed(*server, "GET", "/a", 1), 0);
  EXPECT_EQ(server->get("/b").header("X-RateLimit-Limit"), "5");
  EXPECT_EQ(server->get("/c").header("X-RateLimit-Limit"), "1");
  const HttpResponse stats = server->admin_get("/admin/stats");
  EXPECT_NE(stats.body.find(R"("reloads":{"succeeded":1,"failed":0,"last":{"ok":true,)"),
            std::string::npos)
      << stats.body;
}

TEST(WatchConfig, AFileRenamedOverTheConfigReloadsIt) {
  auto server = start_watching(kWatch + kBefore);
  ASSERT_NE(server, nullptr);
  write_by_rename(server->config_path(), SluiceProcess::kListenLines + kWatch + kAfter);
  ASSERT_TRUE(server->wait_for_metric(kWatchReloaded, 1)) << server->log();
  EXPECT_EQ(server->metric(kReloadSuccesses), 1);
  EXPECT_EQ(server->get("/b").header("X-RateLimit-Limit"), "5");
}

// The layout and the update of a Kubernetes ConfigMap volume: the file is a
// symlink into `..data`, itself a symlink to a timestamped folder; an update
// writes a new folder, points a new link at it and renames that link over
// `..data`, then removes the old folder.
TEST(WatchConfig, AConfigMapSwapOfItsDataLinkReloads) {
  const std::string dir = make_temp_dir();
  const std::string volume = dir + "/config";
  const std::string old_data = "..2024_05_01_10_00_00.1";
  const std::string new_data = "..2024_05_01_10_05_00.2";
  fs::create_directories(volume + "/" + old_data);
  write_in_place(volume + "/" + old_data + "/sluice.yaml",
                 SluiceProcess::kListenLines + kWatch + kBefore);
  fs::create_directory_symlink(old_data, volume + "/..data");
  fs::create_symlink("..data/sluice.yaml", volume + "/sluice.yaml");
  auto server = SluiceProcess::start_prepared(dir, volume + "/sluice.yaml");
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(server->wait_for_log("watch_config: watching")) << server->log();
  EXPECT_EQ(server->get("/b").header("X-RateLimit-Limit"), "3");

  fs::create_directory(volume + "/" + new_data);
  write_in_place(volume + "/" + new_data + "/sluice.yaml",
                 SluiceProcess::kListenLines + kWatch + kAfter);
  fs::create_directory_symlink(new_data, volume + "/..data_tmp");
  fs::rename(volume + "/..data_tmp", volume + "/..data");
  fs::remove_all(volume + "/" + old_data);

  ASSERT_TRUE(server->wait_for_metric(kWatchReloaded, 1)) << server->log();
  EXPECT_EQ(server->metric(kReloadSuccesses), 1);
  EXPECT_EQ(server->get("/b").header("X-RateLimit-Limit"), "5");
  EXPECT_EQ(server->get("/c").header("X-RateLimit-Limit"), "1");
}

TEST(WatchConfig, AChangedConsumersFileReloads) {
  auto server =
      start_watching(consumers_config("consumers.yaml"), {{"consumers.yaml", "key-a: free\n"}});
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->get("/api", api_key("key-a")).header("X-RateLimit-Limit"), "1");

  write_by_rename(server->dir() + "/consumers.yaml", "key-a: pro\n");
  ASSERT_TRUE(server->wait_for_metric(kWatchReloaded, 1)) << server->log();
  EXPECT_NE(server->log().find("watch_config: " + server->dir() + "/consumers.yaml changed"),
            std::string::npos)
      << server->log();
  EXPECT_EQ(server->get("/api", api_key("key-a")).header("X-RateLimit-Limit"), "3");
}

TEST(WatchConfig, ABrokenConfigIsLoggedOnceAndTheRunningOneServesUntilItIsFixed) {
  auto server = start_watching(kWatch + kBefore);
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(count_allowed(*server, "GET", "/a", 1), 1);

  server->rewrite_config(kWatch + kBroken);
  ASSERT_TRUE(server->wait_for_metric(kWatchRefused, 1)) << server->log();
  EXPECT_EQ(server->metric(kReloadFailures), 1);
  EXPECT_EQ(occurrences(server->log(), "reload refused"), 1u) << server->log();
  // kBroken's errors, a line further down behind watch_config.
  EXPECT_NE(server->log().find(server->config_path() + ":8:25: "), std::string::npos)
      << server->log();
  EXPECT_NE(server->log().find(server->config_path() + ":10:28: "), std::string::npos)
      << server->log();
  // The running config, with its state: /a has 1 of 2 left.
  EXPECT_EQ(count_allowed(*server, "GET", "/a", 3), 1);
  EXPECT_EQ(server->get("/b").header("X-RateLimit-Limit"), "3");

  // The same broken bytes written again, and a touch: checked, not tried
  // again, not logged again.
  const long long unchanged = server->metric(kWatchUnchanged);
  server->rewrite_config(kWatch + kBroken);
  ::chmod(server->config_path().c_str(), 0600);
  ASSERT_TRUE(server->wait_for_metric(kWatchUnchanged, unchanged + 1)) << server->log();
  EXPECT_EQ(server->metric(kWatchRefused), 1);
  EXPECT_EQ(server->metric(kReloadFailures), 1);
  EXPECT_EQ(occurrences(server->log(), "reload refused"), 1u) << server->log();

  // Fixed: in force at once.
  server->rewrite_config(kWatch + kAfter);
  ASSERT_TRUE(server->wait_for_metric(kWatchReloaded, 1)) << server->log();
  EXPECT_EQ(server->get("/b").header("X-RateLimit-Limit"), "5");
  EXPECT_EQ(count_allowed(*server, "GET", "/a", 1), 0);  // unchanged: still exhausted
}

TEST(WatchConfig, AFileThatDisappearsKeepsTheRunningConfigUntilItIsBack) {
  auto server =
      start_watching(consumers_config("consumers.yaml"), {{"consumers.yaml", "key-a: free\n"}});
  ASSERT_NE(server, nullptr);
  const std::string file = server->dir() + "/consumers.yaml";
  ASSERT_EQ(std::remove(file.c_str()), 0);
  ASSERT_TRUE(server->wait_for_metric(kWatchRefused, 1)) << server->log();
  EXPECT_NE(server->log().find("cannot open the consumers file"), std::string::npos)
      << server->log();
  EXPECT_EQ(server->get("/api", api_key("key-a")).header("X-RateLimit-Limit"), "1");

  write_by_rename(file, "key-a: pro\n");
  ASSERT_TRUE(server->wait_for_metric(kWatchReloaded, 1)) << server->log();
  EXPECT_EQ(server->get("/api", api_key("key-a")).header("X-RateLimit-Limit"), "3");
  EXPECT_EQ(server->metric(kReloadFailures), 1);
}

// Unreadable, not missing: the path now names itself (a symlink loop, put
// there by a rename), so opening it fails even for root, whom permissions
// do not stop.
TEST(WatchConfig, AFileThatBecomesUnreadableKeepsTheRunningConfigAndIsLoggedOnce) {
  auto server =
      start_watching(consumers_config("consumers.yaml"), {{"consumers.yaml", "key-a: free\n"}});
  ASSERT_NE(server, nullptr);
  const std::string file = server->dir() + "/consumers.yaml";
  fs::create_symlink("consumers.yaml", file + ".loop");
  fs::rename(file + ".loop", file);
  ASSERT_TRUE(server->wait_for_metric(kWatchRefused, 1)) << server->log();
  const std::string error =
      "cannot open the consumers file " + file + ": Too many levels of symbolic links";
  EXPECT_EQ(occurrences(server->log(), error), 1u) << server->log();
  EXPECT_EQ(server->get("/api", api_key("key-a")).header("X-RateLimit-Limit"), "1");

  // Replaced by another such loop: still nothing to read, nothing tried or
  // logged again.
  const long long unchanged = server->metric(kWatchUnchanged);
  fs::create_symlink("consumers.yaml", file + ".loop");
  fs::rename(file + ".loop", file);
  ASSERT_TRUE(server->wait_for_metric(kWatchUnchanged, unchanged + 1)) << server->log();
  EXPECT_EQ(server->metric(kWatchRefused), 1);
  EXPECT_EQ(occurrences(server->log(), error), 1u) << server->log();

  write_by_rename(file, "key-a: pro\n");
  ASSERT_TRUE(server->wait_for_metric(kWatchReloaded, 1)) << server->log();
  EXPECT_EQ(server->get("/api", api_key("key-a")).header("X-RateLimit-Limit"), "3");
  EXPECT_EQ(server->metric(kReloadFailures), 1);
}

TEST(WatchConfig, TheWatchFollowsTheFilesTheConfigInForceNames) {
  auto server = start_watching(consumers_config("a.yaml"),
                               {{"a.yaml", "key-a: free\n"}, {"b.yaml", "key-a: free\n"}});
  ASSERT_NE(server, nullptr);
  server->rewrite_config(consumers_config("b.yaml"));
  ASSERT_TRUE(server->wait_for_metric(kWatchReloaded, 1)) << server->log();

  // a.yaml is no longer named: its change is seen and starts nothing.
  const long long unchanged = server->metric(kWatchUnchanged);
  write_by_rename(server->dir() + "/a.yaml", "key-a: pro\n");
  ASSERT_TRUE(server->wait_for_metric(kWatchUnchanged, unchanged + 1)) << server->log();
  EXPECT_EQ(server->metric(kWatchReloaded), 1);
  EXPECT_EQ(server->get("/api", api_key("key-a")).header("X-RateLimit-Limit"), "1");

  write_by_rename(server->dir() + "/b.yaml", "key-a: pro\n");
  ASSERT_TRUE(server->wait_for_metric(kWatchReloaded, 2)) << server->log();
  EXPECT_EQ(server->get("/api", api_key("key-a")).header("X-RateLimit-Limit"), "3");
}

TEST(WatchConfig, AReloadCanTurnTheWatchOffAndSighupStillReloads) {
  auto server = start_watching(kWatch + kBefore);
  ASSERT_NE(server, nullptr);
  server->rewrite_config(kBefore +
                         "  - match: GET /d\n    limits: [{capacity: 1, refill_rate: 1/h}]\n");
  ASSERT_TRUE(server->wait_for_metric(kWatchReloaded, 1)) << server->log();
  EXPECT_TRUE(server->wait_for_log("watch_config is off")) << server->log();

  server->rewrite_config(kAfter);
  server->send_signal(SIGHUP);
  ASSERT_TRUE(server->wait_for_metric(kReloadSuccesses, 2)) << server->log();
  EXPECT_EQ(server->metric(kWatchReloaded), 1);
  EXPECT_EQ(server->get("/b").header("X-RateLimit-Limit"), "5");
}

TEST(WatchConfig, IsOffByDefault) {
  auto server = SluiceProcess::start(kBefore);
  ASSERT_NE(server, nullptr);
  server->rewrite_config(kAfter);
  server->send_signal(SIGHUP);
  ASSERT_TRUE(server->wait_for_metric(kReloadSuccesses, 1)) << server->log();
  EXPECT_EQ(server->log().find("watch_config"), std::string::npos) << server->log();
  EXPECT_EQ(server->metric(kWatchReloaded), 0);
  EXPECT_EQ(server->metric(kWatchUnchanged), 0);
}

}  // namespace
}  // namespace sluice::test
