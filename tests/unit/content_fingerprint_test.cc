// config::content_fingerprint (src/config/files.h): what watch_config
// compares to tell whether a file or a folder changed.
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "config/files.h"

namespace sluice::config {
namespace {

namespace fs = std::filesystem;

class ContentFingerprint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("sluice-fingerprint-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    const fs::path p = dir_ / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
    return p.string();
  }
  fs::path dir_;
};

TEST_F(ContentFingerprint, AFileIsItsBytes) {
  const std::string a = write("a.yaml", "listen: 127.0.0.1:8080\n");
  const std::optional<uint64_t> first = content_fingerprint(a);
  ASSERT_TRUE(first.has_value());
  // The same bytes written again (a new inode, a new mtime): the same.
  write("a.yaml", "listen: 127.0.0.1:8080\n");
  EXPECT_EQ(content_fingerprint(a), first);
  write("a.yaml", "listen: 127.0.0.1:8081\n");
  EXPECT_NE(content_fingerprint(a), first);
  write("a.yaml", "");
  EXPECT_TRUE(content_fingerprint(a).has_value());
}

TEST_F(ContentFingerprint, MissingOrUnreadableIsNothing) {
  EXPECT_EQ(content_fingerprint((dir_ / "nope.yaml").string()), std::nullopt);
  fs::create_symlink("nope.yaml", dir_ / "dangling.yaml");
  EXPECT_EQ(content_fingerprint((dir_ / "dangling.yaml").string()), std::nullopt);
}

TEST_F(ContentFingerprint, ASymlinkIsWhatItPointsAt) {
  write("v1/sluice.yaml", "one");
  write("v2/sluice.yaml", "two");
  fs::create_directory_symlink("v1", dir_ / "..data");
  fs::create_symlink("..data/sluice.yaml", dir_ / "sluice.yaml");
  const std::string link = (dir_ / "sluice.yaml").string();
  EXPECT_EQ(content_fingerprint(link), content_fingerprint((dir_ / "v1/sluice.yaml").string()));
  fs::create_directory_symlink("v2", dir_ / "..data_tmp");
  fs::rename(dir_ / "..data_tmp", dir_ / "..data");
  EXPECT_EQ(content_fingerprint(link), content_fingerprint((dir_ / "v2/sluice.yaml").string()));
}

TEST_F(ContentFingerprint, AFolderIsItsFilesNamesAndContentLeavingOutDotNames) {
  write("rls/a.yaml", "domain: a\n");
  write("rls/sub/b.yaml", "domain: b\n");
  const std::string folder = (dir_ / "rls").string();
  const std::optional<uint64_t> first = content_fingerprint(folder);
  ASSERT_TRUE(first.has_value());
  // Hidden names (a ConfigMap's timestamped folders, editors' swap files): no change.
  write("rls/.a.yaml.swp", "x");
  write("rls/..2024_05_01/a.yaml", "domain: a\n");
  EXPECT_EQ(content_fingerprint(folder), first);
  write("rls/sub/b.yaml", "domain: bb\n");
  const std::optional<uint64_t> edited = content_fingerprint(folder);
  EXPECT_NE(edited, first);
  // The same content under another name is another folder.
  fs::rename(dir_ / "rls/sub/b.yaml", dir_ / "rls/sub/c.yaml");
  EXPECT_NE(content_fingerprint(folder), edited);
  // A file's end never reads as the next name: "ab" + "c" is not "a" + "bc".
  write("x/1", "ab");
  write("x/2", "c");
  write("y/1", "a");
  write("y/2", "bc");
  EXPECT_NE(content_fingerprint((dir_ / "x").string()), content_fingerprint((dir_ / "y").string()));
}

}  // namespace
}  // namespace sluice::config
