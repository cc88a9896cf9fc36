// docs/MIGRATING.md: every Sluice config in it loads, and its translations
// decide as the text says (nginx's burst=20 nodelay at 10r/s serves 21 at
// once, then one every 100 ms; express-rate-limit's 100 per 15 minutes).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "doc_blocks.h"
#include "policy/config_loader.h"
#include "sluice/sluice.h"
#include "source_dir.h"

namespace sluice::policy {
namespace {

using std::chrono::milliseconds;
using std::chrono::minutes;

using sluice::test::source_dir;

// The ```yaml blocks of the doc whose first line is "# sluice.yaml".
std::vector<std::string> sluice_blocks() {
  std::vector<std::string> blocks;
  for (const sluice::test::DocBlock& b :
       sluice::test::read_doc_blocks(source_dir() / "docs/MIGRATING.md")) {
    if (b.info == "yaml" && b.text.rfind("# sluice.yaml\n", 0) == 0) blocks.push_back(b.text);
  }
  return blocks;
}

Config load(const std::string& yaml, int index) {
  const LoadResult r = load_config_string(yaml, "MIGRATING.md block " + std::to_string(index));
  std::string errors;
  for (const ConfigError& e : r.errors) errors += e.text() + "\n";
  EXPECT_EQ(errors, "") << yaml;
  return r.config.value_or(Config{});
}

// How many of `count` requests at one instant `limit` allows to one key.
int allowed_at_once(Limiter& limiter, int count) {
  int allowed = 0;
  for (int i = 0; i < count; ++i) allowed += limiter.try_acquire("k")->allowed ? 1 : 0;
  return allowed;
}

TEST(MigratingDoc, HasTheThreeTranslationsAndEachLoads) {
  const std::vector<std::string> blocks = sluice_blocks();
  ASSERT_EQ(blocks.size(), 3u) << "nginx, envoyproxy/ratelimit and express-rate-limit";
  for (size_t i = 0; i < blocks.size(); ++i) load(blocks[i], static_cast<int>(i));
}

TEST(MigratingDoc, NginxBurst20NodelayAt10PerSecondServes21ThenOneEvery100ms) {
  const Config c = load(sluice_blocks().at(0), 0);
  ASSERT_EQ(c.routes.size(), 1u);
  ASSERT_EQ(c.routes[0].limits.size(), 1u);
  ManualClock clock;
  Limiter limiter(std::make_shared<MemoryStore>(), {c.routes[0].limits[0].limit}, clock);
  EXPECT_EQ(allowed_at_once(limiter, 30), 21);
  clock.advance(milliseconds(99));
  EXPECT_EQ(allowed_at_once(limiter, 1), 0);
  clock.advance(milliseconds(1));
  EXPECT_EQ(allowed_at_once(limiter, 5), 1);
  clock.advance(milliseconds(1000));
  EXPECT_EQ(allowed_at_once(limiter, 30), 10);
}

TEST(MigratingDoc, ExpressRateLimitsWindowsAre100Per15MinutesAnd5PerMinuteOnLogin) {
  const Config c = load(sluice_blocks().at(2), 2);
  ASSERT_TRUE(c.default_route.has_value());
  ASSERT_EQ(c.routes.size(), 1u);
  ManualClock clock;
  Limiter all(std::make_shared<MemoryStore>(), {c.default_route->limits.at(0).limit}, clock);
  EXPECT_EQ(allowed_at_once(all, 150), 100);
  clock.advance(minutes(15));
  EXPECT_EQ(allowed_at_once(all, 150), 100);
  Limiter login(std::make_shared<MemoryStore>(), {c.routes[0].limits.at(0).limit}, clock);
  EXPECT_EQ(allowed_at_once(login, 10), 5);
  EXPECT_EQ(c.routes[0].key.text, "header:x-user");
}

}  // namespace
}  // namespace sluice::policy
