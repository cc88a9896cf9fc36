// Logging setup (spdlog): one logger for the server's own messages on stderr,
// and an optional access log on stdout, each line as text or as one JSON
// object (`logging.format`).
//
// Text: an RFC 3339 time with its zone, the level, the message; access log
// lines: the time, then the fields as logfmt. JSON: {"time", "level", "msg"}
// with the same time text, and an access log line's fields as members of
// their own (`msg` is "access").
//
// Thread-safety: setup_logging() is called once at startup, before any worker
// thread exists; set_log_level() and set_log_format() from one thread at a
// time (reloads); the loggers and log_access() from any thread.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include <spdlog/spdlog.h>

namespace sluice::observe {

// Installs the default logger (stderr) at `level` ("trace", "debug", "info",
// "warn", "error") in `format` ("text", "json"). Returns false if a name
// was not understood (then "info", "text").
bool setup_logging(const std::string& level, const std::string& format = "text");

// Changes the level of the default logger (on reload).
bool set_log_level(const std::string& level);

// Changes the format of every line written from now on, both logs (on
// reload). Returns false for an unknown name (then "text").
bool set_log_format(const std::string& format);

// One named value of a structured log line.
struct LogField {
  enum class Kind { kText, kNumber };
  std::string_view name;
  std::string_view value;   // "": none (text `-`, JSON null)
  Kind kind = Kind::kText;  // a number is written bare in JSON
};

// Writes one access log line (stdout) of `fields` in the current format:
// access_line() at the time now. The one place that knows the fields is
// the caller's list (http::Session::log_access).
void log_access(std::span<const LogField> fields);

// An access log line of `fields` at `time` (RFC 3339), without its newline:
//   2024-05-01T10:00:00.123+02:00 client=192.0.2.1 method=GET ...
//   {"time":"2024-05-01T10:00:00.123+02:00","level":"info","msg":"access","client":"192.0.2.1",...}
std::string access_line(std::string_view time, std::span<const LogField> fields, bool json);

// `value` as a logfmt value: bare when it holds no space, '"', '=' or control
// byte; else double-quoted with '"' and '\\' escaped and control bytes as
// \xNN. "-" for an empty value.
std::string logfmt_value(std::string_view value);

// The formatter of the JSON lines: {"time":...,"level":...,"msg":...} and
// a newline (set_log_format("json") gives it to the server log).
std::unique_ptr<spdlog::formatter> make_json_formatter();

// Appends `text` as the inside of a JSON string that is always valid JSON:
// escaped as util/json_escape.h does, and each byte that is not part of
// valid UTF-8 (a raw request path can hold any byte) written as the four
// characters \xNN, as the text log writes control bytes.
void append_json_log_text(std::string_view text, std::string& out);

}  // namespace sluice::observe
