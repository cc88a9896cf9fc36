// A route's `delay` through the real sluice binary in front of a
// TestUpstream: requests ahead of the rate are held (no 429) and reach the
// upstream at their turns, in arrival order; a client that leaves while held
// frees its turn; SIGTERM lets a held request have its turn. Times are the
// upstream's receipt times (server side); each bound allows an ASan build
// under ctest -j2 its margin late, never early.
#include <algorithm>
#include <csignal>
#include <memory>
#include <string>
#include <vector>

#include "gateway_support.h"
#include "test_support.h"

namespace sluice::test {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// `server_extra`: more lines of the server section.
std::string queue_yaml(const std::string& upstream_url, const std::string& rate,
                       const std::string& delay, const std::string& server_extra = "") {
  return "upstream:\n  url: " + upstream_url + "\nserver:\n  threads: 1\n  shutdown_grace: 20s\n" +
         server_extra +
         "routes:\n  - match: GET /feed\n"
         "    limits: [{capacity: 1, refill_rate: " +
         rate + "}]\n    delay: " + delay + "\n";
}

long long ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration_cast<milliseconds>(b - a).count();
}

// The request number `i` of a target "/feed?i=<i>" in an upstream head.
int request_number(const std::string& head) {
  const size_t at = head.find("?i=");
  return at == std::string::npos ? -1 : std::atoi(head.c_str() + at + 3);
}

// Sends request `i` on a new connection and waits until the server holds
// `held` requests (this one among them).
std::unique_ptr<HttpConnection> send_held(const SluiceProcess& server, int i, long long held) {
  auto c = server.connect();
  c->send_request("GET", "/feed?i=" + std::to_string(i));
  EXPECT_TRUE(server.wait_for_metric("sluice_held_requests", held)) << i;
  return c;
}

// 6 at once against 2/s with delay 2s (nginx rate=2r/s burst=4): five
// reach the upstream 500 ms apart in the order they came, the sixth is
// answered 429 at once (it arrives before the first turn has passed).
TEST(Queueing, RequestsAheadOfTheRateAreHeldAndServedInTurn) {
  TestUpstream upstream;
  auto server = SluiceProcess::start(queue_yaml(upstream.url(), "2/s", "2s"));
  ASSERT_NE(server, nullptr);
  std::vector<std::unique_ptr<HttpConnection>> clients;
  Clock::time_point first_sent;
  for (int i = 0; i < 6; ++i) {
    clients.push_back(server->connect());
    if (i == 0) first_sent = Clock::now();
    clients.back()->send_request("GET", "/feed?i=" + std::to_string(i));
    // Each is decided before the next is sent: the arrival order is known.
    if (i == 0) {
      ASSERT_TRUE(server->wait_for_metric(
          R"(sluice_requests_total{route="GET /feed",result="allowed"})", 1));
    } else if (i < 5) {
      ASSERT_TRUE(server->wait_for_metric("sluice_held_requests_total", i)) << i;
    }
  }
  std::vector<int> statuses;
  for (auto& c : clients) statuses.push_back(c->read_response(std::chrono::seconds(10)).status);
  EXPECT_EQ(statuses, (std::vector<int>{200, 200, 200, 200, 200, 429}));
  const std::vector<std::string> heads = upstream.request_heads();
  const std::vector<Clock::time_point> times = upstream.request_times();
  ASSERT_EQ(heads.size(), 5u);
  // Turns count from the first request's decision, which came after it was
  // sent: never early; late by the scheduling of a loaded machine only.
  for (int k = 0; k < 5; ++k) {
    EXPECT_EQ(request_number(heads[static_cast<size_t>(k)]), k);
    const long long at = ms_between(first_sent, times[static_cast<size_t>(k)]);
    EXPECT_GE(at, 500 * k) << k;
    EXPECT_LE(at, 500 * k + 150) << k;
  }
  EXPECT_EQ(server->metric("sluice_held_requests_total"), 4);
  EXPECT_EQ(server->metric("sluice_held_requests"), 0);
  EXPECT_EQ(server->metric("sluice_held_requests_gave_up_total"), 0);
  EXPECT_EQ(server->metric(R"(sluice_requests_total{route="GET /feed",result="allowed"})"), 5);
  EXPECT_EQ(server->metric(R"(sluice_requests_total{route="GET /feed",result="denied"})"), 1);
}

// 1/s, delay 5s: A goes at once, B is due at +1 s, C at +2 s. B's client
// closes: B never reaches the upstream and D, arriving next, takes the turn
// at +2 s that B freed (without the refund it would be +3 s).
TEST(Queueing, AClientThatLeavesWhileHeldFreesItsTurnAndIsNotProxied) {
  TestUpstream upstream;
  auto server = SluiceProcess::start(queue_yaml(upstream.url(), "1/s", "5s"));
  ASSERT_NE(server, nullptr);
  auto a = server->connect();
  const Clock::time_point a_sent = Clock::now();
  ASSERT_EQ(a->request("GET", "/feed?i=0").status, 200);
  auto b = send_held(*server, 1, 1);
  auto c = send_held(*server, 2, 2);
  b.reset();  // closes the connection
  ASSERT_TRUE(server->wait_for_metric("sluice_held_requests_gave_up_total", 1));
  EXPECT_EQ(server->metric("sluice_held_requests"), 1);
  auto d = server->connect();
  d->send_request("GET", "/feed?i=3");
  EXPECT_EQ(c->read_response(std::chrono::seconds(10)).status, 200);
  EXPECT_EQ(d->read_response(std::chrono::seconds(10)).status, 200);
  const std::vector<std::string> heads = upstream.request_heads();
  const std::vector<Clock::time_point> times = upstream.request_times();
  ASSERT_EQ(heads.size(), 3u);
  std::vector<int> numbers;
  for (const std::string& h : heads) numbers.push_back(request_number(h));
  std::sort(numbers.begin() + 1, numbers.end());  // C and D share a turn
  EXPECT_EQ(numbers, (std::vector<int>{0, 2, 3}));
  for (size_t k = 1; k < 3; ++k) {
    const long long at = ms_between(a_sent, times[k]);
    EXPECT_GE(at, 2000) << k;
    EXPECT_LE(at, 2000 + 150) << k;
  }
  EXPECT_EQ(server->metric("sluice_held_requests_total"), 3);
  EXPECT_EQ(server->metric("sluice_held_requests"), 0);
}

// server.max_held bounds the requests held at once, over every route and
// key; unset, it is a quarter of max_connections (8 here: 2 places). 1/s,
// delay 5s: A goes at once, B and C take the two places; D, whose turn
// (+3 s) is within the delay, finds no place and is answered at once with
// the route's 429 and its headers, as a request no delay could admit; it
// is never proxied. Once B and C have had their turns the places are free:
// E is held again.
TEST(Queueing, PastMaxHeldARequestIsAnsweredAtOnceWithTheDenial) {
  TestUpstream upstream;
  auto server =
      SluiceProcess::start(queue_yaml(upstream.url(), "1/s", "5s", "  max_connections: 8\n"));
  ASSERT_NE(server, nullptr);
  auto a = server->connect();
  ASSERT_EQ(a->request("GET", "/feed?i=0").status, 200);
  auto b = send_held(*server, 1, 1);
  auto c = send_held(*server, 2, 2);
  auto d = server->connect();
  d->send_request("GET", "/feed?i=3");
  const HttpResponse refused = d->read_response(std::chrono::seconds(10));
  EXPECT_EQ(refused.status, 429);
  EXPECT_EQ(refused.header("Content-Type"), "application/json");
  EXPECT_EQ(
      refused.body,
      R"({"error":{"code":"RATE_LIMITED","message":"Too many requests. Please retry after the Retry-After period.","limit":"GET /feed"}})");
  EXPECT_EQ(refused.header("X-RateLimit-Limit"), "1");
  EXPECT_EQ(refused.header("X-RateLimit-Remaining"), "0");
  // When the queue ahead (B, C) has drained and a token is back: 3 s after
  // A, less the time D took to arrive.
  const int retry_after = std::atoi(refused.header("Retry-After").value_or("0").c_str());
  EXPECT_GE(retry_after, 1);
  EXPECT_LE(retry_after, 3);
  EXPECT_EQ(server->metric("sluice_held_requests_refused_total"), 1);
  EXPECT_TRUE(server->wait_for_log(
      "route \"GET /feed\": server.max_held (2) requests are held; one its delay would hold was "
      "answered at once"))
      << server->log();
  EXPECT_EQ(b->read_response(std::chrono::seconds(10)).status, 200);
  EXPECT_EQ(c->read_response(std::chrono::seconds(10)).status, 200);
  ASSERT_TRUE(server->wait_for_metric("sluice_held_requests", 0));
  auto e = send_held(*server, 4, 1);
  EXPECT_EQ(e->read_response(std::chrono::seconds(10)).status, 200);
  std::vector<int> numbers;
  for (const std::string& h : upstream.request_heads()) numbers.push_back(request_number(h));
  EXPECT_EQ(numbers, (std::vector<int>{0, 1, 2, 4}));
  EXPECT_EQ(server->metric("sluice_held_requests_total"), 3);
  EXPECT_EQ(server->metric("sluice_held_requests_refused_total"), 1);
  EXPECT_EQ(server->metric(R"(sluice_requests_total{route="GET /feed",result="allowed"})"), 4);
  EXPECT_EQ(server->metric(R"(sluice_requests_total{route="GET /feed",result="denied"})"), 1);
}

// SIGTERM while a request is held: it keeps its turn (within
// shutdown_grace), is answered with Connection: close, and the server exits 0.
TEST(Queueing, SigtermLetsAHeldRequestHaveItsTurnThenExitsZero) {
  TestUpstream upstream;
  auto server = SluiceProcess::start(queue_yaml(upstream.url(), "2/s", "2s"));
  ASSERT_NE(server, nullptr);
  auto a = server->connect();
  const Clock::time_point a_sent = Clock::now();
  ASSERT_EQ(a->request("GET", "/feed?i=0").status, 200);
  auto b = send_held(*server, 1, 1);
  server->send_signal(SIGTERM);
  ASSERT_TRUE(server->wait_for_log("draining"));
  const HttpResponse r = b->read_response(std::chrono::seconds(10));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("Connection"), "close");
  EXPECT_EQ(server->wait_exit(std::chrono::seconds(10)), 0);
  ASSERT_EQ(upstream.request_heads().size(), 2u);
  const std::vector<Clock::time_point> times = upstream.request_times();
  EXPECT_GE(ms_between(a_sent, times[1]), 500);
}

}  // namespace
}  // namespace sluice::test
