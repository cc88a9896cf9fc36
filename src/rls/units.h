// Time units of the Envoy RLS API. (Durations and rates of Sluice's
// extension keys follow the one grammar of config/values/values.h.)
//
// Unit lengths are those of envoyproxy/ratelimit: a MONTH is 30 days, a YEAR
// 365 days and a WEEK 7 days, and windows are aligned to the Unix epoch
// (floor(now / length)), not to calendar months or weeks.
//
// Thread-safety: all functions are pure.
#pragma once

#include <cstdint>
#include <string_view>

#include "sluice/clock.h"

namespace sluice::rls {

// Numbered as RateLimitResponse.RateLimit.Unit and envoy.type.v3.RateLimitUnit.
enum class Unit : uint8_t {
  kUnknown = 0,
  kSecond = 1,
  kMinute = 2,
  kHour = 3,
  kDay = 4,
  kMonth = 5,
  kYear = 6,
  kWeek = 7,
};

// The window length of `unit`; 0 for kUnknown.
Nanos unit_length(Unit unit);

// "second", "minute", ... as written in descriptor files; "unknown" for kUnknown.
std::string_view unit_name(Unit unit);

// A unit name in any letter case ("second", "MINUTE", "Day"), as
// envoyproxy/ratelimit reads it. False for "unknown" and anything else.
bool parse_unit(std::string_view text, Unit* out);

// "second, minute, hour, day, week, month, year": for error messages.
std::string_view unit_names();

// The unit whose length is exactly `period`, or kUnknown.
Unit unit_of_length(Nanos period);

}  // namespace sluice::rls
