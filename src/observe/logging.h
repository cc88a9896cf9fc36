// Logging setup (spdlog): one logger for the server's own messages on stderr,
// and an optional access log on stdout.
//
// Thread-safety: setup_logging() is called once at startup, before any worker
// thread exists; the loggers themselves are thread-safe (spdlog _mt sinks).
#pragma once

#include <memory>
#include <string>

#include <spdlog/spdlog.h>

namespace sluice::observe {

// Installs the default logger (stderr) at `level` ("trace", "debug", "info",
// "warn", "error"); an unknown level means "info". Returns false if the level
// name was not understood.
bool setup_logging(const std::string& level);

// Changes the level of the default logger (on reload).
bool set_log_level(const std::string& level);

// The access logger (stdout, one line per request). Created on first call.
spdlog::logger& access_logger();

}  // namespace sluice::observe
