// logging.format through the real binary: with json every line the server
// writes (stderr: its log, gRPC's lines included; stdout: the access log)
// is one JSON object with time, level and msg, an access line with its
// fields as members; text stays the default; a reload switches the format.
#include <boost/json.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "test_support.h"

namespace sluice::test {
namespace {

namespace json = boost::json;

const std::string kYaml = R"(
headers: [legacy]
routes:
  - match: GET /a
    limits: [{capacity: 1, refill_rate: 1/h}]
)";

// RFC 3339 with milliseconds and the zone's offset, as the text log writes it.
const std::regex kRfc3339(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d)");

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Every line of `text` as a JSON object with a time, a level and a msg;
// fails the test naming each line that is not.
std::vector<json::object> json_lines(const std::string& text) {
  std::vector<json::object> out;
  for (const std::string& line : lines_of(text)) {
    json::error_code ec;
    json::value v = json::parse(line, ec);
    if (ec || !v.is_object()) {
      ADD_FAILURE() << "not a JSON object: " << line;
      continue;
    }
    json::object& o = v.as_object();
    const json::value* time = o.if_contains("time");
    EXPECT_TRUE(time != nullptr && time->is_string() &&
                std::regex_match(std::string(time->as_string()), kRfc3339))
        << line;
    EXPECT_TRUE(o.contains("level") && o.at("level").is_string()) << line;
    EXPECT_TRUE(o.contains("msg") && o.at("msg").is_string()) << line;
    out.push_back(std::move(o));
  }
  return out;
}

// The first object whose msg starts with `prefix`, or null.
const json::object* find_msg(const std::vector<json::object>& lines, std::string_view prefix) {
  for (const json::object& o : lines) {
    if (std::string_view(o.at("msg").as_string()).starts_with(prefix)) return &o;
  }
  return nullptr;
}

TEST(JsonLog, EveryServerLogLineIsOneObject) {
  auto server = SluiceProcess::start(kYaml + "logging: {format: json, access_log: true}\n");
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(count_allowed(*server, "GET", "/a", 2), 1);  // one denial
  ASSERT_TRUE(server->wait_for_log("denied: route")) << server->log();
  server->rewrite_config(kYaml + "logging: {format: json, access_log: true}\n");
  server->send_signal(SIGHUP);
  ASSERT_TRUE(server->wait_for_log("generation 2")) << server->log();

  const std::vector<json::object> lines = json_lines(server->log());
  ASSERT_GE(lines.size(), 5u) << server->log();
  const json::object* listening = find_msg(lines, "listening on http://127.0.0.1:");
  ASSERT_NE(listening, nullptr) << server->log();
  EXPECT_EQ(listening->at("level").as_string(), "info");
  EXPECT_EQ(listening->size(), 3u);
  const json::object* denied =
      find_msg(lines, "denied: route \"GET /a\" key \"route:GET /a|ip:127.0.0.1\"");
  ASSERT_NE(denied, nullptr) << server->log();
  EXPECT_EQ(denied->at("level").as_string(), "info");
  EXPECT_NE(find_msg(lines, "SIGHUP: reloading"), nullptr) << server->log();
  EXPECT_NE(find_msg(lines, "reloaded " + server->config_path() + ": generation 2"), nullptr)
      << server->log();
}

TEST(JsonLog, EveryAccessLogLineIsOneObjectWithItsFields) {
  auto server = SluiceProcess::start(kYaml + "logging: {format: json, access_log: true}\n");
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(count_allowed(*server, "GET", "/a?q=1", 2), 1);  // allowed, then denied
  EXPECT_EQ(server->get("/elsewhere").status, 200);          // no route: no limit
  const std::string access = server->wait_for_access_log({"\"status\":429", "/elsewhere"});
  const std::vector<json::object> lines = json_lines(access);
  ASSERT_EQ(lines.size(), 3u) << access;
  const std::vector<std::string> names = {"time",   "level",  "msg",   "client",      "peer",
                                          "method", "path",   "route", "key",         "decision",
                                          "limit",  "status", "bytes", "upstream_ms", "ms"};
  for (const json::object& line : lines) {
    std::vector<std::string> keys;
    for (const auto& member : line) keys.emplace_back(member.key());
    EXPECT_EQ(keys, names) << json::serialize(line);
    EXPECT_EQ(line.at("level").as_string(), "info");
    EXPECT_EQ(line.at("msg").as_string(), "access");
    EXPECT_EQ(line.at("client").as_string(), "127.0.0.1");
    EXPECT_EQ(line.at("peer").as_string(), "127.0.0.1");
    EXPECT_EQ(line.at("method").as_string(), "GET");
    EXPECT_TRUE(line.at("upstream_ms").is_null());  // decision-only: nothing proxied
    EXPECT_TRUE(line.at("ms").is_double()) << json::serialize(line);
  }
  // The line of /elsewhere (another connection) may come before the
  // denial's: a line is written once its response is sent.
  auto by_decision = [&](std::string_view decision) -> const json::object& {
    for (const json::object& line : lines) {
      if (line.at("decision").as_string() == decision) return line;
    }
    ADD_FAILURE() << "no line with decision " << decision << ":\n" << access;
    return lines[0];
  };
  const json::object& allowed = by_decision("allowed");
  EXPECT_EQ(allowed.at("path").as_string(), "/a");  // without the query
  EXPECT_EQ(allowed.at("route").as_string(), "GET /a");
  EXPECT_EQ(allowed.at("key").as_string(), "ip:127.0.0.1");
  EXPECT_EQ(allowed.at("decision").as_string(), "allowed");
  EXPECT_TRUE(allowed.at("limit").is_null());  // only a denial names its limit
  EXPECT_EQ(allowed.at("status").as_int64(), 200);
  EXPECT_EQ(allowed.at("bytes").as_int64(), 16);  // {"allowed":true}
  const json::object& denied = by_decision("denied");
  EXPECT_EQ(denied.at("limit").as_string(), "GET /a");  // the route's one inline limit
  EXPECT_EQ(denied.at("status").as_int64(), 429);
  EXPECT_EQ(denied.at("bytes").as_int64(), static_cast<int64_t>(rate_limited_body("GET /a").size()));
  const json::object& unlimited = by_decision("none");
  EXPECT_EQ(unlimited.at("path").as_string(), "/elsewhere");
  EXPECT_TRUE(unlimited.at("limit").is_null());
  EXPECT_EQ(unlimited.at("route").as_string(), "none");
  EXPECT_TRUE(unlimited.at("key").is_null());  // the text line's `-`
}

TEST(JsonLog, TextStaysTheDefault) {
  auto server = SluiceProcess::start(kYaml + "logging: {access_log: true}\n");
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(count_allowed(*server, "GET", "/a", 2), 1);
  ASSERT_TRUE(server->wait_for_log("denied: route")) << server->log();
  const std::regex text_line(
      R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d (info|warning|error) .+)");
  for (const std::string& line : lines_of(server->log())) {
    EXPECT_TRUE(std::regex_match(line, text_line)) << line;
  }
  EXPECT_NE(server->log().find(" info denied: route \"GET /a\" key \"route:GET /a|ip:127.0.0.1\""),
            std::string::npos)
      << server->log();
  const std::string access = server->wait_for_access_log({"status=429"});
  const std::vector<std::string> lines = lines_of(access);
  ASSERT_EQ(lines.size(), 2u) << access;
  const std::regex allowed(
      R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d client=127\.0\.0\.1 peer=127\.0\.0\.1 )"
      R"(method=GET path=/a route="GET /a" key=ip:127\.0\.0\.1 decision=allowed limit=- )"
      R"(status=200 bytes=16 upstream_ms=- ms=\d+\.\d{3})");
  EXPECT_TRUE(std::regex_match(lines[0], allowed)) << lines[0];
  EXPECT_NE(lines[1].find(" decision=denied limit=\"GET /a\" status=429 "), std::string::npos)
      << lines[1];
}

TEST(JsonLog, AReloadSwitchesTheFormatForTheNextLine) {
  auto server = SluiceProcess::start(kYaml + "logging: {access_log: true}\n");
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->get("/a").status, 200);
  server->wait_for_access_log({"status=200"});
  const size_t text_lines = lines_of(server->log()).size();
  server->rewrite_config(kYaml + "logging: {format: json, access_log: true}\n");
  server->send_signal(SIGHUP);
  ASSERT_TRUE(server->wait_for_log("generation 2")) << server->log();
  const std::vector<std::string> lines = lines_of(server->log());
  // Up to the SIGHUP line: text; from the reload's own report on: JSON.
  const std::string after_reload = [&] {
    std::string out;
    bool json_started = false;
    for (size_t i = text_lines; i < lines.size(); ++i) {
      if (lines[i].starts_with("{")) json_started = true;
      if (json_started) out += lines[i] + "\n";
    }
    return out;
  }();
  const std::vector<json::object> objects = json_lines(after_reload);
  EXPECT_NE(find_msg(objects, "reloaded " + server->config_path() + ": generation 2"), nullptr)
      << server->log();
  EXPECT_TRUE(lines[text_lines].find(" info SIGHUP: reloading") != std::string::npos)
      << server->log();
  // The access log too: the line before the reload is text, the next JSON.
  EXPECT_EQ(server->get("/a").status, 429);
  const std::vector<std::string> access = lines_of(server->wait_for_access_log({"\"status\":429"}));
  ASSERT_EQ(access.size(), 2u);
  EXPECT_NE(access[0].find(" decision=allowed limit=- status=200 "), std::string::npos)
      << access[0];
  EXPECT_EQ(json::parse(access[1]).at("decision").as_string(), "denied") << access[1];
}

// gRPC's own lines (its debug lines at startup, routed through the server
// log by rls/grpc_log.h) come out as JSON like any other.
TEST(JsonLog, GrpcsOwnLinesAreJsonToo) {
  const std::string rls =
      "domain: edge\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, "
      "requests_per_unit: 1}\n";
  const std::string dir = make_temp_dir();
  std::filesystem::create_directory(dir + "/rls");
  std::ofstream(dir + "/rls/edge.yaml") << rls;
  std::ofstream(dir + "/sluice.yaml")
      << SluiceProcess::kListenLines << "grpc: 127.0.0.1:0\nrls: {config_dir: rls}\n"
      << "logging: {format: json, level: debug}\n";
  auto server = SluiceProcess::start_prepared(dir, dir + "/sluice.yaml");
  ASSERT_NE(server, nullptr);
  const std::vector<json::object> lines = json_lines(server->log());
  // "grpc: <gRPC's message> (<its source file>:<line>)"
  const std::regex grpc_line(R"(grpc: .+ \([a-z0-9_]+\.cc:\d+\))");
  size_t grpc_lines = 0;
  for (const json::object& o : lines) {
    if (std::regex_match(std::string(o.at("msg").as_string()), grpc_line)) ++grpc_lines;
  }
  EXPECT_GT(grpc_lines, 0u) << server->log();
  EXPECT_NE(find_msg(lines, "grpc on 127.0.0.1:"), nullptr) << server->log();
}

}  // namespace
}  // namespace sluice::test
