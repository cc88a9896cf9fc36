// config::content_fingerprint (src/config/files.h): what watch_config
// compares to tell whether a file or a folder changed.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "config/files.h"
#include "scratch_dir.h"

namespace sluice::config {
namespace {

namespace fs = std::filesystem;

class ContentFingerprint : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& text) {
    return dir_.write(name, text);
  }
  test::ScratchDir dir_{"fingerprint"};
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
  EXPECT_EQ(content_fingerprint(dir_ / "nope.yaml"), std::nullopt);
  fs::create_symlink("nope.yaml", dir_.path() / "dangling.yaml");
  EXPECT_EQ(content_fingerprint(dir_ / "dangling.yaml"), std::nullopt);
}

TEST_F(ContentFingerprint, ASymlinkIsWhatItPointsAt) {
  write("v1/sluice.yaml", "one");
  write("v2/sluice.yaml", "two");
  fs::create_directory_symlink("v1", dir_.path() / "..data");
  fs::create_symlink("..data/sluice.yaml", dir_.path() / "sluice.yaml");
  const std::string link = dir_ / "sluice.yaml";
  EXPECT_EQ(content_fingerprint(link), content_fingerprint(dir_ / "v1/sluice.yaml"));
  fs::create_directory_symlink("v2", dir_.path() / "..data_tmp");
  fs::rename(dir_.path() / "..data_tmp", dir_.path() / "..data");
  EXPECT_EQ(content_fingerprint(link), content_fingerprint(dir_ / "v2/sluice.yaml"));
}

TEST_F(ContentFingerprint, AFolderIsItsFilesNamesAndContentLeavingOutDotNames) {
  write("rls/a.yaml", "domain: a\n");
  write("rls/sub/b.yaml", "domain: b\n");
  const std::string folder = dir_ / "rls";
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
  fs::rename(dir_.path() / "rls/sub/b.yaml", dir_.path() / "rls/sub/c.yaml");
  EXPECT_NE(content_fingerprint(folder), edited);
  // A file's end never reads as the next name: "ab" + "c" is not "a" + "bc".
  write("x/1", "ab");
  write("x/2", "c");
  write("y/1", "a");
  write("y/2", "bc");
  EXPECT_NE(content_fingerprint(dir_ / "x"), content_fingerprint(dir_ / "y"));
}

}  // namespace
}  // namespace sluice::config
