// Logging setup (spdlog): one logger for the server's own messages on stderr,
// and an optional access log on stdout.
//
// Thread-safety: setup_logging() is called once at startup, before any worker
// thread exists; the loggers themselves are thread-safe (spdlog _mt sinks).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <spdlog/spdlog.h>

namespace sluice::observe {

// Installs the default logger (stderr) at `level` ("trace", "debug", "info",
// "warn", "error"); an unknown level means "info". Returns false if the level
// name was not understood.
bool setup_logging(const std::string& level);

// Changes the level of the default logger (on reload).
bool set_log_level(const std::string& level);

// The access logger (stdout, one line per request, logfmt after an RFC 3339
// time with its zone). Created on first call.
spdlog::logger& access_logger();

// `value` as a logfmt value: bare when it holds no space, '"', '=' or control
// byte; else double-quoted with '"' and '\\' escaped and control bytes as
// \xNN. "-" for an empty value.
std::string logfmt_value(std::string_view value);

}  // namespace sluice::observe
