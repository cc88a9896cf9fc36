#include "rls/units.h"

#include <array>
#include <cctype>
#include <limits>
#include <string>

namespace sluice::rls {
namespace {

constexpr int64_t kSecondNs = 1'000'000'000;

struct UnitInfo {
  Unit unit;
  std::string_view name;
  int64_t seconds;
};

constexpr std::array<UnitInfo, 7> kUnits = {{
    {Unit::kSecond, "second", 1},
    {Unit::kMinute, "minute", 60},
    {Unit::kHour, "hour", 3600},
    {Unit::kDay, "day", 86400},
    {Unit::kWeek, "week", 7 * 86400},
    {Unit::kMonth, "month", 30 * 86400},
    {Unit::kYear, "year", 365 * 86400},
}};

Error invalid(std::string message) {
  return Error{ErrorCode::kInvalidArgument, std::move(message)};
}

// 'text' in quotes, for messages. (Built by appending: GCC 12 warns falsely
// about "'" + std::string(...) at -O2.)
std::string quoted(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out.push_back('\'');
  out.append(text);
  out.push_back('\'');
  return out;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

// Leading decimal digits with optional '_' separators; advances `pos`.
bool take_uint(std::string_view text, size_t* pos, uint64_t* out) {
  uint64_t value = 0;
  size_t i = *pos;
  bool any = false;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '_' && any) continue;
    if (c < '0' || c > '9') break;
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (value > (std::numeric_limits<uint64_t>::max() - digit) / 10) return false;
    value = value * 10 + digit;
    any = true;
  }
  if (!any) return false;
  *pos = i;
  *out = value;
  return true;
}

// Nanoseconds in one `suffix`, or 0 if the suffix is unknown.
int64_t suffix_ns(std::string_view suffix) {
  if (suffix == "ms") return 1'000'000;
  if (suffix == "s") return kSecondNs;
  if (suffix == "m") return 60 * kSecondNs;
  if (suffix == "h") return 3600 * kSecondNs;
  if (suffix == "d") return 86400 * kSecondNs;
  if (suffix == "w") return 7 * 86400 * kSecondNs;
  return 0;
}

}  // namespace

Nanos unit_length(Unit unit) {
  for (const UnitInfo& u : kUnits) {
    if (u.unit == unit) return Nanos{u.seconds * kSecondNs};
  }
  return Nanos{0};
}

std::string_view unit_name(Unit unit) {
  for (const UnitInfo& u : kUnits) {
    if (u.unit == unit) return u.name;
  }
  return "unknown";
}

bool parse_unit(std::string_view text, Unit* out) {
  for (const UnitInfo& u : kUnits) {
    if (iequals(text, u.name)) {
      *out = u.unit;
      return true;
    }
  }
  return false;
}

Unit unit_of_length(Nanos period) {
  for (const UnitInfo& u : kUnits) {
    if (period.count() == u.seconds * kSecondNs) return u.unit;
  }
  return Unit::kUnknown;
}

Result<Nanos> parse_duration(std::string_view text) {
  const std::string shown = quoted(text);
  size_t pos = 0;
  uint64_t count = 0;
  if (!take_uint(text, &pos, &count) || pos == text.size()) {
    return invalid("must be a duration like 500ms, 90s, 1m, 1h, 1d or 1w, got " + shown);
  }
  const int64_t per = suffix_ns(text.substr(pos));
  if (per == 0) {
    return invalid("must be a duration like 500ms, 90s, 1m, 1h, 1d or 1w, got " + shown);
  }
  if (count == 0) return invalid("must be greater than 0, got " + shown);
  if (count > static_cast<uint64_t>(std::numeric_limits<int64_t>::max() / per)) {
    return invalid("is too long: " + shown);
  }
  return Nanos{static_cast<int64_t>(count) * per};
}

Result<Rate> parse_rate(std::string_view text) {
  const std::string shown = quoted(text);
  const size_t slash = text.find('/');
  size_t pos = 0;
  uint64_t tokens = 0;
  if (slash == std::string_view::npos || !take_uint(text.substr(0, slash), &pos, &tokens) ||
      pos != slash) {
    return invalid("must be a rate like 10/s, 5/m or 100/90s, got " + shown);
  }
  if (tokens == 0) return invalid("must grant at least 1 per period, got " + shown);
  const std::string_view period_text = text.substr(slash + 1);
  Rate rate;
  rate.tokens = tokens;
  if (const int64_t per = suffix_ns(period_text); per != 0) {
    rate.period = Nanos{per};
    return rate;
  }
  Result<Nanos> period = parse_duration(period_text);
  if (!period.ok()) return invalid("must be a rate like 10/s, 5/m or 100/90s, got " + shown);
  rate.period = *period;
  return rate;
}

}  // namespace sluice::rls
