// `sluice validate --config FILE`: loads a config file with the server's
// loader and reports every error, without starting anything.
#pragma once

#include <span>
#include <string_view>

namespace sluice::cli {

// argv after "validate". Returns 0 when the file is valid (a one-line summary
// on stdout), 1 when it is not (every error on stderr as file:line:col:
// message), 2 on a usage error.
int run_validate(std::span<const std::string_view> args);

}  // namespace sluice::cli
