#include "simulate/trace.h"

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "simulate/time_text.h"

namespace sluice::simulate {
namespace {

// Times up to about the year 2255: time_ms * 1e6 must fit signed 64-bit nanoseconds.
constexpr uint64_t kMaxTimeMs = 9'000'000'000'000;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

// A whole number in [min, max], digits only.
bool parse_uint(std::string_view s, uint64_t min, uint64_t max, uint64_t* out) {
  if (s.empty() || s.size() > 19) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v < min || v > max) return false;
  *out = v;
  return true;
}

struct Fields {
  std::string_view time_ms, key, cost;
};

// Splits on commas; false unless there are exactly three fields.
bool split3(std::string_view line, Fields* out, size_t* count) {
  std::string_view parts[3];
  size_t n = 0;
  size_t start = 0;
  for (;;) {
    const size_t comma = line.find(',', start);
    const std::string_view part = line.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (n < 3) parts[n] = trim(part);
    ++n;
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  *count = n;
  if (n != 3) return false;
  *out = {parts[0], parts[1], parts[2]};
  return true;
}

}  // namespace

Result<Traffic> parse_trace(std::string_view text, std::string_view source) {
  Traffic traffic;
  traffic.name = "trace";
  traffic.source = std::string(source);
  std::unordered_map<std::string, uint32_t> key_index;
  std::vector<std::string> errors;
  size_t error_count = 0;
  const auto fail = [&](uint32_t line, const std::string& message) {
    if (++error_count <= kMaxTraceErrors) {
      errors.push_back(std::string(source) + ":" + std::to_string(line) + ": " + message);
    }
  };

  bool first_record = true;
  uint64_t previous_ms = 0;
  uint32_t previous_line = 0;
  uint32_t line_number = 0;
  for (size_t pos = 0; pos < text.size();) {
    const size_t end = std::min(text.find('\n', pos), text.size());
    const std::string_view line = trim(text.substr(pos, end - pos));
    pos = end + 1;
    ++line_number;
    if (line.empty()) continue;

    Fields f;
    size_t count = 0;
    const bool three = split3(line, &f, &count);
    if (first_record && three && f.time_ms == "time_ms" && f.key == "key" && f.cost == "cost") {
      first_record = false;  // the optional header
      continue;
    }
    first_record = false;
    if (!three) {
      fail(line_number, "expected 3 fields time_ms,key,cost, got " + std::to_string(count));
      continue;
    }
    uint64_t time_ms = 0;
    uint64_t cost = 0;
    bool ok = true;
    if (!parse_uint(f.time_ms, 0, kMaxTimeMs, &time_ms)) {
      fail(line_number, "time_ms must be a whole number of milliseconds from 0 to " +
                            std::to_string(kMaxTimeMs) + ", got '" + std::string(f.time_ms) + "'");
      ok = false;
    }
    if (f.key.empty()) {
      fail(line_number, "key is empty");
      ok = false;
    }
    if (!parse_uint(f.cost, 1, Limit::kMaxLimit, &cost)) {
      fail(line_number, "cost must be a whole number from 1 to " +
                            std::to_string(Limit::kMaxLimit) + ", got '" + std::string(f.cost) +
                            "'");
      ok = false;
    }
    if (!ok) continue;
    if (previous_line > 0 && time_ms < previous_ms) {
      fail(line_number, "time_ms " + std::to_string(time_ms) + " is before " +
                            std::to_string(previous_ms) + " on line " +
                            std::to_string(previous_line) + ": lines must be sorted by time");
      continue;
    }
    previous_ms = time_ms;
    previous_line = line_number;

    auto [it, inserted] =
        key_index.try_emplace(std::string(f.key), static_cast<uint32_t>(traffic.keys.size()));
    if (inserted) traffic.keys.push_back(it->first);
    traffic.requests.push_back(
        {Nanos{static_cast<int64_t>(time_ms) * 1'000'000}, it->second, cost, line_number});
  }

  if (error_count == 0 && traffic.requests.empty()) {
    return Error{ErrorCode::kInvalidArgument,
                 std::string(source) + ": the trace holds no requests"};
  }
  if (error_count > 0) {
    std::string message;
    for (const std::string& e : errors) message += (message.empty() ? "" : "\n") + e;
    if (error_count > kMaxTraceErrors) {
      message += "\n" + std::string(source) + ": " + std::to_string(error_count - kMaxTraceErrors) +
                 " more bad lines";
    }
    return Error{ErrorCode::kInvalidArgument, message};
  }

  const Nanos span = traffic.requests.back().at - traffic.requests.front().at;
  traffic.description = std::to_string(traffic.requests.size()) + " requests, " +
                        std::to_string(traffic.keys.size()) +
                        (traffic.keys.size() == 1 ? " key" : " keys") + ", over " +
                        format_duration(span);
  return traffic;
}

}  // namespace sluice::simulate
