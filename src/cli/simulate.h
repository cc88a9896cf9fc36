// `sluice simulate`: replays traffic against all five algorithms on a
// simulated clock and reports what each allowed. Argument parsing and output
// only; the engine is src/simulate/ (simulate/simulation.h).
#pragma once

#include <ostream>
#include <span>
#include <string_view>

namespace sluice::cli {

// argv after "simulate". Writes the report to stdout, errors to stderr.
// Returns the process exit code: 0 done, 1 unreadable or bad trace, 2 bad usage.
int run_simulate(std::span<const std::string_view> args);

// The same, writing to the given streams (for tests).
int run_simulate(std::span<const std::string_view> args, std::ostream& out, std::ostream& err);

}  // namespace sluice::cli
