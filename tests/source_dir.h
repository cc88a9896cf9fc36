// The repository's root, for tests that read its own files (examples/,
// docs/). The build defines SLUICE_SOURCE_DIR: __FILE__ would do, but a
// compiler cache may make it relative to the build directory.
#pragma once

#include <filesystem>

namespace sluice::test {

inline std::filesystem::path source_dir() {
  return std::filesystem::path(SLUICE_SOURCE_DIR);
}

}  // namespace sluice::test
