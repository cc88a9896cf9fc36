#include "rls/units.h"

#include <array>

#include "util/ascii.h"

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

std::string_view unit_names() {
  return "second, minute, hour, day, week, month, year";
}

bool parse_unit(std::string_view text, Unit* out) {
  for (const UnitInfo& u : kUnits) {
    if (util::iequals(text, u.name)) {
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

}  // namespace sluice::rls
