// GET /admin/history on the admin port: the exact per-second counts of
// decisions made through the front door at known (injected) times, the
// current second left out, history kept across a reload for a route that
// keeps its name, and a 400 for every bad `seconds`.
#include <chrono>
#include <string>

#include <gtest/gtest.h>
#include <boost/json/parse.hpp>

#include "http/admin.h"
#include "http/context.h"
#include "http/front_door.h"
#include "http/state.h"
#include "policy/config_loader.h"
#include "session_pipe.h"
#include "sluice/memory_store.h"

namespace sluice::http {
namespace {

using namespace std::chrono_literals;
constexpr int64_t kT = 1'700'000'000;

constexpr const char* kConfig =
    "listen: 127.0.0.1:0\nheaders: none\nroutes:\n"
    "  - match: GET /a\n    limits: [{capacity: 2, refill_rate: 1/h}]\n";

struct Answer {
  std::string status;  // the status line
  std::string body;
};

class AdminHistory : public ::testing::Test {
 protected:
  AdminHistory() : clock_(Nanos{std::chrono::seconds(kT)}), context_(store_, clock_) {
    testing::register_session_metrics(context_);
    load(kConfig);
  }

  void load(const std::string& yaml) {
    policy::LoadResult loaded = policy::load_config_string(yaml, "t.yaml");
    ASSERT_TRUE(loaded.config.has_value());
    context_.state.store(build_state(std::move(*loaded.config), ++generation_, context_.registry,
                                     context_.decision_sinks));
  }

  // `count` requests GET `path` on the listen port: the status lines.
  std::string requests(const std::string& path, int count) {
    std::string input;
    for (int i = 0; i < count; ++i) input += "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n";
    FrontDoor door(context_, FrontDoor::Port::kListen, nullptr);
    const testing::Exchange e = testing::exchange(context_, door, input, 10s);
    std::string statuses;
    for (size_t at = e.out.find("HTTP/1.1 "); at != std::string::npos;
         at = e.out.find("HTTP/1.1 ", at + 1)) {
      statuses += e.out.substr(at + 9, 3) + " ";
    }
    return statuses;
  }

  Answer admin(const std::string& target) {
    const std::string input = "GET " + target + " HTTP/1.1\r\nHost: localhost\r\n\r\n";
    const testing::Exchange e = testing::exchange(context_, admin_, input, 10s);
    const size_t line_end = e.out.find("\r\n");
    const size_t head_end = e.out.find("\r\n\r\n");
    if (line_end == std::string::npos || head_end == std::string::npos) return {e.out, ""};
    return {e.out.substr(0, line_end), e.out.substr(head_end + 4)};
  }

  void advance(std::chrono::seconds by) { clock_.advance(by); }

  MemoryStore store_;
  ManualClock clock_;
  ServerContext context_;
  uint64_t generation_ = 0;
  AdminHandler admin_{context_, [] { return ReloadOutcome{}; }, [] { return std::nullopt; }};
};

TEST_F(AdminHistory, ShowsTheDecisionsOfEachWholeSecondOldestFirst) {
  EXPECT_EQ(requests("/a", 3), "200 200 429 ");  // at kT: 2 allowed, 1 denied
  EXPECT_EQ(requests("/other", 1), "200 ");      // no route: "none", allowed
  advance(2s);
  EXPECT_EQ(requests("/a", 1), "429 ");  // at kT + 2
  advance(1s);
  EXPECT_EQ(requests("/a", 2), "429 429 ");  // at kT + 3: not over, not shown

  const Answer a = admin("/admin/history?seconds=4");
  EXPECT_EQ(a.status, "HTTP/1.1 200 OK");
  EXPECT_EQ(a.body,
            "{\"seconds\":4,\"end\":1700000003,\"routes\":{"
            "\"GET /a\":{\"allowed\":[0,2,0,0],\"denied\":[0,1,0,1],\"error\":[0,0,0,0]},"
            "\"none\":{\"allowed\":[0,1,0,0],\"denied\":[0,0,0,0],\"error\":[0,0,0,0]}}}");

  // Once kT + 3 is over, it shows.
  advance(1s);
  EXPECT_EQ(admin("/admin/history?seconds=2").body,
            "{\"seconds\":2,\"end\":1700000004,\"routes\":{"
            "\"GET /a\":{\"allowed\":[0,0],\"denied\":[1,2],\"error\":[0,0]},"
            "\"none\":{\"allowed\":[0,0],\"denied\":[0,0],\"error\":[0,0]}}}");
}

TEST_F(AdminHistory, WithoutSecondsShowsAll900) {
  EXPECT_EQ(requests("/a", 1), "200 ");
  advance(1s);
  const Answer a = admin("/admin/history");
  EXPECT_EQ(a.status, "HTTP/1.1 200 OK");
  const boost::json::object body = boost::json::parse(a.body).as_object();
  EXPECT_EQ(body.at("seconds").as_int64(), 900);
  EXPECT_EQ(body.at("end").as_int64(), kT + 1);
  const boost::json::array& allowed = body.at("routes").at("GET /a").at("allowed").as_array();
  ASSERT_EQ(allowed.size(), 900u);
  EXPECT_EQ(allowed[899].as_int64(), 1);
  int64_t sum = 0;
  for (const boost::json::value& v : allowed) sum += v.as_int64();
  EXPECT_EQ(sum, 1);
}

TEST_F(AdminHistory, ARouteThatKeepsItsNameKeepsItsHistoryAcrossAReload) {
  EXPECT_EQ(requests("/a", 1), "200 ");
  load(std::string(kConfig) + "  - match: GET /b\n    limits: [{capacity: 1, refill_rate: 1/h}]\n");
  EXPECT_EQ(requests("/b", 2), "200 429 ");
  advance(1s);
  EXPECT_EQ(admin("/admin/history?seconds=1").body,
            "{\"seconds\":1,\"end\":1700000001,\"routes\":{"
            "\"GET /a\":{\"allowed\":[1],\"denied\":[0],\"error\":[0]},"
            "\"GET /b\":{\"allowed\":[1],\"denied\":[1],\"error\":[0]},"
            "\"none\":{\"allowed\":[0],\"denied\":[0],\"error\":[0]}}}");
  // GET /b leaves the config: once no State holds it, it is gone.
  load(kConfig);
  EXPECT_EQ(admin("/admin/history?seconds=1").body,
            "{\"seconds\":1,\"end\":1700000001,\"routes\":{"
            "\"GET /a\":{\"allowed\":[1],\"denied\":[0],\"error\":[0]},"
            "\"none\":{\"allowed\":[0],\"denied\":[0],\"error\":[0]}}}");
}

TEST_F(AdminHistory, ABadSecondsIs400) {
  const std::string kBody =
      "{\"error\":{\"code\":\"BAD_REQUEST\",\"message\":\"seconds must be a whole number from 1 "
      "to 900 (GET /admin/history?seconds=N)\"}}";
  for (const char* query : {"seconds=0", "seconds=901", "seconds=-1", "seconds=", "seconds=abc",
                            "seconds=1.5", "seconds=10&seconds=20", "seconds=10&x=1", "secs=10",
                            "seconds=99999999999999999999999", "seconds=+5", "seconds=%205"}) {
    const Answer a = admin(std::string("/admin/history?") + query);
    EXPECT_EQ(a.status, "HTTP/1.1 400 Bad Request") << query;
    EXPECT_EQ(a.body, kBody) << query;
  }
  EXPECT_EQ(admin("/admin/history?seconds=900").status, "HTTP/1.1 200 OK");
  EXPECT_EQ(admin("/admin/history?seconds=1").status, "HTTP/1.1 200 OK");
}

}  // namespace
}  // namespace sluice::http
