// A route's `cost:`: requests whose cost is known only after the response
// (tokens an LLM used). The gateway charges `estimate` to every limit of the
// route before proxying, reads the actual figure from the response (a header
// or trailer, or a field of a JSON body or of a text/event-stream's last
// event carrying it: policy/usage_reader.h) and settles the difference
// (policy/cost_settle.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::policy {

struct RouteCost {
  std::string header;                  // lower-case field name, or empty
  std::vector<std::string> json_path;  // `json: usage.total_tokens` as its names, or empty
  uint64_t estimate = 1;               // charged before proxying
  int line = 0;                        // in the config file, for messages
  friend bool operator==(const RouteCost& a, const RouteCost& b) {
    return a.header == b.header && a.json_path == b.json_path && a.estimate == b.estimate;
  }
};

// The largest figure a response may report; larger ones are not used.
inline constexpr uint64_t kMaxReportedCost = uint64_t{1} << 32;
// The most names a `json:` path may have.
inline constexpr size_t kMaxJsonPathNames = 16;

// `usage.total_tokens` -> {"usage", "total_tokens"}: names of object members
// separated by dots, each non-empty and made of letters, digits, '_' and '-'.
// nullopt for anything else (an empty name, brackets, spaces).
std::optional<std::vector<std::string>> parse_json_path(std::string_view text);

}  // namespace sluice::policy
