// GET /admin/history on the real binary: the decisions of every HTTP door
// (the gateway's listen port, POST /v1/check, GET /v1/auth) in their route's
// history, shadow denials among the denied, and bad `seconds` refused.
// The binary runs on the real clock: the test compares totals over the
// window, waiting until the second of the last decision is over.
#include <chrono>
#include <ctime>
#include <map>
#include <string>
#include <thread>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include "test_support.h"

namespace sluice::test {
namespace {

namespace json = boost::json;

const std::string kYaml = R"(
headers: [legacy]
policies:
  login: {capacity: 2, refill_rate: 1/h}
routes:
  - match: GET /api/search
    limits: [{capacity: 3, refill_rate: 1/h}]
  - match: GET /api/beta
    shadow: true
    limits: [{capacity: 1, refill_rate: 1/h}]
)";

struct Totals {
  int64_t allowed = 0, denied = 0, error = 0;
  bool operator==(const Totals&) const = default;
};

std::ostream& operator<<(std::ostream& out, const Totals& t) {
  return out << "{allowed " << t.allowed << ", denied " << t.denied << ", error " << t.error << "}";
}

// The totals per route of GET /admin/history (all 900 seconds).
std::map<std::string, Totals> history_totals(const SluiceProcess& server) {
  const HttpResponse r = server.admin_get("/admin/history");
  EXPECT_EQ(r.status, 200) << r.body;
  std::map<std::string, Totals> out;
  if (r.status != 200) return out;
  const json::object body = json::parse(r.body).as_object();
  EXPECT_EQ(body.at("seconds").as_int64(), 900);
  for (const auto& [name, counts] : body.at("routes").as_object()) {
    auto sum = [&counts](const char* result) {
      const json::array& values = counts.at(result).as_array();
      EXPECT_EQ(values.size(), 900u) << result;
      int64_t total = 0;
      for (const json::value& v : values) total += v.as_int64();
      return total;
    };
    out[std::string(name)] = {sum("allowed"), sum("denied"), sum("error")};
  }
  return out;
}

TEST(History, EveryHttpDoorCountsInItsRoutesHistory) {
  auto server = SluiceProcess::start(kYaml);
  ASSERT_NE(server, nullptr);
  // Gateway (decision-only listen port): 3 allowed, 1 denied.
  EXPECT_EQ(count_allowed(*server, "GET", "/api/search", 4), 3);
  // /v1/auth of the same route and client: denied.
  EXPECT_EQ(
      server->get("/v1/auth", {{"X-Original-Method", "GET"}, {"X-Original-URI", "/api/search"}})
          .status,
      429);
  // /v1/check: 2 allowed, 1 denied.
  for (int status : {200, 200, 429}) {
    EXPECT_EQ(server
                  ->post("/v1/check", R"({"policy":"login","key":"u"})",
                         {{"Content-Type", "application/json"}})
                  .status,
              status);
  }
  // A shadow route: the second is let through, and counts as denied.
  EXPECT_EQ(server->get("/api/beta").status, 200);
  EXPECT_EQ(server->get("/api/beta").status, 200);
  EXPECT_EQ(
      server->metric(R"(sluice_requests_total{route="GET /api/beta",result="shadow_denied"})"), 1);

  const std::map<std::string, Totals> expected = {
      {"GET /api/beta", {1, 1, 0}},
      {"GET /api/search", {3, 2, 0}},
      {"none", {0, 0, 0}},
      {"policy:login", {2, 1, 0}},
  };
  // The history shows whole seconds: wait (bounded) for the last one to end.
  std::map<std::string, Totals> seen;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((seen = history_totals(*server)) != expected && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(seen, expected);
}

TEST(History, EndIsTheSecondNowAndASecondsOutOfRangeIs400) {
  auto server = SluiceProcess::start(kYaml);
  ASSERT_NE(server, nullptr);
  const int64_t before = std::time(nullptr);
  const HttpResponse r = server->admin_get("/admin/history?seconds=5");
  const int64_t after = std::time(nullptr);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.header("Content-Type"), "application/json");
  const json::object body = json::parse(r.body).as_object();
  EXPECT_EQ(body.at("seconds").as_int64(), 5);
  EXPECT_GE(body.at("end").as_int64(), before);
  EXPECT_LE(body.at("end").as_int64(), after);
  EXPECT_EQ(json::serialize(body.at("routes").at("none")),
            R"({"allowed":[0,0,0,0,0],"denied":[0,0,0,0,0],"error":[0,0,0,0,0]})");
  for (const std::string query : {"?seconds=0", "?seconds=901", "?seconds=x"}) {
    const HttpResponse bad = server->admin_get("/admin/history" + query);
    EXPECT_EQ(bad.status, 400) << query;
    EXPECT_EQ(bad.body,
              R"x({"error":{"code":"BAD_REQUEST","message":"seconds must be a whole number )x"
              R"x(from 1 to 900 (GET /admin/history?seconds=N)"}})x")
        << query;
  }
  const HttpResponse post = server->admin_post("/admin/history");
  EXPECT_EQ(post.status, 405);
  EXPECT_EQ(post.header("Allow"), "GET");
}

}  // namespace
}  // namespace sluice::test
