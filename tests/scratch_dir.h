// A folder of one test's own under the temporary directory, removed with
// everything in it when the test ends; files written into it as editors
// save them (a temporary file renamed over the old one).
#pragma once

#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace sluice::test {

class ScratchDir {
 public:
  // "<temp>/sluice-<tag>-<pid>-<the test's name>".
  explicit ScratchDir(const std::string& tag)
      : path_(std::filesystem::temp_directory_path() /
              ("sluice-" + tag + "-" + std::to_string(::getpid()) + "-" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

  // Writes `text` as the file `name` (its folders created); returns its path.
  std::string write(const std::string& name, const std::string& text) const {
    const std::filesystem::path p = path_ / name;
    std::filesystem::create_directories(p.parent_path());
    const std::string temp = p.string() + ".tmp";
    std::ofstream(temp, std::ios::binary | std::ios::trunc) << text;
    std::filesystem::rename(temp, p);
    return p.string();
  }

 private:
  std::filesystem::path path_;
};

}  // namespace sluice::test
