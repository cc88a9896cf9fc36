// Concurrency limits through the real `sluice serve` (docs/CONFIG.md,
// docs/API.md): slots taken before proxying and given back exactly once
// however the exchange ends; /v1/check leases and /v1/release.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gateway_support.h"
#include "test_support.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

const std::string kHeld = R"(sluice_concurrency_slots_held{route="POST /api/reports"})";
const std::string kTaken = R"(sluice_concurrency_slots_taken_total{route="POST /api/reports"})";
const std::string kReleased =
    R"(sluice_concurrency_slots_released_total{route="POST /api/reports"})";

// A gateway with one worker whose reports route holds at most `max` in flight
// per client, with a lease long enough that a leaked slot would stay held
// for the whole test.
std::string reports_yaml(const std::string& upstream_url, int max, const std::string& extra = "") {
  return "upstream:\n  url: " + upstream_url +
         "\n  timeout: 10s\nserver:\n  threads: 2\nheaders: [legacy, draft]\nroutes:\n"
         "  - match: POST /api/reports\n"
         "    limits: [{algorithm: concurrency, max: " +
         std::to_string(max) + ", lease: 1h}]\n" + extra;
}

// Sends `n` requests at once, each on its own connection, while the upstream
// holds its answers; returns the connections with their requests sent.
std::vector<std::unique_ptr<HttpConnection>> send_at_once(const SluiceProcess& server, int n) {
  std::vector<std::unique_ptr<HttpConnection>> clients;
  for (int i = 0; i < n; ++i) {
    clients.push_back(server.connect());
    clients.back()->send_request("POST", "/api/reports");
  }
  return clients;
}

TEST(Concurrency, WithMaxFourTenSlowRequestsGiveFourProxiedAndSix429s) {
  TestUpstream upstream;
  ASSERT_NE(upstream.port(), 0);
  upstream.hold();
  auto server = SluiceProcess::start(reports_yaml(upstream.url(), 4));
  ASSERT_NE(server, nullptr);
  auto clients = send_at_once(*server, 10);
  // Six are denied while four wait at the upstream.
  const std::string denied_series =
      R"(sluice_requests_total{route="POST /api/reports",result="denied"})";
  ASSERT_TRUE(server->wait_for_metric(denied_series, 6)) << server->metric(denied_series);
  EXPECT_TRUE(wait_until([&] { return upstream.requests() == 4; })) << upstream.requests();
  int denied = 0;
  std::vector<size_t> waiting;
  for (size_t i = 0; i < clients.size(); ++i) {
    const HttpResponse r = clients[i]->read_response(300ms);
    if (r.status == 0) {
      waiting.push_back(i);
      continue;
    }
    ++denied;
    EXPECT_EQ(r.status, 429) << r.body;
    EXPECT_EQ(r.header("Retry-After"), "1");
    EXPECT_EQ(r.header("X-RateLimit-Limit"), "4");
    EXPECT_EQ(r.header("X-RateLimit-Remaining"), "0");
    EXPECT_EQ(r.header("RateLimit-Policy"), "\"POST /api/reports\";q=4;qu=\"concurrent-requests\"");
    EXPECT_EQ(r.header("RateLimit"), "\"POST /api/reports\";r=0;t=1");
    EXPECT_EQ(
        r.body,
        R"({"error":{"code":"RATE_LIMITED","message":"Too many requests. Please retry after the Retry-After period.","limit":"POST /api/reports"}})");
  }
  EXPECT_EQ(denied, 6);
  ASSERT_EQ(waiting.size(), 4u);
  EXPECT_EQ(server->metric(kHeld), 4);
  upstream.release();
  for (size_t i : waiting) {
    const HttpResponse r = clients[i]->read_response();
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.header("RateLimit-Policy"), "\"POST /api/reports\";q=4;qu=\"concurrent-requests\"");
  }
  EXPECT_EQ(upstream.requests(), 4);
  EXPECT_EQ(server->metric(kHeld), 0);
  EXPECT_EQ(server->metric(kTaken), 4);
  EXPECT_EQ(server->metric(kReleased), 4);
  // Every slot is free again: the next one sees all four.
  const HttpResponse next = server->post("/api/reports", "");
  EXPECT_EQ(next.status, 200);
  EXPECT_EQ(next.header("X-RateLimit-Remaining"), "3");
}

TEST(Concurrency, ASlotIsGivenBackWhenTheUpstreamFails) {
  // Nothing listens there: 502, and the slot comes back.
  RefusingPort refusing;
  auto server = SluiceProcess::start(reports_yaml(refusing.url(), 1));
  ASSERT_NE(server, nullptr);
  for (int i = 0; i < 3; ++i) {
    const HttpResponse r = server->post("/api/reports", "");
    EXPECT_EQ(r.status, 502) << r.body;
    EXPECT_EQ(r.header("X-RateLimit-Remaining"), "0");
  }
  EXPECT_EQ(server->metric(kTaken), 3);
  EXPECT_EQ(server->metric(kHeld), 0);
}

TEST(Concurrency, ASlotIsGivenBackWhenTheUpstreamTimesOut) {
  TestUpstream upstream;
  ASSERT_NE(upstream.port(), 0);
  upstream.hold();
  std::string yaml = reports_yaml(upstream.url(), 1);
  yaml.replace(yaml.find("timeout: 10s"), 12, "timeout: 200ms");
  auto server = SluiceProcess::start(yaml);
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->post("/api/reports", "").status, 504);
  EXPECT_EQ(server->metric(kHeld), 0);
  // The slot is free: this one reaches the (still holding) upstream too.
  EXPECT_EQ(server->post("/api/reports", "").status, 504);
  EXPECT_EQ(upstream.requests(), 2);
  upstream.release();
}

// Connects, sends a request, and ends in one of four ways picked by `how`:
// read the whole answer and close; reset (RST) before any answer; reset
// after part of the header; close (FIN) without reading. Returns the status
// when it read one, else 0.
int one_request(uint16_t port, int how) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a = loopback_address(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  const std::string req = "POST /api/reports HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n";
  (void)::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  int status = 0;
  const auto reset = [fd] {
    const linger l{1, 0};  // close() sends RST
    ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  };
  if (how == 0 || how == 2) {
    std::string got;
    char buf[4096];
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
      if (how == 2 && got.size() >= 5) break;  // part of the header only
      const size_t end = got.find("\r\n\r\n");
      if (end == std::string::npos) continue;
      const size_t cl = got.find("Content-Length: ");
      const size_t length = cl == std::string::npos ? 0 : std::stoul(got.substr(cl + 16));
      if (got.size() >= end + 4 + length) break;
    }
    if (how == 0 && got.size() > 12) status = std::stoi(got.substr(9, 3));
  }
  if (how == 1 || how == 2) reset();
  ::close(fd);
  return status;
}

TEST(Concurrency, NoSlotLeaksAfterTenThousandRequestsWithRandomDisconnects) {
  TestUpstream upstream;
  ASSERT_NE(upstream.port(), 0);
  auto server = SluiceProcess::start(reports_yaml(upstream.url(), 4));
  ASSERT_NE(server, nullptr);
  constexpr int kThreads = 8;
  constexpr int kPerThread = 1250;  // 10,000 in all
  std::atomic<int> ok{0}, limited{0}, failed_connects{0};
  std::vector<std::thread> threads;
  const auto deadline = std::chrono::steady_clock::now() + 90s;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(1234 + t));
      for (int i = 0; i < kPerThread && std::chrono::steady_clock::now() < deadline; ++i) {
        const int status = one_request(server->port(), static_cast<int>(rng() % 4));
        if (status == 200) ++ok;
        if (status == 429) ++limited;
        if (status < 0) ++failed_connects;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the load did not finish in time";
  EXPECT_EQ(failed_connects.load(), 0);
  EXPECT_GT(ok.load(), 0);
  // Every request was decided (allowed or denied) ...
  const std::string allowed =
      R"(sluice_requests_total{route="POST /api/reports",result="allowed"})";
  const std::string denied = R"(sluice_requests_total{route="POST /api/reports",result="denied"})";
  ASSERT_TRUE(
      wait_until([&] { return server->metric(allowed) + server->metric(denied) == 10'000; }, 30s))
      << server->metric(allowed) << " + " << server->metric(denied);
  // ... and each slot taken was given back once: none held, as many
  // releases as takes.
  EXPECT_TRUE(server->wait_for_metric(kHeld, 0, 30s)) << server->metric(kHeld);
  EXPECT_EQ(server->metric(kTaken), server->metric(allowed));
  EXPECT_EQ(server->metric(kReleased), server->metric(allowed));
  // And the store agrees: exactly four slots are free, no more, no fewer.
  upstream.hold();
  const long long denied_before = server->metric(denied);
  auto clients = send_at_once(*server, 5);
  EXPECT_TRUE(wait_until([&] { return server->metric(kHeld) == 4; })) << server->metric(kHeld);
  EXPECT_TRUE(server->wait_for_metric(denied, denied_before + 1));
  int denied_now = 0;
  for (auto& c : clients) {
    const HttpResponse r = c->read_response(300ms);
    if (r.status == 429) ++denied_now;
  }
  EXPECT_EQ(denied_now, 1);
  upstream.release();
}

TEST(Concurrency, CheckGivesALeaseAndReleaseGivesTheSlotBack) {
  auto server = SluiceProcess::start(R"(
headers: [legacy, draft]
policies:
  exports: {algorithm: concurrency, max: 1, lease: 1h}
)");
  ASSERT_NE(server, nullptr);
  const Headers json = {{"Content-Type", "application/json"}};
  const HttpResponse first = server->post("/v1/check", R"({"policy":"exports","key":"u1"})", json);
  ASSERT_EQ(first.status, 200) << first.body;
  const std::string prefix =
      R"({"allowed":true,"limit":1,"remaining":0,"reset_after_ms":3600000,"retry_after_ms":0,"lease":")";
  ASSERT_EQ(first.body.rfind(prefix, 0), 0u) << first.body;
  const std::string lease = first.body.substr(prefix.size(), first.body.size() - prefix.size() - 2);
  EXPECT_EQ(first.header("RateLimit"), "\"exports\";r=0");

  const HttpResponse second = server->post("/v1/check", R"({"policy":"exports","key":"u1"})", json);
  EXPECT_EQ(second.status, 429);
  // Denied: nothing held by it, a retry of 1 s; the slot's lease has run
  // down by the real time between the two calls.
  const std::string denied_prefix = R"({"allowed":false,"limit":1,"remaining":0,"reset_after_ms":)";
  const std::string denied_suffix = R"(,"retry_after_ms":1000})";
  ASSERT_EQ(second.body.rfind(denied_prefix, 0), 0u) << second.body;
  ASSERT_GT(second.body.size(), denied_prefix.size() + denied_suffix.size());
  EXPECT_EQ(second.body.substr(second.body.size() - denied_suffix.size()), denied_suffix);
  const long long reset_ms = std::stoll(second.body.substr(denied_prefix.size()));
  EXPECT_LE(reset_ms, 3'600'000);
  EXPECT_GT(reset_ms, 3'500'000);
  EXPECT_EQ(second.header("Retry-After"), "1");

  // A lease edited to name another key, or not hex at all, is refused.
  std::string forged = lease;
  forged[forged.size() - 40] = forged[forged.size() - 40] == '0' ? '1' : '0';
  const HttpResponse bad = server->post("/v1/release", R"({"lease":")" + forged + "\"}", json);
  EXPECT_EQ(bad.status, 404);
  EXPECT_EQ(
      bad.body,
      R"({"error":{"code":"UNKNOWN_LEASE","message":"this lease was not granted by this server, or its policy has changed since"}})");
  EXPECT_EQ(server->post("/v1/release", R"({"lease":"zz"})", json).status, 404);
  EXPECT_EQ(server->post("/v1/release", R"({"lease":""})", json).status, 400);
  EXPECT_EQ(server->post("/v1/release", R"({"lease":"ab","x":1})", json).status, 400);
  EXPECT_EQ(server->post("/v1/check", R"({"policy":"exports","key":"u1"})", json).status, 429);

  const HttpResponse released = server->post("/v1/release", R"({"lease":")" + lease + "\"}", json);
  EXPECT_EQ(released.status, 200);
  EXPECT_EQ(released.body, R"({"released":true})");
  EXPECT_EQ(server->metric(R"(sluice_concurrency_slots_held{route="policy:exports"})"), 0);
  const HttpResponse again = server->post("/v1/check", R"({"policy":"exports","key":"u1"})", json);
  EXPECT_EQ(again.status, 200) << again.body;
}

// Releasing one lease again and again used to free the other holders'
// slots, each answered {"released":true}.
TEST(Concurrency, ALeaseIsReleasedOnceAndItsIdDoesNotShowTheKey) {
  auto server = SluiceProcess::start(R"(
headers: none
policies:
  exports: {algorithm: concurrency, max: 3, lease: 1h}
)");
  ASSERT_NE(server, nullptr);
  const Headers json = {{"Content-Type", "application/json"}};
  const std::string key = "customer-7f3a9e-secret";
  const std::string body = R"({"policy":"exports","key":")" + key + R"("})";
  std::vector<std::string> leases;
  for (int i = 0; i < 3; ++i) {
    const HttpResponse r = server->post("/v1/check", body, json);
    ASSERT_EQ(r.status, 200) << r.body;
    const size_t at = r.body.find(R"("lease":")");
    ASSERT_NE(at, std::string::npos) << r.body;
    leases.push_back(r.body.substr(at + 9, r.body.size() - at - 9 - 2));
  }
  ASSERT_EQ(server->post("/v1/check", body, json).status, 429);

  // Opaque: 64 hex digits, nothing of the key or the policy, in clear or in hex.
  std::string key_hex;
  for (const unsigned char c : key) {
    static constexpr char kHex[] = "0123456789abcdef";
    key_hex += kHex[c >> 4];
    key_hex += kHex[c & 0xf];
  }
  for (const std::string& lease : leases) {
    EXPECT_EQ(lease.size(), 64u) << lease;
    EXPECT_EQ(lease.find_first_not_of("0123456789abcdef"), std::string::npos) << lease;
    EXPECT_EQ(lease.find(key), std::string::npos);
    EXPECT_EQ(lease.find(key_hex.substr(0, 12)), std::string::npos) << lease;
    EXPECT_EQ(lease.find("6578706f727473"), std::string::npos) << lease;  // "exports"
  }
  EXPECT_NE(leases[0], leases[1]);

  // One lease released four times: one slot back, then nothing.
  const std::string release = R"({"lease":")" + leases[0] + R"("})";
  const HttpResponse first = server->post("/v1/release", release, json);
  EXPECT_EQ(first.status, 200);
  EXPECT_EQ(first.body, R"({"released":true})");
  for (int i = 0; i < 3; ++i) {
    const HttpResponse again = server->post("/v1/release", release, json);
    EXPECT_EQ(again.status, 200) << i;
    EXPECT_EQ(again.body, R"({"released":false})") << i;
  }
  EXPECT_EQ(server->metric(R"(sluice_concurrency_slots_released_total{route="policy:exports"})"),
            1);
  // Exactly the one slot released is free: the other two holders keep theirs.
  EXPECT_EQ(server->post("/v1/check", body, json).status, 200);
  EXPECT_EQ(server->post("/v1/check", body, json).status, 429);
  // The other leases still release, once each.
  EXPECT_EQ(server->post("/v1/release", R"({"lease":")" + leases[1] + R"("})", json).body,
            R"({"released":true})");
  EXPECT_EQ(server->post("/v1/release", R"({"lease":")" + leases[1] + R"("})", json).body,
            R"({"released":false})");
  // A made-up id of the right shape was never issued here.
  EXPECT_EQ(
      server->post("/v1/release", R"({"lease":")" + std::string(64, 'a') + R"("})", json).status,
      404);
}

}  // namespace
}  // namespace sluice::test
