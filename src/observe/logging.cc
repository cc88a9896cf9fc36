#include "observe/logging.h"

#include <spdlog/sinks/stdout_sinks.h>

namespace sluice::observe {

namespace {

bool parse_level(const std::string& name, spdlog::level::level_enum* out) {
  if (name == "trace")
    *out = spdlog::level::trace;
  else if (name == "debug")
    *out = spdlog::level::debug;
  else if (name == "info")
    *out = spdlog::level::info;
  else if (name == "warn" || name == "warning")
    *out = spdlog::level::warn;
  else if (name == "error")
    *out = spdlog::level::err;
  else
    return false;
  return true;
}

}  // namespace

bool setup_logging(const std::string& level) {
  std::shared_ptr<spdlog::logger> logger = spdlog::get("sluice");
  if (!logger) logger = spdlog::stderr_logger_mt("sluice");
  // RFC 3339: local time with its offset from UTC.
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %l %v");
  // Every error and warning reaches the terminal at once, even if the process dies next.
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
  return set_log_level(level);
}

bool set_log_level(const std::string& level) {
  spdlog::level::level_enum parsed = spdlog::level::info;
  const bool known = parse_level(level, &parsed);
  spdlog::default_logger()->set_level(parsed);
  return known;
}

spdlog::logger& access_logger() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    std::shared_ptr<spdlog::logger> l = spdlog::get("access");
    if (!l) l = spdlog::stdout_logger_mt("access");
    l->set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %v");
    l->set_level(spdlog::level::info);
    l->flush_on(spdlog::level::info);
    return l;
  }();
  return *logger;
}

std::string logfmt_value(std::string_view value) {
  if (value.empty()) return "-";
  bool bare = true;
  for (unsigned char c : value) {
    if (c <= 0x20 || c == 0x7f || c == '"' || c == '=' || c == '\\') bare = false;
  }
  if (bare) return std::string(value);
  std::string out = "\"";
  for (unsigned char c : value) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace sluice::observe
