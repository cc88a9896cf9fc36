// Durations and instants as text, for `sluice simulate`'s reports: "500ms",
// "1m", "5.714h", and UTC clock times for scenario descriptions. (Durations
// are read with the one grammar of config/values/values.h.)
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "sluice/clock.h"

namespace sluice::simulate {

// The largest unit that divides `d` exactly ("1m", "300ms", "250us"); other
// durations in the largest unit they reach with three decimals, rounded down
// ("8.333ms", "5.714h"), or in nanoseconds below a microsecond ("50ns").
std::string format_duration(Nanos d);

// The UTC time of day of `t` (nanoseconds since the Unix epoch): "11:59:59",
// or "11:59:59.250" when it is not a whole second (milliseconds, rounded down).
std::string format_time_of_day(Nanos t);

}  // namespace sluice::simulate
