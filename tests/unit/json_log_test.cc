// logging.format json (src/observe/logging.h): each line one JSON object
// that Boost.JSON parses, whatever bytes the message holds; the access
// log's fields rendered as logfmt or as JSON members from one list.
#include <gtest/gtest.h>

#include <spdlog/sinks/ostream_sink.h>
#include <boost/json.hpp>
#include <functional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "observe/logging.h"

namespace sluice::observe {
namespace {

namespace json = boost::json;

// The text log's time: RFC 3339 with milliseconds and the zone's offset.
const std::regex kRfc3339(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d)");

// The lines `log` writes through a logger with the JSON formatter.
std::vector<std::string> json_lines(const std::function<void(spdlog::logger&)>& log) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_st>(out);
  spdlog::logger logger("json-test", sink);
  logger.set_formatter(make_json_formatter());
  logger.set_level(spdlog::level::trace);
  log(logger);
  std::vector<std::string> lines;
  std::istringstream in(out.str());
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(JsonLog, ALineIsTimeLevelAndMessage) {
  const std::vector<std::string> lines = json_lines([](spdlog::logger& l) {
    l.info("reloaded {}: generation {}", "/etc/sluice/sluice.yaml", 2);
    l.warn("w");
    l.error("e");
  });
  ASSERT_EQ(lines.size(), 3u);
  const json::object first = json::parse(lines[0]).as_object();
  ASSERT_EQ(first.size(), 3u) << lines[0];
  EXPECT_TRUE(std::regex_match(std::string(first.at("time").as_string()), kRfc3339)) << lines[0];
  EXPECT_EQ(first.at("level").as_string(), "info");
  EXPECT_EQ(first.at("msg").as_string(), "reloaded /etc/sluice/sluice.yaml: generation 2");
  // The text log's level names.
  EXPECT_EQ(json::parse(lines[1]).at("level").as_string(), "warning");
  EXPECT_EQ(json::parse(lines[2]).at("level").as_string(), "error");
}

TEST(JsonLog, QuotesControlBytesAndBytesThatAreNotUtf8StayValidJson) {
  const std::string message = "route \"GET /a\"\nkey \\ \x01 caf\xc3\xa9 \xff\xfe end";
  const std::vector<std::string> lines =
      json_lines([&](spdlog::logger& l) { l.info("{}", message); });
  ASSERT_EQ(lines.size(), 1u);  // the newline inside is escaped
  json::error_code ec;
  const json::value v = json::parse(lines[0], ec);
  ASSERT_FALSE(ec) << lines[0];
  EXPECT_EQ(v.at("msg").as_string(), "route \"GET /a\"\nkey \\ \x01 caf\xc3\xa9 \\xff\\xfe end");
}

TEST(JsonLog, AppendJsonLogTextEscapesEachInvalidByte) {
  std::string out;
  append_json_log_text("a\xc3(b\xed\xa0\x80", out);  // a cut sequence, a surrogate
  EXPECT_EQ(out, "a\\\\xc3(b\\\\xed\\\\xa0\\\\x80");
  out.clear();
  append_json_log_text("", out);
  EXPECT_EQ(out, "");
}

const std::vector<LogField> kFields = {
    {"client", "192.0.2.1"},
    {"method", "GET"},
    {"path", "/a b"},
    {"route", "GET /a"},
    {"key", ""},
    {"decision", "allowed"},
    {"status", "200", LogField::Kind::kNumber},
    {"upstream_ms", "", LogField::Kind::kNumber},
    {"ms", "0.125", LogField::Kind::kNumber},
};

TEST(AccessLine, TextIsTheTimeThenLogfmt) {
  EXPECT_EQ(access_line("2024-05-01T10:00:00.123+02:00", kFields, false),
            "2024-05-01T10:00:00.123+02:00 client=192.0.2.1 method=GET path=\"/a b\" "
            "route=\"GET /a\" key=- decision=allowed status=200 upstream_ms=- ms=0.125");
}

TEST(AccessLine, JsonHasEachFieldAsAMember) {
  const std::string line = access_line("2024-05-01T10:00:00.123+02:00", kFields, true);
  EXPECT_EQ(line,
            R"({"time":"2024-05-01T10:00:00.123+02:00","level":"info","msg":"access",)"
            R"("client":"192.0.2.1","method":"GET","path":"/a b","route":"GET /a","key":null,)"
            R"("decision":"allowed","status":200,"upstream_ms":null,"ms":0.125})");
  const json::value v = json::parse(line);
  EXPECT_EQ(v.at("status").as_int64(), 200);
  EXPECT_EQ(v.at("ms").as_double(), 0.125);
  EXPECT_TRUE(v.at("key").is_null());
}

}  // namespace
}  // namespace sluice::observe
