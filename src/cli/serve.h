// `sluice serve --config FILE`: runs the HTTP server (gateway, decision APIs,
// admin port) until SIGTERM/SIGINT.
#pragma once

#include <span>
#include <string_view>

namespace sluice::cli {

// argv after "serve". Returns the process exit code: 0 after a graceful
// shutdown, 1 when the config is invalid or a port cannot be bound, 2 on
// bad usage.
int run_serve(std::span<const std::string_view> args);

}  // namespace sluice::cli
