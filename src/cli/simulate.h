// `sluice simulate`: replays traffic against all five algorithms on a
// simulated clock and reports what each allowed.
#pragma once

#include <span>
#include <string_view>

namespace sluice::cli {

// argv after "simulate". Returns the process exit code.
int run_simulate(std::span<const std::string_view> args);

}  // namespace sluice::cli
