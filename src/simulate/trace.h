// Traces for `sluice simulate --trace FILE`: CSV lines `time_ms,key,cost`.
//
//   time_ms  milliseconds since the Unix epoch, a whole number >= 0; lines
//            sorted by it (equal times allowed)
//   key      any text without a comma (spaces around fields are trimmed);
//            each key has its own limit state
//   cost     a whole number >= 1 (the request's weight)
//
// An optional header line `time_ms,key,cost`; blank lines are skipped.
#pragma once

#include <string_view>

#include "simulate/simulation.h"
#include "sluice/result.h"

namespace sluice::simulate {

// Parses the whole text of a trace. On error, the message holds one line
// "source:line: message" per bad line (at most kMaxTraceErrors, then a count).
Result<Traffic> parse_trace(std::string_view text, std::string_view source);

inline constexpr size_t kMaxTraceErrors = 20;

}  // namespace sluice::simulate
