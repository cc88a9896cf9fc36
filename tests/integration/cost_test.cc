// A route's `cost:` through the real `sluice serve` (docs/COSTS.md): the
// estimate charged before proxying, the figure read from a header, a
// trailer, a JSON body or an event stream as it passes, the difference
// settled after the response; debts that later requests wait for; and every
// way a response can fail to report (the estimate stands, counted).
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "gateway_support.h"
#include "scripted_upstream.h"
#include "test_support.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

const std::string kRoute = "POST /v1/chat/completions";
const std::string kSettled = R"(sluice_cost_settled_total{route="POST /v1/chat/completions"})";
const std::string kUnreported =
    R"(sluice_cost_unreported_total{route="POST /v1/chat/completions"})";

// One route with `cost` and one bucket of `capacity` that refills a token a
// day (nothing, within a test).
std::string cost_yaml(const std::string& upstream, const std::string& cost, int capacity,
                      const std::string& refill = "1/d") {
  return "upstream: " + upstream + "\nheaders: [legacy]\nroutes:\n  - match: " + kRoute +
         "\n    cost: " + cost + "\n    limits: [{capacity: " + std::to_string(capacity) +
         ", refill_rate: " + refill + "}]\n";
}

HttpResponse chat(const SluiceProcess& server) {
  return server.post("/v1/chat/completions", R"({"model":"m","messages":[]})",
                     {{"Content-Type", "application/json"}});
}

std::string remaining(const HttpResponse& r) {
  return r.header("X-RateLimit-Remaining").value_or("none");
}

// A raw connection to the gateway, for responses the test client does not
// parse (chunked): sends one request, then reads what arrives.
class RawClient {
 public:
  explicit RawClient(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a = loopback_address(port);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~RawClient() { ::close(fd_); }
  bool connected() const { return connected_; }
  void send(const std::string& bytes) { ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL); }
  // Reads until what has arrived contains `text`, for at most 10 s.
  bool read_until(const std::string& text) {
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (received_.find(text) == std::string::npos) {
      if (std::chrono::steady_clock::now() >= until) return false;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      char chunk[4096];
      const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
      if (n <= 0) return false;
      received_.append(chunk, static_cast<size_t>(n));
    }
    return true;
  }
  const std::string& received() const { return received_; }

 private:
  int fd_ = -1;
  bool connected_ = false;
  std::string received_;
};

const std::string kChatRequest =
    "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    "Content-Length: 2\r\n\r\n{}";

std::string chunk(const std::string& data) {
  char size[16];
  std::snprintf(size, sizeof size, "%zx", data.size());
  return std::string(size) + "\r\n" + data + "\r\n";
}

TEST(Cost, TheHeaderFigureSettlesTheDifferenceBothWays) {
  ScriptedUpstream upstream;
  ASSERT_NE(upstream.port(), 0);
  auto server = SluiceProcess::start(
      cost_yaml(upstream.url(), "{header: x-usage-total-tokens, estimate: 100}", 1000));
  ASSERT_NE(server, nullptr);
  // 1000 - 100 admitted; the response says 250: 150 more, 750 left.
  upstream.answer_body("X-Usage-Total-Tokens: 250\r\n", "ok");
  HttpResponse r = chat(*server);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "ok");
  EXPECT_EQ(r.header("X-Usage-Total-Tokens"), "250");
  EXPECT_EQ(remaining(r), "900");
  // 750 - 100; it says 20: 80 back, 730.
  upstream.answer_body("X-Usage-Total-Tokens: 20\r\n", "ok");
  EXPECT_EQ(remaining(chat(*server)), "650");
  // 730 - 100; a negative figure is no figure: the estimate stands, 630.
  upstream.answer_body("X-Usage-Total-Tokens: -5\r\n", "ok");
  EXPECT_EQ(remaining(chat(*server)), "630");
  // Exactly the estimate: nothing to settle.
  upstream.answer_body("X-Usage-Total-Tokens: 100\r\n", "ok");
  EXPECT_EQ(remaining(chat(*server)), "530");
  EXPECT_EQ(remaining(chat(*server)), "430");
  EXPECT_EQ(server->metric(kSettled), 4);
  EXPECT_EQ(server->metric(kUnreported), 1);
}

TEST(Cost, ADebtMakesTheNextRequestWaitForItAndItsEstimate) {
  ScriptedUpstream upstream;
  ASSERT_NE(upstream.port(), 0);
  auto server = SluiceProcess::start(
      cost_yaml(upstream.url(), "{header: x-usage, estimate: 50}", 100, "100/m"));
  ASSERT_NE(server, nullptr);
  upstream.answer_body("x-usage: 300\r\n", "ok");
  EXPECT_EQ(remaining(chat(*server)), "50");
  // 100 - 300: 200 in debt. The next needs 200 + 50 at 100 a minute: 150 s.
  const HttpResponse denied = chat(*server);
  EXPECT_EQ(denied.status, 429);
  EXPECT_EQ(denied.header("Retry-After"), "150");
  EXPECT_EQ(remaining(denied), "0");
  EXPECT_EQ(upstream.requests(), 1);
}

TEST(Cost, AJsonBodyFieldIsTheFigureAndTheBodyPassesAsSent) {
  ScriptedUpstream upstream;
  ASSERT_NE(upstream.port(), 0);
  auto server = SluiceProcess::start(
      cost_yaml(upstream.url(), "{json: usage.total_tokens, estimate: 500}", 10000));
  ASSERT_NE(server, nullptr);
  const std::string body =
      R"({"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":)"
      R"({"role":"assistant","content":"Hi"},"finish_reason":"stop"}],"usage":)"
      R"({"prompt_tokens":12,"completion_tokens":722,"total_tokens":734}})";
  upstream.answer_body("Content-Type: application/json\r\n", body);
  const HttpResponse r = chat(*server);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, body);
  EXPECT_EQ(remaining(r), "9500");
  // 10000 - 734 - 500.
  EXPECT_EQ(remaining(chat(*server)), "8766");
  EXPECT_EQ(server->metric(kSettled), 2);
  EXPECT_EQ(server->metric(kUnreported), 0);
}

TEST(Cost, AMalformedJsonBodyIsForwardedUntouchedAndTheEstimateStands) {
  ScriptedUpstream upstream;
  ASSERT_NE(upstream.port(), 0);
  auto server = SluiceProcess::start(
      cost_yaml(upstream.url(), "{json: usage.total_tokens, estimate: 500}", 10000));
  ASSERT_NE(server, nullptr);
  const std::string body = R"({"usage":{"total_tokens":1})";  // one brace short
  upstream.answer_body("Content-Type: application/json\r\n", body);
  const HttpResponse r = chat(*server);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, body);
  EXPECT_EQ(remaining(chat(*server)), "9000");
  EXPECT_EQ(server->metric(kUnreported), 2);
  EXPECT_EQ(server->metric(kSettled), 0);
}

TEST(Cost, AResponseCutShortLeavesTheEstimateCounted) {
  ScriptedUpstream upstream;
  ASSERT_NE(upstream.port(), 0);
  auto server = SluiceProcess::start(
      cost_yaml(upstream.url(), "{json: usage.total_tokens, estimate: 500}", 10000));
  ASSERT_NE(server, nullptr);
  upstream.answer({"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                   "1000\r\n\r\n{\"usage\":{\"total_tokens\":1}}"},
                  true);
  (void)chat(*server);
  ASSERT_TRUE(server->wait_for_metric(kUnreported, 1)) << server->metric(kUnreported);
  upstream.answer_body("Content-Type: application/json\r\n", R"({"usage":{"total_tokens":500}})");
  // Nothing was given back: 10000 - 500 - 500.
  EXPECT_EQ(remaining(chat(*server)), "9000");
  EXPECT_EQ(server->metric(kSettled), 1);
}

TEST(Cost, AnEventStreamReachesTheClientAsItComesAndItsLastUsageEventSettles) {
  ScriptedUpstream upstream;
  ASSERT_NE(upstream.port(), 0);
  auto server = SluiceProcess::start(
      cost_yaml(upstream.url(), "{json: usage.total_tokens, estimate: 500}", 10000));
  ASSERT_NE(server, nullptr);
  const std::string first =
      R"(data: {"choices":[{"index":0,"delta":{"content":"Hello"}}],"usage":null})"
      "\n\n";
  const std::string last =
      R"(data: {"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}})"
      "\n\n";
  upstream.answer(
      {"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: "
       "chunked\r\n\r\n" +
           chunk(first),
       chunk(last) + chunk("data: [DONE]\n\n") + "0\r\n\r\n"});
  upstream.hold_between_pieces();
  RawClient client(server->port());
  ASSERT_TRUE(client.connected());
  client.send(kChatRequest);
  // The first event arrives while the upstream still holds the last.
  ASSERT_TRUE(client.read_until("\"Hello\"")) << client.received();
  EXPECT_EQ(client.received().find("total_tokens"), std::string::npos);
  EXPECT_EQ(server->metric(kSettled), 0);
  upstream.release();
  ASSERT_TRUE(client.read_until("data: [DONE]\n\n\r\n0\r\n\r\n")) << client.received();
  EXPECT_NE(client.received().find("\"total_tokens\":11"), std::string::npos);
  EXPECT_EQ(server->metric(kSettled), 1);
  // 500 admitted, 11 used: 489 back; the next sees 10000 - 11 - 500.
  upstream.answer_body("x: y\r\n", "");
  EXPECT_EQ(remaining(chat(*server)), "9489");
}

TEST(Cost, ATrailerCarriesTheFigure) {
  ScriptedUpstream upstream;
  ASSERT_NE(upstream.port(), 0);
  auto server =
      SluiceProcess::start(cost_yaml(upstream.url(), "{header: x-usage, estimate: 10}", 1000));
  ASSERT_NE(server, nullptr);
  upstream.answer({"HTTP/1.1 200 OK\r\nTrailer: x-usage\r\nTransfer-Encoding: chunked\r\n\r\n" +
                   chunk("hello") + "0\r\nx-usage: 42\r\n\r\n"});
  RawClient client(server->port());
  ASSERT_TRUE(client.connected());
  client.send(kChatRequest);
  ASSERT_TRUE(client.read_until("0\r\n\r\n")) << client.received();
  EXPECT_EQ(server->metric(kSettled), 1);
  upstream.answer_body("", "ok");
  // 1000 - 42 - 10.
  EXPECT_EQ(remaining(chat(*server)), "948");
}

}  // namespace
}  // namespace sluice::test
