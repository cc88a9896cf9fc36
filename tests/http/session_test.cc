// A Session with the FrontDoor in decision-only mode, fed whole byte streams
// through a socketpair (session_pipe.h, as fuzz/http_session.cc feeds it):
// the exact bytes it answers.
#include "http/session.h"

#include <chrono>
#include <string>

#include <gtest/gtest.h>

#include "http/context.h"
#include "http/front_door.h"
#include "http/state.h"
#include "policy/config_loader.h"
#include "session_pipe.h"
#include "sluice/memory_store.h"

namespace sluice::http {
namespace {

class SessionTest : public ::testing::Test {
 protected:
  SessionTest() : clock_(Nanos{std::chrono::seconds(1'700'000'000)}), context_(store_, clock_) {
    policy::LoadResult loaded = policy::load_config_string(
        "listen: 127.0.0.1:0\nheaders: none\ndefault: {limits: [{capacity: 1, refill_rate: "
        "1/h}]}\n",
        "t.yaml");
    EXPECT_TRUE(loaded.config.has_value());
    testing::register_session_metrics(context_);
    context_.state.store(
        build_state(std::move(*loaded.config), 1, context_.registry, context_.decision_sinks));
  }

  // What the session writes back to `input`. Bounded: a session still open
  // after 10 s fails.
  std::string exchange(std::string_view input) {
    FrontDoor door(context_, FrontDoor::Port::kListen, nullptr);
    testing::Exchange e = testing::exchange(context_, door, input, std::chrono::seconds(10));
    EXPECT_TRUE(e.closed) << "the session did not close";
    return e.out;
  }

  MemoryStore store_;
  ManualClock clock_;
  ServerContext context_;
};

TEST_F(SessionTest, AnsweredRequestsAreWrittenInOrder) {
  EXPECT_EQ(exchange("GET /a HTTP/1.1\r\nHost: x\r\n\r\nHEAD /a HTTP/1.1\r\nHost: x\r\n\r\n"),
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 16\r\n\r\n"
            "{\"allowed\":true}"
            "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\n"
            // The body (not sent for HEAD) names the default route's limit:
            // the seed's 107 bytes and ,"limit":"default".
            "Retry-After: 3600\r\nContent-Length: 125\r\n\r\n");
}

// A protocol error answered to HEAD has the error's headers and no content
// (RFC 9110 9.3.2): a client reads no body after a HEAD response, so one
// would be read as the next response. Found by fuzz/http_session.cc.
TEST_F(SessionTest, AProtocolErrorAnsweredToHeadHasNoContent) {
  EXPECT_EQ(exchange("HEAD /a HTTP/1.1\r\n\r\n"),
            "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nConnection: close\r\n"
            "Content-Length: 84\r\n\r\n");
}

TEST_F(SessionTest, AProtocolErrorAnsweredToGetHasItsBody) {
  EXPECT_EQ(
      exchange("GET /a HTTP/1.1\r\n\r\n"),
      "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nConnection: close\r\n"
      "Content-Length: 84\r\n\r\n"
      R"({"error":{"code":"BAD_REQUEST","message":"an HTTP/1.1 request needs a Host header"}})");
}

}  // namespace
}  // namespace sluice::http
