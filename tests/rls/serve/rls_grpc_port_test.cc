// The gRPC port of the real `sluice serve` under connection abuse: it accepts
// again once the process has file descriptors again (and /readyz says why
// meanwhile), holds at most rls.max_connections connections, closes those
// that stay silent (server.header_timeout) or idle (server.idle_timeout), and
// logs failed TLS handshakes at logging.denial_log_per_second with a count of
// the rest.
#include <sys/resource.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gated_log.h"
#include "gateway_support.h"
#include "http_client.h"
#include "rls_serve_util.h"
#include "sluice_process.h"
#include "tls/test_certs.h"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

const std::string kDescriptors = R"(domain: api
descriptors:
  - key: client
    rate_limit: {unit: hour, requests_per_unit: 1000}
)";

class RlsGrpcPort : public ::testing::Test {
 protected:
  // Serves kDescriptors on a free gRPC port; `rls_extra` goes under `rls:`,
  // `extra` at the top level.
  void start(const std::string& rls_extra, const std::string& extra) {
    dir_.write("api.yaml", kDescriptors);
    server_ = SluiceProcess::start("grpc: 127.0.0.1:0\nrls:\n  config_dir: " + dir_.path() + "\n" +
                                   rls_extra + extra);
    ASSERT_NE(server_, nullptr);
    port_ = grpc_port(server_->log());
    ASSERT_GT(port_, 0) << server_->log();
  }

  DescriptorDir dir_;
  std::unique_ptr<SluiceProcess> server_;
  int port_ = 0;
};

const pb::RateLimitRequest kCall = request("api", {{{"client", "a"}}});

// The descriptors a process holds open.
size_t open_fds(pid_t pid) {
  std::error_code ec;
  size_t n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  return n;
}

// A ShouldRateLimit call and a health check, each on a connection of its
// own, both answered within `timeout` (each tried again until then).
struct Served {
  bool decided = false;
  bool healthy = false;
};
Served serve_new_connections(int port, milliseconds timeout) {
  Served s;
  const auto deadline = steady_clock::now() + timeout;
  while (!(s.decided && s.healthy) && steady_clock::now() < deadline) {
    if (!s.decided) {
      RlsClient client(port, /*own_connection=*/true);
      pb::RateLimitResponse response;
      s.decided = client.call(kCall, &response, seconds(1)).ok() && response.overall_code() == OK;
    }
    if (!s.healthy) {
      std::string response;
      s.healthy =
          health_check(channel_to(port, true), seconds(1), &response).ok() && response == kServing;
    }
  }
  return s;
}

// ---------------------------------------------------------------- descriptors

TEST_F(RlsGrpcPort, AcceptsAgainAfterTheProcessRanOutOfFileDescriptors) {
  // Timeouts longer than the test: the server closes none of the idle
  // connections itself.
  ASSERT_NO_FATAL_FAILURE(start("", "server: {header_timeout: 2m, idle_timeout: 2m}\n"));
  ASSERT_TRUE(serve_new_connections(port_, seconds(10)).decided);
  // Opened now, while the server has descriptors: it can answer here when
  // it has none left for a new connection.
  HttpConnection admin("127.0.0.1", server_->admin_port());
  EXPECT_EQ(admin.request("GET", "/readyz").body, "ready\n");

  // The server may hold 64 descriptors more than now; idle connections to
  // the gRPC port take them all, and 8 more wait in its backlog.
  const pid_t pid = server_->pid();
  const size_t limit = open_fds(pid) + 64;
  const rlimit lowered{limit, limit};
  ASSERT_EQ(::prlimit(pid, RLIMIT_NOFILE, &lowered, nullptr), 0) << std::strerror(errno);
  std::vector<std::unique_ptr<HttpConnection>> idle;
  const size_t room = limit - open_fds(pid);
  for (size_t i = 0; i < room + 8; ++i) {
    idle.push_back(std::make_unique<HttpConnection>("127.0.0.1", port_));
  }
  ASSERT_TRUE(wait_until([&] { return open_fds(pid) >= limit; }))
      << open_fds(pid) << " of " << limit;

  // /readyz says so while no descriptor is free.
  HttpResponse ready;
  EXPECT_TRUE(wait_until([&] {
    ready = admin.request("GET", "/readyz");
    return ready.status == 503;
  })) << ready.status;
  EXPECT_EQ(ready.body, "grpc port cannot accept connections: Too many open files\n");
  EXPECT_TRUE(server_->wait_for_log("grpc: accept on 127.0.0.1:" + std::to_string(port_) +
                                    " failed: Too many open files; trying again every 100 ms"))
      << server_->log();

  // The attackers leave: new connections are served within 10 s.
  idle.clear();
  const Served served = serve_new_connections(port_, seconds(10));
  EXPECT_TRUE(served.decided);
  EXPECT_TRUE(served.healthy);
  EXPECT_TRUE(wait_until([&] { return admin.request("GET", "/readyz").body == "ready\n"; }));
  EXPECT_TRUE(server_->wait_for_log("grpc: accepting on 127.0.0.1:" + std::to_string(port_) +
                                    " again after "))
      << server_->log();
  EXPECT_GE(server_->metric("sluice_grpc_accept_failures_total"), 1);
}

// ---------------------------------------------------------------- max_connections

TEST_F(RlsGrpcPort, HoldsAtMostMaxConnectionsAndAReloadChangesTheBound) {
  ASSERT_NO_FATAL_FAILURE(start("  max_connections: 3\n", "server: {header_timeout: 2m}\n"));
  EXPECT_NE(server_->log().find("; at most 3 connections)"), std::string::npos) << server_->log();

  std::vector<std::unique_ptr<HttpConnection>> idle;
  for (int i = 0; i < 3; ++i) idle.push_back(std::make_unique<HttpConnection>("127.0.0.1", port_));
  ASSERT_TRUE(server_->wait_for_metric("sluice_grpc_connections", 3));
  // The fourth is closed at once, counted and logged.
  HttpConnection fourth("127.0.0.1", port_);
  EXPECT_TRUE(fourth.closed_by_peer(seconds(10)));
  EXPECT_TRUE(server_->wait_for_metric("sluice_grpc_connections_refused_total", 1));
  EXPECT_TRUE(
      server_->wait_for_log("grpc: connection refused, 3 connections open (rls.max_connections)"))
      << server_->log();
  EXPECT_EQ(server_->metric("sluice_grpc_connections"), 3);

  // One leaves: a client takes its place.
  idle.pop_back();
  EXPECT_TRUE(serve_new_connections(port_, seconds(10)).decided);
  // Counted again once the client's connections are gone.
  EXPECT_TRUE(server_->wait_for_metric("sluice_grpc_connections", 2))
      << server_->metric("sluice_grpc_connections");

  // A reload raises the bound for the next connections.
  server_->rewrite_config("grpc: 127.0.0.1:" + std::to_string(port_) + "\nrls:\n  config_dir: " +
                          dir_.path() + "\n  max_connections: 5\nserver: {header_timeout: 2m}\n");
  server_->send_signal(SIGHUP);
  ASSERT_TRUE(server_->wait_for_metric(R"(sluice_config_reloads_total{result="success"})", 1))
      << server_->log();
  EXPECT_TRUE(server_->wait_for_log("grpc: at most 5 connections (was 3)")) << server_->log();
  const long long refused = server_->metric("sluice_grpc_connections_refused_total");
  while (idle.size() < 5) idle.push_back(std::make_unique<HttpConnection>("127.0.0.1", port_));
  EXPECT_TRUE(server_->wait_for_metric("sluice_grpc_connections", 5))
      << server_->metric("sluice_grpc_connections");
  EXPECT_EQ(server_->metric("sluice_grpc_connections_refused_total"), refused);
}

// ---------------------------------------------------------------- timeouts

// The client preface of HTTP/2 and an empty SETTINGS frame: a connection
// that has spoken, and then makes no call.
const std::string kHttp2Preface =
    std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") + std::string("\0\0\0\4\0\0\0\0\0", 9);

TEST_F(RlsGrpcPort, ASilentConnectionIsClosedAfterTheHeaderTimeout) {
  ASSERT_NO_FATAL_FAILURE(start("", "server: {header_timeout: 1s, idle_timeout: 2m}\n"));
  HttpConnection silent("127.0.0.1", port_);
  HttpConnection spoke("127.0.0.1", port_);
  spoke.send_raw(kHttp2Preface);
  // Not before the timeout (a second), but then.
  EXPECT_FALSE(silent.closed_by_peer(milliseconds(300)));
  EXPECT_TRUE(silent.closed_by_peer(seconds(10)));
  // The one that completed its preface is not bound by header_timeout.
  EXPECT_FALSE(spoke.closed_by_peer(milliseconds(500)));
  EXPECT_TRUE(server_->wait_for_metric("sluice_grpc_connections", 1));
}

TEST_F(RlsGrpcPort, AConnectionWithoutCallsIsClosedAfterTheIdleTimeout) {
  ASSERT_NO_FATAL_FAILURE(start("", "server: {header_timeout: 2m, idle_timeout: 1s}\n"));
  HttpConnection spoke("127.0.0.1", port_);
  spoke.send_raw(kHttp2Preface);
  EXPECT_FALSE(spoke.closed_by_peer(milliseconds(300)));
  EXPECT_TRUE(spoke.closed_by_peer(seconds(10)));
  EXPECT_TRUE(server_->wait_for_metric("sluice_grpc_connections", 0));
}

// ---------------------------------------------------------------- TLS handshakes

// Plain HTTP to a TLS port: the server's handshake fails on the first bytes.
void fail_a_handshake(int port) {
  HttpConnection c("127.0.0.1", port);
  c.send_raw("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_TRUE(c.closed_by_peer(seconds(10)));
}

TEST_F(RlsGrpcPort, FailedTlsHandshakesAreCountedAndLoggedAtTheDenialLogRate) {
  const testing::TestCerts certs;
  ASSERT_TRUE(certs.ok()) << certs.error();
  ASSERT_NO_FATAL_FAILURE(start("", "tls: {cert: " + certs.server_cert() +
                                        ", key: " + certs.server_key() + "}\ngrpc_tls: true\n"));
  const std::string marker = "grpc: TLS handshake failed: ";
  expect_gated_log(
      *server_, [this] { fail_a_handshake(port_); }, 200,
      "sluice_grpc_tls_handshake_failures_total", marker, "failed handshakes");
  // gRPC's own line per failure is gone; the logged ones give the reason.
  const std::string log = server_->log();
  EXPECT_EQ(log.find("Handshake failed with fatal error"), std::string::npos) << log;
  EXPECT_NE(log.find(marker + "SSL_ERROR_SSL: "), std::string::npos) << log;
}

}  // namespace
}  // namespace sluice::test
