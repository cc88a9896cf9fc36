// Requests built to slip past the limits or to desync the gateway from its
// upstream: encoded separators in the path, header blocks larger than
// max_header_bytes in any number of pieces, Transfer-Encoding tricks, Host
// games, CONNECT, spoofed client-address fields, silent connections and
// connection floods. Each is refused before anything reaches the upstream.
#include <chrono>
#include <fstream>
#include <thread>

#include "gateway_support.h"
#include "test_support.h"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// The seed's login route (2 attempts per hour here) behind a gateway.
std::string gateway_yaml(const TestUpstream& upstream, const std::string& server = "") {
  return "upstream: " + upstream.url() + R"(
headers: [legacy]
default:
  limits: [{capacity: 100, refill_rate: 1/h}]
routes:
  - match: POST /api/auth/login
    limits: [{capacity: 2, refill_rate: 1/h}]
server:
  max_header_bytes: 2KiB
)" + server;
}

void expect_json_error(const HttpResponse& r, int status, const std::string& code) {
  EXPECT_EQ(r.status, status) << r.body;
  EXPECT_EQ(r.header("Content-Type"), "application/json");
  EXPECT_NE(r.body.find("\"code\":\"" + code + "\""), std::string::npos) << r.body;
}

// ---------------------------------------------------------------- paths

// Flask, nginx and others decode %2F into '/' before routing, so
// /api/auth%2Flogin reaches their login handler; here it would match no
// route and be charged to the default one. Refused, never forwarded.
TEST(RequestHardening, EncodedSlashesAndBackslashesInThePathGet400BadPath) {
  TestUpstream upstream;
  auto server = SluiceProcess::start(gateway_yaml(upstream));
  ASSERT_NE(server, nullptr);
  for (const std::string target :
       {"/api/auth%2Flogin", "/api/auth%2flogin", "/api/auth%5Clogin", "/api/auth%5clogin",
        "/api/auth\\login", "/api%2Fauth/login?next=/"}) {
    const HttpResponse r = server->post(target, "user=a&password=b");
    expect_json_error(r, 400, "BAD_PATH");
    EXPECT_FALSE(r.has_header("X-RateLimit-Remaining")) << target;
  }
  EXPECT_EQ(upstream.requests(), 0);
  EXPECT_EQ(server->metric(R"(sluice_http_rejected_total{reason="bad_request"})"), 6);
  // The plain spelling is limited as configured: 2 logins, then 429.
  EXPECT_EQ(count_allowed(*server, "POST", "/api/auth/login", 5, {}, "user=a&password=b"), 2);
  EXPECT_EQ(upstream.requests(), 2);
  // An escaped slash in the query is not part of the path.
  EXPECT_EQ(server->get("/api/search?q=a%2Fb").status, 200);
}

// ---------------------------------------------------------------- header size

// Beast counts only the unparsed bytes of a header against its limit; the
// session counts the whole block, however it arrives.
TEST(RequestHardening, AHeaderBlockAboveTheLimitGets431InOneWriteOrInManySmallOnes) {
  TestUpstream upstream;
  auto server = SluiceProcess::start(gateway_yaml(upstream));
  ASSERT_NE(server, nullptr);

  std::string many_fields = "GET /api/items HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 400; ++i) many_fields += "X-F" + std::to_string(i) + ": v\r\n";  // ~4 KiB
  many_fields += "\r\n";
  const std::string whole = raw_exchange(server->port(), many_fields);
  EXPECT_EQ(whole.rfind("HTTP/1.1 431 ", 0), 0u) << whole.substr(0, 200);

  auto c = server->connect();
  c->send_raw("GET /api/items HTTP/1.1\r\nHost: x\r\n");
  for (int i = 0; i < 400; ++i) c->send_raw("X-F" + std::to_string(i) + ": v\r\n");
  c->send_raw("\r\n");
  const HttpResponse split = c->read_response();
  expect_json_error(split, 431, "HEADER_TOO_LARGE");
  EXPECT_TRUE(c->closed_by_peer());

  EXPECT_EQ(upstream.requests(), 0);
  EXPECT_EQ(server->metric(R"(sluice_http_rejected_total{reason="header_too_large"})"), 2);
  // A header just under the limit still passes.
  std::vector<std::pair<std::string, std::string>> fields;
  for (int i = 0; i < 100; ++i) fields.emplace_back("X-F" + std::to_string(i), "v");
  EXPECT_EQ(server->get("/api/items", fields).status, 200);
}

long rss_kib(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

// 40 connections each sending 300 KB of small fields used to take the
// server from 22 MB to 434 MB; each is now cut off at the limit.
TEST(RequestHardening, FortyConnectionsOfHugeHeadersKeepMemoryFlat) {
  TestUpstream upstream;
  auto server = SluiceProcess::start(gateway_yaml(upstream));
  ASSERT_NE(server, nullptr);
  std::string huge = "GET /api/items HTTP/1.1\r\nHost: x\r\n";
  while (huge.size() < 300'000) huge += "X-A: b\r\n";
  const long before = rss_kib(server->pid());
  std::vector<std::thread> clients;
  std::atomic<int> refused{0};
  for (int i = 0; i < 40; ++i) {
    clients.emplace_back([&] {
      const std::string answer = raw_exchange(server->port(), huge + "\r\n");
      if (answer.rfind("HTTP/1.1 431 ", 0) == 0) refused.fetch_add(1);
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(refused.load(), 40);
  EXPECT_EQ(upstream.requests(), 0);
  // Generous for an ASan build (its allocator keeps freed memory quarantined);
  // the old behaviour grew by hundreds of MB.
  EXPECT_LT(rss_kib(server->pid()) - before, 64 * 1024);
}

// ---------------------------------------------------------------- framing

TEST(RequestHardening, ATransferEncodingWhoseFinalCodingIsNotChunkedGets400AndCloses) {
  TestUpstream upstream;
  auto server = SluiceProcess::start(gateway_yaml(upstream));
  ASSERT_NE(server, nullptr);
  for (const std::string te : {"chunked, identity", "xchunked", "chunked, chunked", "gzip"}) {
    auto c = server->connect();
    // Read as "no body" by a lax parser, the chunk would be the next request.
    c->send_raw("POST /api/items HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: " + te +
                "\r\n\r\n1d\r\nGET /api/smuggled HTTP/1.1\r\n\r\n\r\n0\r\n\r\n");
    const HttpResponse r = c->read_response();
    expect_json_error(r, 400, "BAD_REQUEST");
    EXPECT_EQ(r.header("Connection"), "close") << te;
    EXPECT_TRUE(c->closed_by_peer()) << te;
  }
  // Transfer-Encoding beside Content-Length, and on HTTP/1.0.
  auto both = server->connect();
  both->send_raw(
      "POST /api/items HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: "
      "chunked\r\n\r\n0\r\n\r\n");
  EXPECT_EQ(both->read_response().status, 400);
  auto old = server->connect();
  old->send_raw(
      "POST /api/items HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n");
  EXPECT_EQ(old->read_response().status, 400);
  EXPECT_EQ(upstream.requests(), 0);
}

// A coding applied before chunked is the client's: the body is re-chunked
// but the upstream is told about the gzip, not handed it as plain bytes.
TEST(RequestHardening, ACodingBeforeChunkedIsForwarded) {
  TestUpstream upstream;
  auto server = SluiceProcess::start(gateway_yaml(upstream));
  ASSERT_NE(server, nullptr);
  auto c = server->connect();
  c->send_raw(
      "POST /api/items HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
      "5\r\nhello\r\n0\r\n\r\n");
  EXPECT_EQ(c->read_response().status, 200);
  const std::vector<std::string> heads = upstream.request_heads();
  ASSERT_EQ(heads.size(), 1u);
  EXPECT_NE(heads[0].find("\r\nTransfer-Encoding: gzip, chunked"), std::string::npos) << heads[0];
  // "identity" alone means no coding: the Content-Length frames the body.
  auto identity = server->connect();
  identity->send_raw(
      "POST /api/items HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity\r\nContent-Length: "
      "2\r\n\r\nok");
  EXPECT_EQ(identity->read_response().status, 200);
}

TEST(RequestHardening, TwoHostFieldsOrNoHostOnHttp11Get400ConnectGets405) {
  TestUpstream upstream;
  auto server = SluiceProcess::start(gateway_yaml(upstream));
  ASSERT_NE(server, nullptr);
  auto two = server->connect();
  two->send_raw("GET /api/items HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n\r\n");
  expect_json_error(two->read_response(), 400, "BAD_REQUEST");
  EXPECT_TRUE(two->closed_by_peer());

  auto none = server->connect();
  none->send_raw("GET /api/items HTTP/1.1\r\n\r\n");
  expect_json_error(none->read_response(), 400, "BAD_REQUEST");

  auto connect = server->connect();
  connect->send_raw("CONNECT host:22 HTTP/1.1\r\nHost: host:22\r\n\r\n");
  expect_json_error(connect->read_response(), 405, "METHOD_NOT_ALLOWED");
  EXPECT_TRUE(connect->closed_by_peer());
  EXPECT_EQ(upstream.requests(), 0);

  // HTTP/1.0 has no Host requirement: served, and the upstream gets one.
  auto old = server->connect();
  old->send_raw("GET /api/items HTTP/1.0\r\n\r\n");
  EXPECT_EQ(old->read_response().status, 200);
  ASSERT_EQ(upstream.requests(), 1);
  EXPECT_NE(upstream.request_heads()[0].find("\r\nHost: 127.0.0.1:"), std::string::npos);
}

// ---------------------------------------------------------------- methods

// Flask, Express, Django, Go and Rails run a GET handler for HEAD: a HEAD
// request is limited as the GET of its path and under the same key, so
// neither HEADs after the GET budget nor HEAD and GET in turn get past it.
TEST(RequestHardening, HeadIsLimitedAsTheGetOfItsPath) {
  TestUpstream upstream;
  auto server = SluiceProcess::start("upstream: " + upstream.url() + R"(
headers: [legacy]
default:
  limits: [{capacity: 100, refill_rate: 1/h}]
routes:
  - match: GET /api/items
    limits: [{capacity: 3, refill_rate: 1/h}]
  - match: GET /api/things/{id}
    limits: [{capacity: 3, refill_rate: 1/h}]
)");
  ASSERT_NE(server, nullptr);
  auto c = server->connect();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(c->request("GET", "/api/items").status, 200);
  EXPECT_EQ(c->request("GET", "/api/items").status, 429);
  for (int i = 0; i < 6; ++i) {
    const HttpResponse r = c->request("HEAD", "/api/items");
    EXPECT_EQ(r.status, 429) << i;
    EXPECT_EQ(r.header("X-RateLimit-Limit"), "3");
    EXPECT_EQ(r.header("X-RateLimit-Remaining"), "0");
    EXPECT_TRUE(r.has_header("Retry-After"));
  }
  EXPECT_EQ(upstream.requests(), 3);
  // In turn: one budget of 3 for both.
  const std::vector<std::pair<std::string, int>> turns = {
      {"HEAD", 200}, {"GET", 200}, {"HEAD", 200}, {"GET", 429}, {"HEAD", 429}};
  for (const auto& [method, status] : turns) {
    EXPECT_EQ(c->request(method, "/api/things/7").status, status) << method;
  }
  EXPECT_EQ(upstream.requests(), 6);
  EXPECT_EQ(server->metric(R"(sluice_requests_total{route="GET /api/items",result="denied"})"), 7);
}

// Methods are case-sensitive (RFC 9110 9.1): "post" is no POST. It would
// match no POST route while an upstream that folds case runs its POST
// handler. 400 (as nginx answers), before anything is decided or forwarded.
TEST(RequestHardening, AMethodThatIsNotAnUpperCaseTokenGets400) {
  TestUpstream upstream;
  auto server = SluiceProcess::start(gateway_yaml(upstream));
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(count_allowed(*server, "POST", "/api/auth/login", 3, {}, "user=a&password=b"), 2);
  for (const std::string method : {"post", "PoSt", "Post", "get"}) {
    auto c = server->connect();
    const HttpResponse r = c->request(method, "/api/auth/login", {}, "user=a&password=b");
    expect_json_error(r, 400, "BAD_REQUEST");
    EXPECT_NE(r.body.find("the method must be an upper-case token"), std::string::npos) << r.body;
    EXPECT_FALSE(r.has_header("X-RateLimit-Remaining"));
    EXPECT_TRUE(c->closed_by_peer()) << method;
  }
  EXPECT_EQ(upstream.requests(), 2);
  EXPECT_EQ(server->metric(R"(sluice_http_rejected_total{reason="bad_request"})"), 4);
  // Upper-case methods Beast does not know are methods like any other:
  // limited (by the default route here) and forwarded.
  auto c = server->connect();
  for (const std::string method : {"PURGE", "X-SYNC"}) {
    const HttpResponse r = c->request(method, "/api/items");
    EXPECT_EQ(r.status, 200) << method << " " << r.body;
    EXPECT_EQ(r.header("X-RateLimit-Limit"), "100");
  }
  ASSERT_EQ(upstream.requests(), 4);
  EXPECT_EQ(upstream.request_heads()[3].rfind("X-SYNC /api/items HTTP/1.1\r\n", 0), 0u);
}

// X-Forwarded-For is already appended to; X-Real-IP and Forwarded are read
// by upstreams as the truth, so a client that is not a trusted proxy cannot
// set them.
TEST(RequestHardening, SpoofedClientAddressFieldsAreReplacedWithTheResolvedClient) {
  TestUpstream upstream;
  auto server = SluiceProcess::start(gateway_yaml(upstream));
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server
                ->get("/api/items",
                      {{"X-Real-IP", "10.9.9.9"}, {"Forwarded", "for=10.9.9.9;proto=https"}})
                .status,
            200);
  const std::vector<std::string> heads = upstream.request_heads();
  ASSERT_EQ(heads.size(), 1u);
  EXPECT_NE(heads[0].find("\r\nX-Real-IP: 127.0.0.1\r\n"), std::string::npos) << heads[0];
  EXPECT_NE(heads[0].find("\r\nForwarded: for=127.0.0.1\r\n"), std::string::npos) << heads[0];
  EXPECT_EQ(heads[0].find("10.9.9.9"), std::string::npos) << heads[0];
}

// ---------------------------------------------------------------- connections

// idle_timeout is for keep-alive connections between requests; a new
// connection that never completes a header has header_timeout, from its
// accept, whether or not it sent a byte.
TEST(RequestHardening, ASilentNewConnectionIsClosedAfterHeaderTimeoutNotIdleTimeout) {
  TestUpstream upstream;
  auto server =
      SluiceProcess::start(gateway_yaml(upstream, "  header_timeout: 1s\n  idle_timeout: 1h\n"));
  ASSERT_NE(server, nullptr);
  auto silent = server->connect();
  auto one_byte = server->connect();
  one_byte->send_raw("G");
  // Far below the idle timeout (1 h), with room for a loaded ASan run.
  EXPECT_TRUE(silent->closed_by_peer(seconds(30)));
  const HttpResponse r = one_byte->read_response(seconds(30));
  EXPECT_EQ(r.status, 408);
  // A served keep-alive connection waits for its next request past header_timeout.
  auto kept = server->connect();
  EXPECT_EQ(kept->request("GET", "/api/items").status, 200);
  EXPECT_FALSE(kept->closed_by_peer(seconds(2)));
  EXPECT_EQ(kept->request("GET", "/api/items").status, 200);
}

TEST(RequestHardening, ConnectionsAboveMaxConnectionsAreRefusedWith503AndTheRestServed) {
  TestUpstream upstream;
  auto server = SluiceProcess::start(gateway_yaml(upstream,
                                                  "  max_connections: 4\n  header_timeout: 1h\n"
                                                  "  threads: 1\n"));
  ASSERT_NE(server, nullptr);
  std::vector<std::unique_ptr<HttpConnection>> held;
  for (int i = 0; i < 4; ++i) held.push_back(server->connect());
  // Accepted in order on one thread (one worker: with several, each accepts
  // on its own and the fifth could be taken before the fourth): the fifth
  // finds four open.
  const std::string refused = raw_exchange(server->port(), "");
  EXPECT_EQ(refused.rfind("HTTP/1.1 503 ", 0), 0u) << refused;
  EXPECT_NE(refused.find("\"code\":\"TOO_MANY_CONNECTIONS\""), std::string::npos) << refused;
  EXPECT_EQ(server->metric("sluice_connections_refused_total"), 1);
  EXPECT_TRUE(server->wait_for_log("listen: connection refused, 4 connections open"));
  // The four are served normally.
  for (auto& c : held) EXPECT_EQ(c->request("GET", "/api/items").status, 200);
  // The admin port answers beyond the limit (its own reserve).
  EXPECT_EQ(server->admin_get("/healthz").status, 200);
  // Once one closes, a new connection is served. (The scrape's own admin
  // connection is open while it is counted: 3 + 1; it is not one of the four.)
  held.pop_back();
  const auto deadline = std::chrono::steady_clock::now() + seconds(30);
  while (server->metric("sluice_open_connections") > 4 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_EQ(server->get("/api/items").status, 200);
}

}  // namespace
}  // namespace sluice::test
