// ConfigWatch (src/http/config_watch.h): folders watched with inotify, a
// burst of events checked once, and only a change of content reported.
// Debounce's arithmetic with given times.
#include "http/config_watch.h"

#include "scratch_dir.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

namespace sluice::http {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using TimePoint = Debounce::Clock::time_point;

TEST(Debounce, DueWhenQuietForTheDelayAndNeverLaterThanTheCap) {
  Debounce d(milliseconds(200), milliseconds(1000));
  const TimePoint t0{};
  EXPECT_EQ(d.on_event(t0), t0 + milliseconds(200));
  // Each event moves the check to 200 ms after it...
  EXPECT_EQ(d.on_event(t0 + milliseconds(150)), t0 + milliseconds(350));
  EXPECT_EQ(d.on_event(t0 + milliseconds(700)), t0 + milliseconds(900));
  // ...but never past 1000 ms after the burst's first event.
  EXPECT_EQ(d.on_event(t0 + milliseconds(900)), t0 + milliseconds(1000));
  EXPECT_EQ(d.on_event(t0 + milliseconds(990)), t0 + milliseconds(1000));
  // After the check, the next event starts a new burst.
  d.reset();
  EXPECT_EQ(d.on_event(t0 + milliseconds(1500)), t0 + milliseconds(1700));
}

class ConfigWatchTest : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& text) {
    return dir_.write(name, text);
  }

  // Runs the loop until the watch's next check (at most 10 s); its report.
  std::vector<std::string> next_check() {
    checked_.reset();
    io_.restart();
    io_.run_for(std::chrono::seconds(10));
    EXPECT_TRUE(checked_.has_value()) << "no check within 10 s";
    return checked_.value_or(std::vector<std::string>{"(none)"});
  }

  std::unique_ptr<ConfigWatch> make(milliseconds debounce) {
    return std::make_unique<ConfigWatch>(io_, debounce, [this](const std::vector<std::string>& c) {
      checks_ += 1;
      checked_ = c;
      io_.stop();
    });
  }

  test::ScratchDir dir_{"watch"};
  boost::asio::io_context io_;
  std::optional<std::vector<std::string>> checked_;
  int checks_ = 0;
};

TEST_F(ConfigWatchTest, ABurstOfWritesIsOneCheckNamingTheChangedFile) {
  const std::string config = write("sluice.yaml", "v0");
  const std::string other = write("consumers.yaml", "a: free\n");
  auto watch = make(milliseconds(100));
  watch->watch({config, other});
  EXPECT_EQ(watch->folder_count(), 1u);  // both in one folder
  // Written before the loop runs: every event is queued when it starts, so
  // however slow the machine, they are one burst.
  for (int i = 1; i <= 10; ++i) write("sluice.yaml", "v" + std::to_string(i));
  EXPECT_EQ(next_check(), std::vector<std::string>{config});
  EXPECT_EQ(checks_, 1);
}

TEST_F(ConfigWatchTest, TheSameBytesAgainAndATouchAreNoChange) {
  const std::string config = write("sluice.yaml", "same");
  auto watch = make(milliseconds(20));
  watch->watch({config});
  write("sluice.yaml", "same");
  fs::last_write_time(config, fs::file_time_type::clock::now());
  EXPECT_EQ(next_check(), std::vector<std::string>{});
  // Another file in the folder: checked, no change.
  write("stderr.log", "line\n");
  EXPECT_EQ(next_check(), std::vector<std::string>{});
  write("sluice.yaml", "other");
  EXPECT_EQ(next_check(), std::vector<std::string>{config});
}

TEST_F(ConfigWatchTest, ADataLinkSwapIsAChangeOfTheFileBehindIt) {
  write("..v1/sluice.yaml", "one");
  write("..v2/sluice.yaml", "two");
  fs::create_directory_symlink("..v1", dir_.path() / "..data");
  fs::create_symlink("..data/sluice.yaml", dir_.path() / "sluice.yaml");
  const std::string config = dir_ / "sluice.yaml";
  auto watch = make(milliseconds(20));
  watch->watch({config});
  // The folder and the one the symlink resolves to.
  EXPECT_EQ(watch->folder_count(), 2u);
  fs::create_directory_symlink("..v2", dir_.path() / "..data_tmp");
  fs::rename(dir_.path() / "..data_tmp", dir_.path() / "..data");
  fs::remove_all(dir_.path() / "..v1");
  EXPECT_EQ(next_check(), std::vector<std::string>{config});
  // Now watching the new target's folder; the old one is gone.
  EXPECT_EQ(watch->folder_count(), 2u);
  write("..v2/sluice.yaml", "two, edited");
  EXPECT_EQ(next_check(), std::vector<std::string>{config});
}

TEST_F(ConfigWatchTest, AFolderChangesWhenAFileInItOrInASubfolderDoes) {
  write("rls/a.yaml", "a");
  write("rls/sub/b.yaml", "b");
  const std::string rls = dir_ / "rls";
  auto watch = make(milliseconds(20));
  watch->watch({rls});
  EXPECT_EQ(watch->folder_count(), 3u);  // its parent, itself, sub
  write("rls/sub/b.yaml", "b2");
  EXPECT_EQ(next_check(), std::vector<std::string>{rls});
  write("rls/new/c.yaml", "c");  // a new subfolder is watched from the check on
  EXPECT_EQ(next_check(), std::vector<std::string>{rls});
  EXPECT_EQ(watch->folder_count(), 4u);
  write("rls/new/c.yaml", "c2");
  EXPECT_EQ(next_check(), std::vector<std::string>{rls});
}

TEST_F(ConfigWatchTest, AMissingFileIsWatchedWhereItWillAppear) {
  const std::string later = dir_ / "later.yaml";
  auto watch = make(milliseconds(20));
  watch->watch({later});
  write("later.yaml", "here");
  EXPECT_EQ(next_check(), std::vector<std::string>{later});
  fs::remove(later);
  EXPECT_EQ(next_check(), std::vector<std::string>{later});
}

TEST_F(ConfigWatchTest, WatchingOtherPathsDropsTheOldOnesAndKeepsWhatWasSeen) {
  const std::string a = write("a/a.yaml", "a");
  const std::string b = write("b/b.yaml", "b");
  auto watch = make(milliseconds(20));
  watch->watch({a});
  write("a/a.yaml", "a2");  // changed while watched, not checked yet
  watch->watch({a, b});
  EXPECT_EQ(watch->folder_count(), 2u);
  EXPECT_EQ(next_check(), std::vector<std::string>{a});
  watch->watch({b});
  EXPECT_EQ(watch->folder_count(), 1u);
  write("a/a.yaml", "a3");
  write("b/b.yaml", "b2");
  EXPECT_EQ(next_check(), std::vector<std::string>{b});
}

}  // namespace
}  // namespace sluice::http
