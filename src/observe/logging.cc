#include "observe/logging.h"

#include <atomic>

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>

#include "util/json_escape.h"
#include "util/utf8.h"

namespace sluice::observe {

namespace {

// RFC 3339: local time with its offset from UTC ("+02:00").
constexpr const char* kTimePattern = "%Y-%m-%dT%H:%M:%S.%e%z";
constexpr const char* kTextPattern = "%Y-%m-%dT%H:%M:%S.%e%z %l %v";

std::atomic<bool> json_format{false};

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

void append(std::string_view text, spdlog::memory_buf_t& out) {
  out.append(text.data(), text.data() + text.size());
}

// {"time":"...","level":"...","msg":"..."}: the server log as JSON, one
// object per line. Runs under its sink's lock, like spdlog's own formatters.
class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    line_.assign("{\"time\":\"");
    spdlog::memory_buf_t time;
    time_.format(msg, time);
    line_.append(time.data(), time.size());
    line_.append("\",\"level\":\"");
    const spdlog::string_view_t level = spdlog::level::to_string_view(msg.level);
    line_.append(level.data(), level.size());
    line_.append("\",\"msg\":\"");
    append_json_log_text(std::string_view(msg.payload.data(), msg.payload.size()), line_);
    line_.append("\"}\n");
    append(line_, dest);
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>();
  }

 private:
  spdlog::pattern_formatter time_{kTimePattern, spdlog::pattern_time_type::local, ""};
  std::string line_;
};

void apply_format(spdlog::logger& logger, bool json) {
  if (json) {
    logger.set_formatter(make_json_formatter());
  } else {
    logger.set_pattern(kTextPattern);
  }
}

}  // namespace

std::unique_ptr<spdlog::formatter> make_json_formatter() {
  return std::make_unique<JsonFormatter>();
}

bool setup_logging(const std::string& level, const std::string& format) {
  std::shared_ptr<spdlog::logger> logger = spdlog::get("sluice");
  if (!logger) logger = spdlog::stderr_logger_mt("sluice");
  // Every error and warning reaches the terminal at once, even if the process dies next.
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
  const bool format_known = set_log_format(format);
  return set_log_level(level) && format_known;
}

bool set_log_level(const std::string& level) {
  spdlog::level::level_enum parsed = spdlog::level::info;
  const bool known = parse_level(level, &parsed);
  spdlog::default_logger()->set_level(parsed);
  return known;
}

bool set_log_format(const std::string& format) {
  const bool json = format == "json";
  json_format.store(json, std::memory_order_relaxed);
  apply_format(*spdlog::default_logger(), json);
  return json || format == "text";
}

void log_access(std::span<const LogField> fields) {
  // The logger writes the line as given: the time is part of it, so a line
  // is whole in one format even while a reload switches it.
  static std::shared_ptr<spdlog::logger> logger = [] {
    std::shared_ptr<spdlog::logger> l = spdlog::get("access");
    if (!l) l = spdlog::stdout_logger_mt("access");
    l->set_pattern("%v");
    l->set_level(spdlog::level::info);
    l->flush_on(spdlog::level::info);
    return l;
  }();
  thread_local spdlog::pattern_formatter time_format(kTimePattern, spdlog::pattern_time_type::local,
                                                     "");
  const spdlog::details::log_msg now(spdlog::source_loc{}, "access", spdlog::level::info,
                                     spdlog::string_view_t());
  spdlog::memory_buf_t time;
  time_format.format(now, time);
  const std::string line = access_line(std::string_view(time.data(), time.size()), fields,
                                       json_format.load(std::memory_order_relaxed));
  logger->log(spdlog::level::info, spdlog::string_view_t(line.data(), line.size()));
}

std::string access_line(std::string_view time, std::span<const LogField> fields, bool json) {
  std::string out;
  out.reserve(256);
  if (json) {
    out.append("{\"time\":\"").append(time).append("\",\"level\":\"info\",\"msg\":\"access\"");
    for (const LogField& f : fields) {
      out.append(",\"").append(f.name).append("\":");
      if (f.value.empty()) {
        out.append("null");
      } else if (f.kind == LogField::Kind::kNumber) {
        out.append(f.value);
      } else {
        out.push_back('"');
        append_json_log_text(f.value, out);
        out.push_back('"');
      }
    }
    out.push_back('}');
    return out;
  }
  out.append(time);
  for (const LogField& f : fields) {
    out.push_back(' ');
    out.append(f.name).push_back('=');
    out.append(logfmt_value(f.value));
  }
  return out;
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

void append_json_log_text(std::string_view text, std::string& out) {
  constexpr char kHex[] = "0123456789abcdef";
  while (!text.empty()) {
    const size_t bad = util::invalid_utf8(text);
    append_json_escaped(text.substr(0, bad), out);
    if (bad == std::string_view::npos) return;
    const auto byte = static_cast<unsigned char>(text[bad]);
    out.append("\\\\x");
    out.push_back(kHex[byte >> 4]);
    out.push_back(kHex[byte & 0xf]);
    text.remove_prefix(bad + 1);
  }
}

}  // namespace sluice::observe
