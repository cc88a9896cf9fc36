#include "http/admin_history.h"

#include <charconv>
#include <chrono>
#include <optional>
#include <string>

namespace sluice::http {

namespace {

constexpr std::string_view kBadSeconds =
    "seconds must be a whole number from 1 to 900 (GET /admin/history?seconds=N)";

// `seconds` of the query, or nothing when the query is not one valid
// seconds=N (or empty: the default).
std::optional<size_t> seconds_of(std::string_view query) {
  if (query.empty()) return kHistoryDefaultSeconds;
  constexpr std::string_view kName = "seconds=";
  if (!query.starts_with(kName)) return std::nullopt;
  const std::string_view digits = query.substr(kName.size());
  size_t seconds = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), seconds);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  if (seconds < 1 || seconds > observe::RouteHistory::kSeconds) return std::nullopt;
  return seconds;
}

void append_counts(std::string& out, const std::vector<uint64_t>& counts) {
  out += '[';
  for (size_t i = 0; i < counts.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(counts[i]);
  }
  out += ']';
}

}  // namespace

Response history_response(const observe::DecisionHistory& history, Nanos now,
                          std::string_view query) {
  const std::optional<size_t> seconds = seconds_of(query);
  if (!seconds) return error_response(HttpStatus::bad_request, "BAD_REQUEST", kBadSeconds);
  const int64_t end = std::chrono::floor<std::chrono::seconds>(now).count();
  std::string out = cat({"{\"seconds\":", std::to_string(*seconds),
                         ",\"end\":", std::to_string(end), ",\"routes\":{"});
  bool first = true;
  for (const auto& [name, counts] : history.read(end, *seconds)) {
    if (!first) out += ',';
    first = false;
    out += '"';
    append_json_escaped(name, out);
    out += "\":{\"allowed\":";
    append_counts(out, counts.allowed);
    out += ",\"denied\":";
    append_counts(out, counts.denied);
    out += ",\"error\":";
    append_counts(out, counts.error);
    out += '}';
  }
  out += "}}";
  return json_response(HttpStatus::ok, std::move(out));
}

}  // namespace sluice::http
