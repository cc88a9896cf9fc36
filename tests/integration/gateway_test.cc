// The gateway proxy (src/http/proxy.h) through the real sluice binary, in front
// of the real demo upstream (examples/demo-upstream) or of a TestUpstream
// when the test needs to count, inspect or misbehave.
#include <csignal>
#include <iterator>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "gateway_support.h"
#include "test_support.h"

namespace sluice::test {
namespace {

using Clock = std::chrono::steady_clock;

// The config of a gateway to `upstream_url` (one worker thread); `extra` is
// appended (routes, server...), `more_upstream` to the `upstream` mapping.
std::string gateway_yaml(const std::string& upstream_url, const std::string& extra,
                         const std::string& timeout = "5s",
                         const std::string& connect_timeout = "1s",
                         const std::string& more_upstream = "") {
  return "upstream:\n  url: " + upstream_url + "\n  timeout: " + timeout +
         "\n  connect_timeout: " + connect_timeout + "\n" + more_upstream +
         "server:\n  threads: 1\n  shutdown_grace: 20s\n" + extra;
}

const std::string kHelloRoute = R"(
headers: [legacy, draft]
routes:
  - match: GET /api/hello
    limits: [{capacity: 3, refill_rate: 1/h}]
)";

std::string demo_body(const std::string& method, const std::string& path,
                      const std::string& forwarded_for = "127.0.0.1") {
  return R"({"upstream":"demo","method":")" + method + R"(","path":")" + path +
         R"(","x_forwarded_for":")" + forwarded_for + "\"}\n";
}

// Deterministic bytes of every value, so that a corrupted relay shows.
std::string pattern_bytes(size_t n) {
  std::string s(n, '\0');
  uint32_t x = 2463534242u;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    s[i] = static_cast<char>(x & 0xff);
  }
  return s;
}

bool contains_ci(std::string haystack, std::string needle) {
  for (char& c : haystack) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (char& c : needle) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return haystack.find(needle) != std::string::npos;
}

long long elapsed_ms(Clock::time_point since) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - since).count();
}

TEST(Gateway, AllowedRequestsGetTheUpstreamsAnswerWithTheRateHeaders) {
  DemoUpstream demo(SLUICE_BINARY);
  ASSERT_NE(demo.port(), 0);
  auto server = SluiceProcess::start(gateway_yaml(demo.url(), kHelloRoute));
  ASSERT_NE(server, nullptr);
  auto c = server->connect();
  for (int i = 0; i < 3; ++i) {
    const HttpResponse r = c->request("GET", "/api/hello");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.body, demo_body("GET", "/api/hello"));
    EXPECT_EQ(r.header("Server"), "sluice-demo-upstream");
    EXPECT_EQ(r.header("Content-Type"), "application/json");
    EXPECT_EQ(r.header("X-RateLimit-Limit"), "3");
    EXPECT_EQ(r.header("X-RateLimit-Remaining"), std::to_string(2 - i));
    EXPECT_TRUE(r.has_header("X-RateLimit-Reset"));
    EXPECT_TRUE(r.has_header("RateLimit-Policy"));
    EXPECT_TRUE(r.has_header("RateLimit"));
    EXPECT_FALSE(r.has_header("Retry-After"));
    EXPECT_FALSE(r.has_header("Connection"));  // HTTP/1.1 keep-alive needs none
  }
  const HttpResponse denied = c->request("GET", "/api/hello");
  EXPECT_EQ(denied.status, 429);
  EXPECT_EQ(denied.body, rate_limited_body("GET /api/hello"));
  EXPECT_EQ(denied.header("Retry-After"), "3600");
  EXPECT_EQ(denied.header("X-RateLimit-Remaining"), "0");
  EXPECT_FALSE(denied.has_header("Server"));  // Sluice's own answer, not the upstream's
}

TEST(Gateway, DeniedRequestsNeverReachTheUpstream) {
  TestUpstream upstream;
  ASSERT_NE(upstream.port(), 0);
  auto server = SluiceProcess::start(gateway_yaml(upstream.url(), kHelloRoute));
  ASSERT_NE(server, nullptr);
  auto c = server->connect();
  for (int i = 1; i <= 10; ++i) {
    const HttpResponse r = c->request("GET", "/api/hello");
    if (i <= 3) {
      EXPECT_EQ(r.status, 200);
      EXPECT_EQ(r.body, "{\"n\":" + std::to_string(i) + "}");
    } else {
      EXPECT_EQ(r.status, 429);
      EXPECT_EQ(r.body, rate_limited_body("GET /api/hello"));
    }
  }
  EXPECT_EQ(upstream.requests(), 3);
}

// shadow: a new limit tried on live traffic: decided, counted and logged as
// a denial would be, with the real headers, and proxied anyway.
TEST(Gateway, AShadowRouteCountsItsDenialsAndProxiesThem) {
  TestUpstream upstream;
  ASSERT_NE(upstream.port(), 0);
  auto server = SluiceProcess::start(gateway_yaml(upstream.url(), R"(
headers: [legacy]
logging: {access_log: true}
routes:
  - match: GET /api/search
    shadow: true
    limits: [{capacity: 2, refill_rate: 1/h}]
)"));
  ASSERT_NE(server, nullptr);
  auto c = server->connect();
  for (int i = 1; i <= 4; ++i) {
    const HttpResponse r = c->request("GET", "/api/search");
    EXPECT_EQ(r.status, 200) << i;
    EXPECT_EQ(r.body, "{\"n\":" + std::to_string(i) + "}");
    EXPECT_EQ(r.header("X-RateLimit-Limit"), "2");
    EXPECT_EQ(r.header("X-RateLimit-Remaining"), i <= 2 ? std::to_string(2 - i) : "0");
    // The real decision's headers: Retry-After says when it would pass.
    if (i <= 2) {
      EXPECT_FALSE(r.has_header("Retry-After")) << i;
    } else {
      EXPECT_EQ(r.header("Retry-After"), "3600") << i;
    }
  }
  EXPECT_EQ(upstream.requests(), 4);
  // Denials are not charged: the bucket is still empty after the first two.
  EXPECT_EQ(server->metric(R"(sluice_requests_total{route="GET /api/search",result="allowed"})"),
            2);
  EXPECT_EQ(
      server->metric(R"(sluice_requests_total{route="GET /api/search",result="shadow_denied"})"),
      2);
  EXPECT_EQ(server->metric(R"(sluice_requests_total{route="GET /api/search",result="denied"})"), 0);
  EXPECT_TRUE(server->wait_for_log(
      "shadow: route \"GET /api/search\" would deny key \"ip:127.0.0.1\" (limit \"GET "
      "/api/search\"); let through"))
      << server->log();
  const std::string shadowed =
      "key=ip:127.0.0.1 decision=shadow_denied limit=\"GET /api/search\" status=200";
  const std::string log = server->wait_for_access_log({shadowed});
  EXPECT_NE(log.find(shadowed), std::string::npos) << log;
}

// access: an allowed client is never limited (but counted), a denied one gets
// 403 before any limit; both read the address through trusted proxies.
TEST(Gateway, AccessListsAllowAndDenyClientsBeforeAnyLimit) {
  TestUpstream upstream;
  ASSERT_NE(upstream.port(), 0);
  auto server = SluiceProcess::start(gateway_yaml(upstream.url(), R"(
headers: [legacy]
client_ip: {trusted_proxies: [127.0.0.1/32]}
access:
  allow: [198.51.100.0/24]
  deny: [203.0.113.0/24, "2001:db8::/32"]
routes:
  - match: GET /api/search
    limits: [{capacity: 1, refill_rate: 1/h}]
)"));
  ASSERT_NE(server, nullptr);
  auto from = [](const std::string& client) {
    return std::vector<std::pair<std::string, std::string>>{{"X-Forwarded-For", client}};
  };
  for (int i = 0; i < 3; ++i) {
    const HttpResponse r = server->get("/api/search", from("198.51.100.7"));
    EXPECT_EQ(r.status, 200) << i;
    EXPECT_FALSE(r.has_header("X-RateLimit-Limit")) << "an allowed client is not limited";
  }
  for (const char* denied : {"203.0.113.9", "2001:db8::1"}) {
    const HttpResponse r = server->get("/api/search", from(denied));
    EXPECT_EQ(r.status, 403) << denied;
    EXPECT_EQ(r.body,
              R"({"error":{"code":"ACCESS_DENIED","message":"this client address is in the )"
              R"(server's deny list"}})")
        << denied;
    EXPECT_EQ(server->get("/elsewhere", from(denied)).status, 403) << "on any path";
  }
  // Anyone else is limited as usual.
  EXPECT_EQ(server->get("/api/search", from("192.0.2.1")).status, 200);
  EXPECT_EQ(server->get("/api/search", from("192.0.2.1")).status, 429);
  EXPECT_EQ(upstream.requests(), 4);
  EXPECT_EQ(server->metric(R"(sluice_requests_total{route="GET /api/search",result="allowed"})"),
            4);
  EXPECT_EQ(server->metric(R"(sluice_http_rejected_total{reason="access_denied"})"), 4);
}

// deny: what the gateway answers instead of the built-in 429 (nginx's
// limit_req_status), with the same rate headers and Retry-After.
TEST(Gateway, DenyStatusAndBodyFileReplaceThe429AndItsBody) {
  TestUpstream upstream;
  ASSERT_NE(upstream.port(), 0);
  const std::string page = "<h1>Slow down</h1>\n";
  auto server = SluiceProcess::start(
      gateway_yaml(upstream.url(), kHelloRoute +
                                       "deny: {status: 503, body_file: slow.html, content_type: "
                                       "text/html; charset=utf-8}\n"),
      "127.0.0.1", {{"slow.html", page}});
  ASSERT_NE(server, nullptr);
  auto c = server->connect();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(c->request("GET", "/api/hello").status, 200);
  const HttpResponse denied = c->request("GET", "/api/hello");
  EXPECT_EQ(denied.status, 503);
  EXPECT_EQ(denied.body, page);
  EXPECT_EQ(denied.header("Content-Type"), "text/html; charset=utf-8");
  EXPECT_EQ(denied.header("Content-Length"), std::to_string(page.size()));
  EXPECT_EQ(denied.header("Retry-After"), "3600");
  EXPECT_EQ(denied.header("X-RateLimit-Remaining"), "0");
  EXPECT_EQ(upstream.requests(), 3);
}

// The access log of a proxied request says how long the upstream took to
// answer; a denied one has no upstream time.
TEST(Gateway, TheAccessLogHasTheUpstreamTimeOfProxiedRequests) {
  TestUpstream upstream;
  ASSERT_NE(upstream.port(), 0);
  auto server = SluiceProcess::start(
      gateway_yaml(upstream.url(), kHelloRoute + "logging: {access_log: true}\n"));
  ASSERT_NE(server, nullptr);
  auto c = server->connect();
  for (int i = 0; i < 4; ++i) c->request("GET", "/api/hello");
  const std::regex proxied(
      R"( client=127\.0\.0\.1 peer=127\.0\.0\.1 method=GET path=/api/hello route="GET /api/hello" )"
      R"(key=ip:127\.0\.0\.1 decision=allowed limit=- status=200 bytes=7 upstream_ms=\d+\.\d{3} )"
      R"(ms=\d+\.\d{3}\n)");
  const std::string denied =
      " client=127.0.0.1 peer=127.0.0.1 method=GET path=/api/hello route=\"GET /api/hello\" "
      "key=ip:127.0.0.1 "
      "decision=denied limit=\"GET /api/hello\" status=429 bytes=132 upstream_ms=- ms=";
  // Lines are written once their responses are sent: wait for the fourth.
  const std::string log = server->wait_for_access_log({denied});
  EXPECT_NE(log.find(denied), std::string::npos) << log;
  const auto proxied_lines =
      std::distance(std::sregex_iterator(log.begin(), log.end(), proxied), std::sregex_iterator());
  EXPECT_EQ(proxied_lines, 3) << log;
}

TEST(Gateway, XForwardedForGetsThePeerAppended) {
  DemoUpstream demo(SLUICE_BINARY);
  ASSERT_NE(demo.port(), 0);
  auto server = SluiceProcess::start(gateway_yaml(demo.url(), ""));
  ASSERT_NE(server, nullptr);
  auto c = server->connect();
  EXPECT_EQ(c->request("GET", "/a").body, demo_body("GET", "/a", "127.0.0.1"));
  EXPECT_EQ(c->request("GET", "/a", {{"X-Forwarded-For", "203.0.113.7"}}).body,
            demo_body("GET", "/a", "203.0.113.7, 127.0.0.1"));
  EXPECT_EQ(c->request("GET", "/a", {{"X-Forwarded-For", "198.51.100.1, 203.0.113.7"}}).body,
            demo_body("GET", "/a", "198.51.100.1, 203.0.113.7, 127.0.0.1"));
}

TEST(Gateway, HopByHopFieldsStopAtTheGatewayBothWaysAndTheBasePathIsPrefixed) {
  TestUpstream upstream(TestUpstream::Mode::kHopByHop);
  ASSERT_NE(upstream.port(), 0);
  auto server = SluiceProcess::start(gateway_yaml(upstream.url() + "/base", ""));
  ASSERT_NE(server, nullptr);
  auto c = server->connect();
  const HttpResponse r = c->request("GET", "/api/x?q=1",
                                    {{"Host", "example.test"},
                                     {"Connection", "keep-alive, X-Client-Private"},
                                     {"X-Client-Private", "secret"},
                                     {"Keep-Alive", "timeout=5"},
                                     {"TE", "trailers"},
                                     {"Proxy-Authorization", "Basic dXNlcjpwYXNz"},
                                     {"Proxy-Connection", "keep-alive"},
                                     {"X-Client-Public", "yes"},
                                     // Not a trusted proxy: cannot claim these.
                                     {"X-Forwarded-Proto", "https"},
                                     {"X-Forwarded-Host", "bank.test"}});
  ASSERT_EQ(r.status, 200) << r.body;

  ASSERT_EQ(upstream.request_heads().size(), 1u);
  const std::string head = upstream.request_heads()[0];
  EXPECT_EQ(head.substr(0, head.find("\r\n")), "GET /base/api/x?q=1 HTTP/1.1");
  EXPECT_TRUE(contains_ci(head, "\r\nHost: example.test")) << head;
  EXPECT_TRUE(contains_ci(head, "\r\nX-Client-Public: yes")) << head;
  EXPECT_TRUE(contains_ci(head, "\r\nX-Forwarded-For: 127.0.0.1")) << head;
  EXPECT_TRUE(contains_ci(head, "\r\nX-Forwarded-Proto: http\r\n")) << head;
  EXPECT_TRUE(contains_ci(head, "\r\nX-Forwarded-Host: example.test")) << head;
  for (const char* gone : {"\r\nConnection:", "X-Client-Private", "\r\nKeep-Alive:", "\r\nTE:",
                           "Proxy-Authorization", "Proxy-Connection", "https", "bank.test"}) {
    EXPECT_FALSE(contains_ci(head, gone)) << gone << " reached the upstream:\n" << head;
  }

  EXPECT_EQ(r.header("X-Upstream-Public"), "yes");
  for (const char* gone : {"Connection", "Keep-Alive", "X-Upstream-Private", "Proxy-Authenticate",
                           "Trailer", "Upgrade"}) {
    EXPECT_FALSE(r.has_header(gone)) << gone << " reached the client";
  }
  // The connection is still good for another request.
  EXPECT_EQ(c->request("GET", "/again").status, 200);
}

TEST(Gateway, LargePostBodiesStreamThroughBothWays) {
  DemoUpstream demo(SLUICE_BINARY);
  ASSERT_NE(demo.port(), 0);
  auto server = SluiceProcess::start(gateway_yaml(demo.url(), ""));
  ASSERT_NE(server, nullptr);
  const std::string body = pattern_bytes(5 * 1000 * 1000);
  auto c = server->connect();

  // Content-Length upload.
  // (Generous read timeouts: the sanitizers make moving megabytes slow.)
  const auto kSlow = std::chrono::seconds(60);
  c->send_request("POST", "/upload?echo=1", {}, body);
  const HttpResponse r = c->read_response(kSlow);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.header("Content-Length"), std::to_string(body.size()));
  EXPECT_TRUE(r.body == body) << "echoed body differs (" << r.body.size() << " bytes)";

  // Chunked upload, in uneven chunks, on the same connection.
  std::string chunked =
      "POST /upload?echo=1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  const size_t sizes[] = {1, 70000, 1 << 20, 3 * 1000 * 1000};
  size_t at = 0;
  std::string sent;
  for (size_t size : sizes) {
    char line[32];
    std::snprintf(line, sizeof line, "%zx\r\n", size);
    chunked += line + body.substr(at, size) + "\r\n";
    sent += body.substr(at, size);
    at += size;
  }
  chunked += "0\r\n\r\n";
  c->send_raw(chunked);
  const HttpResponse echoed = c->read_response(kSlow);
  ASSERT_EQ(echoed.status, 200);
  EXPECT_TRUE(echoed.body == sent) << "echoed body differs (" << echoed.body.size() << " bytes)";

  // Expect: 100-continue: the gateway invites the body, then relays it.
  const std::string small = body.substr(0, 100000);
  c->send_raw(
      "POST /upload?echo=1 HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: " +
      std::to_string(small.size()) + "\r\n\r\n");
  EXPECT_EQ(c->read_response().status, 100);
  c->send_raw(small);
  const HttpResponse continued = c->read_response(kSlow);
  EXPECT_EQ(continued.status, 200);
  EXPECT_TRUE(continued.body == small);
}

TEST(Gateway, ChunkedResponsesAreRelayedChunkedOrUntilCloseForHttp10) {
  TestUpstream upstream(TestUpstream::Mode::kChunked);
  ASSERT_NE(upstream.port(), 0);
  auto server = SluiceProcess::start(gateway_yaml(upstream.url(), ""));
  ASSERT_NE(server, nullptr);

  const std::string r11 =
      raw_exchange(server->port(), "GET /c HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  const size_t end = r11.find("\r\n\r\n");
  ASSERT_NE(end, std::string::npos) << r11;
  EXPECT_EQ(r11.substr(0, 15), "HTTP/1.1 200 OK");
  EXPECT_TRUE(contains_ci(r11.substr(0, end), "Transfer-Encoding: chunked")) << r11;
  bool complete = false;
  EXPECT_EQ(dechunk(r11.substr(end + 4), &complete), "hello world");
  EXPECT_TRUE(complete);

  const std::string r10 = raw_exchange(server->port(), "GET /c HTTP/1.0\r\n\r\n");
  const size_t end10 = r10.find("\r\n\r\n");
  ASSERT_NE(end10, std::string::npos) << r10;
  EXPECT_EQ(r10.substr(0, 15), "HTTP/1.0 200 OK");
  EXPECT_FALSE(contains_ci(r10.substr(0, end10), "Transfer-Encoding")) << r10;
  EXPECT_EQ(r10.substr(end10 + 4), "hello world");  // delimited by the close
}

TEST(Gateway, UpstreamDownGives502AtOnceAndTheConnectionStaysUsable) {
  RefusingPort nobody;  // nothing listens there
  ASSERT_NE(nobody.port(), 0);
  auto server = SluiceProcess::start(gateway_yaml(nobody.url(), kHelloRoute, "30s", "10s"));
  ASSERT_NE(server, nullptr);
  auto c = server->connect();
  const auto start = Clock::now();
  const HttpResponse r = c->request("GET", "/api/hello");
  // At once: refused, not given up after connect_timeout (10 s). The bound
  // leaves a loaded machine its margin.
  EXPECT_LT(elapsed_ms(start), 5000);
  EXPECT_EQ(r.status, 502);
  EXPECT_EQ(r.header("Content-Type"), "application/json");
  EXPECT_EQ(
      r.body,
      R"({"error":{"code":"UPSTREAM_UNAVAILABLE","message":"the upstream cannot be reached: Connection refused"}})");
  EXPECT_EQ(r.header("X-RateLimit-Remaining"), "2");  // the decision was made and is reported
  EXPECT_EQ(c->request("GET", "/other").status, 502);
  EXPECT_TRUE(server->wait_for_log("UPSTREAM_UNAVAILABLE"));
}

TEST(Gateway, UpstreamThatDiesIsNoticedOnThePooledConnections) {
  auto demo = std::make_unique<DemoUpstream>(SLUICE_BINARY);
  ASSERT_NE(demo->port(), 0);
  auto server = SluiceProcess::start(gateway_yaml(demo->url(), "", "30s", "10s"));
  ASSERT_NE(server, nullptr);
  auto c = server->connect();
  ASSERT_EQ(c->request("GET", "/a").status, 200);  // leaves a pooled connection
  demo.reset();                                    // the upstream goes away
  const auto start = Clock::now();
  const HttpResponse r = c->request("GET", "/a");
  // At once: the pooled connection is seen closed and a new one refused, not
  // given up after connect_timeout (10 s). The bound leaves a loaded machine
  // its margin.
  EXPECT_LT(elapsed_ms(start), 5000);
  EXPECT_EQ(r.status, 502);
  EXPECT_EQ(
      r.body,
      R"({"error":{"code":"UPSTREAM_UNAVAILABLE","message":"the upstream cannot be reached: Connection refused"}})");
}

TEST(Gateway, UpstreamSlowerThanTheTimeoutGives504) {
  DemoUpstream demo(SLUICE_BINARY);
  ASSERT_NE(demo.port(), 0);
  auto server = SluiceProcess::start(gateway_yaml(demo.url(), kHelloRoute, "300ms"));
  ASSERT_NE(server, nullptr);
  auto c = server->connect();
  const auto start = Clock::now();
  const HttpResponse r = c->request("GET", "/api/hello?delay_ms=30000");
  const long long took = elapsed_ms(start);
  EXPECT_EQ(r.status, 504);
  EXPECT_EQ(
      r.body,
      R"({"error":{"code":"UPSTREAM_TIMEOUT","message":"the upstream did not answer within 300 ms"}})");
  EXPECT_EQ(r.header("X-RateLimit-Remaining"), "2");
  // At the timeout, not when the upstream answers (30 s); the upper bound
  // leaves a loaded machine its margin.
  EXPECT_GE(took, 300);
  EXPECT_LT(took, 10000);
  // A fast request right after works (the timed-out connection was not pooled).
  const HttpResponse fast = c->request("GET", "/api/hello");
  EXPECT_EQ(fast.status, 200);
  EXPECT_EQ(fast.body, demo_body("GET", "/api/hello"));
}

TEST(Gateway, OneUpstreamConnectionServesManyRequestsAndClients) {
  TestUpstream upstream;
  ASSERT_NE(upstream.port(), 0);
  auto server = SluiceProcess::start(gateway_yaml(upstream.url(), ""));  // one worker
  ASSERT_NE(server, nullptr);
  auto c = server->connect();
  for (int i = 1; i <= 200; ++i) {
    const HttpResponse r = c->request("GET", "/k");
    ASSERT_EQ(r.status, 200);
    ASSERT_EQ(r.body, "{\"n\":" + std::to_string(i) + "}");
  }
  for (int i = 0; i < 20; ++i) EXPECT_EQ(server->get("/fresh-client").status, 200);
  EXPECT_EQ(upstream.requests(), 220);
  EXPECT_EQ(upstream.connections(), 1);
}

TEST(Gateway, PooledConnectionsTheUpstreamClosedWhileIdleAreNotUsed) {
  // The upstream closes every connection right after its response, without
  // saying so: the gateway pools it and must notice the close when reusing it.
  TestUpstream upstream(TestUpstream::Mode::kCloseWhenIdle);
  ASSERT_NE(upstream.port(), 0);
  auto server = SluiceProcess::start(gateway_yaml(upstream.url(), ""));
  ASSERT_NE(server, nullptr);
  auto c = server->connect();
  // POSTs are never sent twice, so each must go to a live connection: before
  // the next request, the upstream has closed the pooled connection and the
  // gateway's side of it has the FIN (it is in CLOSE_WAIT, no longer
  // ESTABLISHED), so the pool's peek sees the close.
  for (int i = 1; i <= 10; ++i) {
    const HttpResponse r = c->request("POST", "/idle-closed");
    ASSERT_EQ(r.status, 200) << "request " << i << ": " << r.body;
    const bool close_arrived =
        wait_until([&] { return upstream.closed() == i && established_to(upstream.port()) == 0; });
    ASSERT_TRUE(close_arrived) << "request " << i << ": closed " << upstream.closed();
  }
  // Without that wait, a close may race with the request; a GET is then sent
  // again on a new connection, so every GET succeeds too.
  for (int i = 1; i <= 10; ++i) {
    const HttpResponse r = c->request("GET", "/idle-closed");
    ASSERT_EQ(r.status, 200) << "request " << i << ": " << r.body;
  }
  EXPECT_EQ(upstream.requests(), 20);  // each reached the upstream exactly once
  EXPECT_EQ(upstream.connections(), 20);
}

TEST(Gateway, APooledConnectionTheUpstreamClosedWhileIdleIsDroppedWhenTaken) {
  TestUpstream upstream;
  ASSERT_NE(upstream.port(), 0);
  auto server = SluiceProcess::start(gateway_yaml(upstream.url(), ""));  // one worker
  ASSERT_NE(server, nullptr);
  auto c = server->connect();
  ASSERT_EQ(c->request("GET", "/first").status, 200);  // its connection is pooled
  ASSERT_TRUE(wait_until([&] { return established_to(upstream.port()) == 1; }));
  upstream.close_idle_connections();
  // The close reached the gateway's side, which nobody watches while idle:
  // that socket stays in CLOSE_WAIT until it is taken.
  ASSERT_TRUE(wait_until(
      [&] { return upstream.closed() == 1 && connections_to(upstream.port(), "08") == 1; }));
  // Taking it, the pool's peek sees the close: the GET goes on a new
  // connection, once, and the closed one is gone.
  const HttpResponse r = c->request("GET", "/second");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "{\"n\":2}");
  EXPECT_EQ(upstream.requests(), 2);
  EXPECT_EQ(upstream.connections(), 2);
  EXPECT_EQ(connections_to(upstream.port(), "08"), 0);
}

TEST(Gateway, OnlyIdempotentRequestsAreRetriedAfterAReusedConnectionDies) {
  // The upstream reads the second request of every connection and closes it
  // without an answer: to the gateway this is the race of a keep-alive
  // connection closed just as it is reused.
  TestUpstream upstream(TestUpstream::Mode::kCloseOnSecondRequest);
  ASSERT_NE(upstream.port(), 0);
  auto server = SluiceProcess::start(gateway_yaml(upstream.url(), ""));
  ASSERT_NE(server, nullptr);
  auto c = server->connect();
  // 1st on connection A: answered; A is pooled.
  EXPECT_EQ(c->request("GET", "/1").status, 200);
  // 2nd on A: read by the upstream, then closed. A POST may have been applied,
  // so it is not sent again: 502.
  const HttpResponse post = c->request("POST", "/2");
  EXPECT_EQ(post.status, 502);
  EXPECT_NE(post.body.find("closed the connection before responding"), std::string::npos)
      << post.body;
  // 1st on connection B: answered; B is pooled.
  EXPECT_EQ(c->request("GET", "/3").status, 200);
  // 2nd on B: lost the same way, but a GET is idempotent: sent again on C.
  const HttpResponse get = c->request("GET", "/4");
  EXPECT_EQ(get.status, 200);
  EXPECT_EQ(get.body, "{\"n\":5}");
  EXPECT_EQ(upstream.requests(), 5);  // the POST reached it once, the GET twice
  EXPECT_EQ(upstream.connections(), 3);
}

TEST(Gateway, MalformedOrTruncatedUpstreamResponses) {
  {
    TestUpstream upstream(TestUpstream::Mode::kGarbage);
    auto server = SluiceProcess::start(gateway_yaml(upstream.url(), ""));
    ASSERT_NE(server, nullptr);
    const HttpResponse r = server->get("/g");
    EXPECT_EQ(r.status, 502);
    EXPECT_NE(r.body.find("malformed response"), std::string::npos) << r.body;
  }
  {
    // The status is already with the client when the body stops short: the
    // client connection is cut, so the client sees 10 of 1000 bytes and a close.
    TestUpstream upstream(TestUpstream::Mode::kTruncated);
    auto server = SluiceProcess::start(gateway_yaml(upstream.url(), ""));
    ASSERT_NE(server, nullptr);
    const std::string r = raw_exchange(server->port(), "GET /t HTTP/1.1\r\nHost: x\r\n\r\n");
    const size_t end = r.find("\r\n\r\n");
    ASSERT_NE(end, std::string::npos) << r;
    EXPECT_EQ(r.substr(0, 15), "HTTP/1.1 200 OK");
    EXPECT_TRUE(contains_ci(r.substr(0, end), "Content-Length: 1000"));
    EXPECT_EQ(r.substr(end + 4), "0123456789");
  }
}

TEST(Gateway, HeadAndHttp10Requests) {
  DemoUpstream demo(SLUICE_BINARY);
  ASSERT_NE(demo.port(), 0);
  auto server = SluiceProcess::start(gateway_yaml(demo.url(), ""));
  ASSERT_NE(server, nullptr);
  // HEAD: the upstream's Content-Length, no body, and the connection stays
  // open: a GET sent right behind it on the same connection is answered
  // next, its status line straight after the HEAD's header block.
  const std::string both =
      raw_exchange(server->port(),
                   "HEAD /h HTTP/1.1\r\nHost: x\r\n\r\n"
                   "GET /after HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  const size_t end = both.find("\r\n\r\n");
  ASSERT_NE(end, std::string::npos) << both;
  const std::string head = both.substr(0, end + 4);
  EXPECT_EQ(head.substr(0, 15), "HTTP/1.1 200 OK");
  EXPECT_TRUE(
      contains_ci(head, "Content-Length: " + std::to_string(demo_body("HEAD", "/h").size())))
      << head;
  const std::string after = both.substr(end + 4);
  EXPECT_EQ(after.substr(0, 15), "HTTP/1.1 200 OK") << both;  // no body bytes before it
  EXPECT_EQ(after.substr(after.find("\r\n\r\n") + 4), demo_body("GET", "/after")) << both;
  // HTTP/1.0 without keep-alive: answered, then closed.
  const std::string r10 = raw_exchange(server->port(), "GET /old HTTP/1.0\r\n\r\n");
  EXPECT_EQ(r10.substr(0, 15), "HTTP/1.0 200 OK");
  EXPECT_EQ(r10.substr(r10.find("\r\n\r\n") + 4), demo_body("GET", "/old"));
}

TEST(Gateway, SigtermLetsASlowProxiedRequestFinishThenExitsZero) {
  // The upstream holds its answer until the test releases it: the request
  // is in flight at the upstream for the whole start of the drain.
  TestUpstream upstream;
  ASSERT_NE(upstream.port(), 0);
  upstream.hold();
  auto server = SluiceProcess::start(gateway_yaml(upstream.url(), R"(
routes:
  - match: GET /slow
    limits: [{capacity: 10, refill_rate: 1/h}]
)"));
  ASSERT_NE(server, nullptr);
  auto slow = server->connect();
  slow->send_request("GET", "/slow");
  // Decided, and handed to the upstream, before SIGTERM.
  ASSERT_TRUE(wait_until([&] { return upstream.requests() == 1; }));
  EXPECT_EQ(server->metric(R"(sluice_requests_total{route="GET /slow",result="allowed"})"), 1);

  server->send_signal(SIGTERM);
  ASSERT_TRUE(server->wait_for_log("no longer accepting"));
  EXPECT_FALSE(HttpConnection::can_connect("127.0.0.1", server->port()));
  upstream.release();
  const HttpResponse r = slow->read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "{\"n\":1}");
  EXPECT_EQ(r.header("Connection"), "close");
  EXPECT_TRUE(slow->closed_by_peer());

  std::string how;
  const std::optional<int> code = server->wait_exit(std::chrono::seconds(30), &how);
  ASSERT_TRUE(code.has_value()) << how << "\n" << server->log();
  EXPECT_EQ(*code, 0) << server->log();
  EXPECT_NE(server->log().find("all connections drained"), std::string::npos) << server->log();
}

TEST(Gateway, UpstreamThatNeverCompletesTheConnectGives502AtTheConnectTimeout) {
  UnansweredPort nowhere;  // SYNs dropped: the connect neither fails nor completes
  ASSERT_NE(nowhere.port(), 0);
  auto server = SluiceProcess::start(gateway_yaml(nowhere.url(), kHelloRoute, "30s", "300ms"));
  ASSERT_NE(server, nullptr);
  auto c = server->connect();
  const auto start = Clock::now();
  const HttpResponse r = c->request("GET", "/api/hello");
  const long long took = elapsed_ms(start);
  EXPECT_EQ(r.status, 502);
  EXPECT_EQ(r.header("Content-Type"), "application/json");
  EXPECT_EQ(
      r.body,
      R"({"error":{"code":"UPSTREAM_UNAVAILABLE","message":"the upstream could not be reached within 300 ms"}})");
  EXPECT_EQ(r.header("X-RateLimit-Remaining"), "2");
  // It waited for connect_timeout (300 ms), and not for upstream.timeout
  // (30 s); the upper bound is loose for a loaded machine.
  EXPECT_GE(took, 300);
  EXPECT_LT(took, 10000);
  // The connection stays usable: the next request is answered the same way.
  EXPECT_EQ(c->request("GET", "/api/hello").status, 502);
}

TEST(Gateway, ThePoolKeepsAtMostMaxIdleConnectionsPerWorker) {
  TestUpstream upstream;
  ASSERT_NE(upstream.port(), 0);
  auto server = SluiceProcess::start(
      gateway_yaml(upstream.url(), "", "5s", "1s", "  max_idle_connections: 2\n"));
  ASSERT_NE(server, nullptr);  // one worker: one pool

  // Four requests at once, each held at the upstream: four upstream
  // connections busy together. Then all four are answered.
  const auto four_at_once = [&] {
    const int before = upstream.requests();
    upstream.hold();
    std::vector<std::unique_ptr<HttpConnection>> clients;
    for (int i = 0; i < 4; ++i) {
      clients.push_back(server->connect());
      clients.back()->send_request("GET", "/k");
    }
    EXPECT_TRUE(wait_until([&] { return upstream.requests() == before + 4; }))
        << upstream.requests();
    upstream.release();
    for (auto& client : clients) EXPECT_EQ(client->read_response().status, 200);
  };

  four_at_once();
  EXPECT_EQ(upstream.connections(), 4);
  // Back in the pool, the two oldest beyond max_idle_connections are closed.
  EXPECT_TRUE(wait_until([&] { return upstream.closed() == 2; })) << upstream.closed();

  // The two kept are reused: four at once again take them and open two more.
  four_at_once();
  EXPECT_EQ(upstream.connections(), 6);
  EXPECT_TRUE(wait_until([&] { return upstream.closed() == 4; })) << upstream.closed();
  EXPECT_EQ(upstream.requests(), 8);
}

}  // namespace
}  // namespace sluice::test
