// Graceful shutdown: SIGTERM stops accepting, lets the requests in flight
// finish, closes idle connections, and the process exits 0; past
// shutdown_grace, or on a second signal, what is left is cut.
#include <chrono>
#include <csignal>
#include <memory>
#include <optional>
#include <string>

#include "test_support.h"

namespace sluice::test {
namespace {

// A server whose drain lasts at most `grace`.
std::unique_ptr<SluiceProcess> start_with_grace(const std::string& grace) {
  return SluiceProcess::start("server:\n  shutdown_grace: " + grace +
                              "\npolicies:\n  login: {capacity: 5, refill_rate: 1/h}\n");
}

// The exit code of `server`, which must exit within `bound`: -1, with a test
// failure saying why, if it does not.
int exit_code_within(SluiceProcess& server, std::chrono::seconds bound) {
  std::string how;
  const std::optional<int> code = server.wait_exit(bound, &how);
  EXPECT_TRUE(code.has_value()) << how << "\n" << server.log();
  return code.value_or(-1);
}

TEST(Shutdown, SigtermDrainsARequestInFlightAndExitsZero) {
  auto server = start_with_grace("20s");
  ASSERT_NE(server, nullptr);

  // A slow upload: the header (with Expect: 100-continue) goes first; the
  // server's "100 Continue" proves the request is in flight before SIGTERM.
  auto slow = server->connect();
  const std::string body = R"({"policy":"login","key":"drain"})";
  slow->send_raw(
      "POST /v1/check HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
      "Content-Length: " +
      std::to_string(body.size()) + "\r\n\r\n");
  ASSERT_EQ(slow->read_response().status, 100);
  slow->send_raw(body.substr(0, 10));

  // An idle keep-alive connection: it has nothing in flight and is closed.
  auto idle = server->connect();
  ASSERT_EQ(idle->request("GET", "/anything").status, 200);

  server->send_signal(SIGTERM);
  ASSERT_TRUE(server->wait_for_log("no longer accepting"));
  EXPECT_TRUE(idle->closed_by_peer());
  // No new connections once draining.
  EXPECT_FALSE(HttpConnection::can_connect("127.0.0.1", server->port()));

  // The rest of the body arrives after SIGTERM: the request still completes,
  // and the response says the connection closes.
  slow->send_raw(body.substr(10));
  const HttpResponse r = slow->read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find(R"("allowed":true)"), std::string::npos) << r.body;
  EXPECT_EQ(r.header("Connection"), "close");
  EXPECT_TRUE(slow->closed_by_peer());

  EXPECT_EQ(exit_code_within(*server, std::chrono::seconds(30)), 0) << server->log();
  EXPECT_NE(server->log().find("all connections drained"), std::string::npos) << server->log();
}

TEST(Shutdown, SigintWithNothingInFlightExitsZeroAtOnce) {
  auto server = start_with_grace("60s");
  ASSERT_NE(server, nullptr);
  server->send_signal(SIGINT);
  // At once: nothing to drain, so the exit comes long before the 60 s grace
  // could run out. The 20 s bound leaves a loaded machine and the sanitizers'
  // exit (the leak check) their time.
  EXPECT_EQ(exit_code_within(*server, std::chrono::seconds(20)), 0) << server->log();
  const std::string log = server->log();
  EXPECT_NE(log.find("SIGINT: no longer accepting"), std::string::npos) << log;
  EXPECT_NE(log.find("all connections drained"), std::string::npos) << log;
  EXPECT_EQ(log.find("shutdown grace over"), std::string::npos) << log;
}

// A request whose body never comes: "100 Continue" shows it is in flight.
std::unique_ptr<HttpConnection> stuck_request(const SluiceProcess& server) {
  auto stuck = server.connect();
  stuck->send_raw(
      "POST /v1/check HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
      "Content-Length: 100\r\n\r\n");
  EXPECT_EQ(stuck->read_response().status, 100);
  return stuck;
}

TEST(Shutdown, GraceOverCutsTheStuckConnectionAndExitsZero) {
  auto server = start_with_grace("500ms");
  ASSERT_NE(server, nullptr);
  auto stuck = stuck_request(*server);
  const auto signalled = std::chrono::steady_clock::now();
  server->send_signal(SIGTERM);
  // The body never comes; when the grace is over the server closes the one
  // connection left, its request unanswered, and exits anyway.
  ASSERT_TRUE(server->wait_for_log("shutdown grace over: closing 1 connection(s) still open"))
      << server->log();
  EXPECT_GE(std::chrono::steady_clock::now() - signalled, std::chrono::milliseconds(500));
  EXPECT_EQ(stuck->read_response().status, 0);  // closed with no answer
  EXPECT_TRUE(stuck->closed_by_peer());
  EXPECT_EQ(exit_code_within(*server, std::chrono::seconds(30)), 0) << server->log();
  EXPECT_EQ(server->log().find("all connections drained"), std::string::npos) << server->log();
}

TEST(Shutdown, SecondSigtermDuringTheDrainStopsAtOnce) {
  auto server = start_with_grace("60s");
  ASSERT_NE(server, nullptr);
  // The stuck request keeps the drain going for the whole 60 s grace.
  auto stuck = stuck_request(*server);
  server->send_signal(SIGTERM);
  ASSERT_TRUE(server->wait_for_log("SIGTERM: no longer accepting"));
  server->send_signal(SIGTERM);
  // At once: long before the grace is over (the bound is for a loaded machine),
  // and not with 0: a supervisor must be able to tell a cut drain from a full one.
  EXPECT_EQ(exit_code_within(*server, std::chrono::seconds(20)), 128 + SIGTERM) << server->log();
  const std::string log = server->log();
  EXPECT_NE(log.find("second SIGTERM: stopping now"), std::string::npos) << log;
  EXPECT_NE(log.find("stopped before the drain finished (exit code 143)"), std::string::npos)
      << log;
  EXPECT_EQ(log.find("shutdown grace over"), std::string::npos) << log;
  EXPECT_EQ(log.find("all connections drained"), std::string::npos) << log;
  // The request in flight was cut, unanswered.
  EXPECT_EQ(stuck->read_response().status, 0);
  EXPECT_TRUE(stuck->closed_by_peer());
}

}  // namespace
}  // namespace sluice::test
