// The consumers file (`consumers.file`, docs/CONFIG.md): one consumer per
// line, read by a hand-written line parser (not yaml-cpp: a million lines
// load in well under two seconds).
//
//   # comments and blank lines are allowed
//   key-4f1c9a: pro
//   "id:with:colons": free     # quotes when the id holds ':', '#', '"' or '\'
//
// line   = [entry] [comment]          (blanks around each part)
// entry  = id ":" plan
// id     = bare | quoted              1 to 1024 bytes, no whitespace or control bytes
// bare   = bytes other than blanks, controls, ':', '#', '"', '\'
// quoted = '"' (byte other than blanks, controls, '"', '\' | '\"' | '\\')+ '"'
// plan   = a name under `plans:`
// comment = '#' to the end of the line (after a blank, or at the start)
//
// It is YAML too (a mapping of plain or double-quoted scalars), so editors
// colour it and yaml tools read it; Sluice reads no other YAML in it.
//
// Thread-safety: pure functions (the *_file ones read the file system).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "config/error.h"
#include "policy/consumer_table.h"

namespace sluice::policy {

// A file holds at most this many bytes (the table's offsets are 32 bits).
inline constexpr size_t kMaxConsumersFileBytes = size_t{1} << 30;
// Errors reported per file; a file broken on every line stops there.
inline constexpr size_t kMaxConsumersFileErrors = 100;

struct ConsumersFile {
  std::optional<ConsumerTable> table;  // set iff errors is empty
  std::vector<config::ConfigError> errors;
};

// Parses `text`, naming `file` in errors ("file:line:col: message", every
// error up to kMaxConsumersFileErrors, a misspelt plan with "did you mean").
// `plans` are the plan names in config order: the table holds their indices.
ConsumersFile parse_consumers(std::string_view text, const std::string& file,
                              const std::vector<std::string>& plans);
ConsumersFile read_consumers_file(const std::string& path, const std::vector<std::string>& plans);

// An id the file can hold (1 to 1024 bytes, no whitespace or control bytes).
bool valid_consumer_id(std::string_view id);

// "id: plan", the id quoted when it must be.
std::string consumer_line(std::string_view id, std::string_view plan);

// `text` (a consumers file) with consumer `id` on `plan`: its line replaced
// (every other line kept as it is, comments included), or appended when it
// has none; with no plan, its line removed.
std::string with_consumer(std::string_view text, std::string_view id,
                          std::optional<std::string_view> plan);

// One change of a consumer: its plan, or nullopt to remove it.
struct ConsumerEdit {
  std::string_view id;
  std::optional<std::string_view> plan;
};
// `text` with every edit made in one pass (a batch of PUTs: one read and
// one write of the file for all): the last edit of an id wins; an id that
// has a line keeps its place, the others are appended in the order they
// were first edited. Every other line is kept as it is.
std::string with_consumers(std::string_view text, std::span<const ConsumerEdit> edits);

}  // namespace sluice::policy
