// Where a config value was written, and what is wrong with it: the one error
// type of every config file Sluice reads (the server config, the Envoy RLS
// descriptor files, token files), printed as "file:line:col: message".
#pragma once

#include <string>
#include <vector>

namespace sluice::config {

// A place in a file; line and column are 1-based, 0 when unknown. `path` is
// the YAML path of the value there ("routes[1].limits[0]"), when known.
struct SourceMark {
  std::string file;
  int line = 0;
  int column = 0;
  std::string path;
  // "file:line:col", or "file" when the line is unknown.
  std::string text() const;
  friend bool operator==(const SourceMark&, const SourceMark&) = default;
};

struct ConfigError {
  std::string file;
  int line = 0;    // 1-based; 0 when unknown
  int column = 0;  // 1-based; 0 when unknown
  std::string message;

  ConfigError() = default;
  ConfigError(std::string file_name, int line_number, int column_number, std::string text)
      : file(std::move(file_name)),
        line(line_number),
        column(column_number),
        message(std::move(text)) {}
  // At `at`, the message prefixed by its YAML path when it has one.
  ConfigError(const SourceMark& at, std::string text)
      : file(at.file),
        line(at.line),
        column(at.column),
        message(at.path.empty() ? std::move(text) : at.path + ": " + text) {}

  SourceMark mark() const { return SourceMark{file, line, column, {}}; }
  // "file:line:col: message", or "file: message" when the line is unknown.
  std::string text() const;
  friend bool operator==(const ConfigError&, const ConfigError&) = default;
};

// Orders `errors` by line and column (stable: a file's errors read top down).
void sort_by_position(std::vector<ConfigError>& errors);

}  // namespace sluice::config
