// Side by side: Debian's real nginx with `limit_req rate=10r/s burst=4`
// (no nodelay) and `sluice serve` with capacity 1, refill 10/s, delay 400ms
// (docs/MIGRATING.md's mapping), both in front of one TestUpstream, get the
// same arrival trace at the same moments. They must serve the same requests
// (200, the rest 429) at the same times: the upstream's receipt times
// (server side, one clock) agree to within 10 ms.
//
// The trace's offsets are when the test sends; they are a schedule of
// arrivals, not a wait for an outcome. Each arrival lies 50 ms or more from
// a boundary of the queue, so scheduling jitter cannot change an answer.
#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "nginx_support.h"

namespace sluice::test {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct Arrivals {
  milliseconds at;
  int count;
};

// 10 at once: 5 served 100 ms apart, 5 refused. At 150 ms the queue holds
// 2.5 turns: 1 more fits, 1 is refused. At 700 ms it is empty: 3 served at
// 0, 100, 200 ms. At 1250 ms: served at once.
const std::vector<Arrivals> kTrace = {
    {milliseconds(0), 10}, {milliseconds(150), 2}, {milliseconds(700), 3}, {milliseconds(1250), 1}};
const std::vector<int> kStatuses = {200, 200, 200, 200, 200, 429, 429, 429,
                                    429, 429, 200, 429, 200, 200, 200, 200};
// When the served requests reach the upstream, from the first.
const std::vector<long long> kServedAtMs = {0, 100, 200, 300, 400, 500, 700, 800, 900, 1250};

std::string nginx_site(uint16_t port, uint16_t upstream_port) {
  return "limit_req_zone $binary_remote_addr zone=trace:1m rate=10r/s;\n"
         "server {\n  listen 127.0.0.1:" +
         std::to_string(port) +
         ";\n  location / {\n    limit_req zone=trace burst=4;\n"
         "    limit_req_status 429;\n    proxy_pass http://127.0.0.1:" +
         std::to_string(upstream_port) + ";\n  }\n}\n";
}

std::string sluice_yaml(const std::string& upstream_url) {
  return "upstream: " + upstream_url +
         "\nserver: {threads: 1}\nroutes:\n  - match: GET /feed\n"
         "    limits: [{capacity: 1, refill_rate: 10/s}]\n    delay: 400ms\n";
}

// The upstream's receipt times of the requests that came through `via`,
// sorted, from the first of them.
std::vector<long long> served_at_ms(const TestUpstream& upstream, const std::string& via) {
  const std::vector<std::string> heads = upstream.request_heads();
  const std::vector<Clock::time_point> times = upstream.request_times();
  std::vector<Clock::time_point> mine;
  for (size_t i = 0; i < heads.size(); ++i) {
    if (heads[i].find("via=" + via + " ") != std::string::npos) mine.push_back(times[i]);
  }
  std::sort(mine.begin(), mine.end());
  std::vector<long long> out;
  for (const Clock::time_point t : mine)
    out.push_back(std::chrono::duration_cast<milliseconds>(t - mine.front()).count());
  return out;
}

TEST(QueueingBesideNginx, LimitReqWithoutNodelayAndDelayServeTheSameRequestsAtTheSameTimes) {
  TestUpstream upstream;
  auto sluice = SluiceProcess::start(sluice_yaml(upstream.url()));
  ASSERT_NE(sluice, nullptr);
  Nginx nginx([&](uint16_t port) { return nginx_site(port, upstream.port()); });
  ASSERT_NE(nginx.port(), 0);

  // Every connection is open before the trace starts: an arrival is one send.
  struct Client {
    std::unique_ptr<HttpConnection> nginx;
    std::unique_ptr<HttpConnection> sluice;
  };
  std::vector<Client> clients;
  for (const Arrivals& a : kTrace) {
    for (int k = 0; k < a.count; ++k) {
      clients.push_back(
          {std::make_unique<HttpConnection>("127.0.0.1", nginx.port()), sluice->connect()});
    }
  }
  const Clock::time_point start = Clock::now();
  size_t next = 0;
  for (const Arrivals& a : kTrace) {
    std::this_thread::sleep_until(start + a.at);
    for (int k = 0; k < a.count; ++k, ++next) {
      const std::string i = std::to_string(next);
      clients[next].nginx->send_request("GET", "/feed?i=" + i + "&via=nginx");
      clients[next].sluice->send_request("GET", "/feed?i=" + i + "&via=sluice");
    }
  }
  // Within a burst the proxies may take simultaneous arrivals in different
  // orders: what must agree is how many of each burst are served.
  std::vector<int> nginx_statuses;
  std::vector<int> sluice_statuses;
  size_t at = 0;
  for (const Arrivals& a : kTrace) {
    std::vector<int> n;
    std::vector<int> s;
    for (int k = 0; k < a.count; ++k, ++at) {
      n.push_back(clients[at].nginx->read_response(std::chrono::seconds(10)).status);
      s.push_back(clients[at].sluice->read_response(std::chrono::seconds(10)).status);
    }
    std::sort(n.begin(), n.end());
    std::sort(s.begin(), s.end());
    nginx_statuses.insert(nginx_statuses.end(), n.begin(), n.end());
    sluice_statuses.insert(sluice_statuses.end(), s.begin(), s.end());
  }
  EXPECT_EQ(nginx_statuses, kStatuses) << nginx.log();
  EXPECT_EQ(sluice_statuses, kStatuses);

  const std::vector<long long> by_nginx = served_at_ms(upstream, "nginx");
  const std::vector<long long> by_sluice = served_at_ms(upstream, "sluice");
  ASSERT_EQ(by_nginx.size(), kServedAtMs.size());
  ASSERT_EQ(by_sluice.size(), kServedAtMs.size());
  for (size_t k = 0; k < kServedAtMs.size(); ++k) {
    EXPECT_LE(std::abs(by_sluice[k] - by_nginx[k]), 10)
        << "served request " << k << ": sluice at " << by_sluice[k] << " ms, nginx at "
        << by_nginx[k] << " ms";
    // Both on the schedule the arithmetic gives (late by scheduling only).
    EXPECT_GE(by_sluice[k], kServedAtMs[k] - 10) << k;
    EXPECT_LE(by_sluice[k], kServedAtMs[k] + 60) << k;
  }
  EXPECT_EQ(sluice->metric("sluice_held_requests_total"), 7);
  EXPECT_EQ(sluice->metric("sluice_held_requests"), 0);
}

}  // namespace
}  // namespace sluice::test
