#include "config/error.h"

#include <algorithm>
#include <tuple>

namespace sluice::config {

std::string SourceMark::text() const {
  if (line <= 0) return file;
  return file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

std::string ConfigError::text() const {
  return mark().text() + ": " + message;
}

void sort_by_position(std::vector<ConfigError>& errors) {
  std::stable_sort(errors.begin(), errors.end(), [](const ConfigError& a, const ConfigError& b) {
    return std::tie(a.line, a.column) < std::tie(b.line, b.column);
  });
}

}  // namespace sluice::config
