// Several workers on one public port: each has a listening socket of its own
// in one SO_REUSEPORT group (server.cc, Server::Listener), yet the port stays
// the server's alone.
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "test_support.h"
#include "tls_support.h"

namespace sluice::test {
namespace {

constexpr const char* kTwoWorkers =
    "server:\n  threads: 2\npolicies:\n  login: {capacity: 100, refill_rate: 1/h}\n";

TEST(Listen, TwoWorkersServeConnectionsOnOnePort) {
  auto server = SluiceProcess::start(kTwoWorkers);
  ASSERT_NE(server, nullptr);
  // Connections held open together, so the kernel spreads them over both
  // workers' sockets; each carries two decisions, 32 of the 100 allowed.
  std::vector<std::unique_ptr<HttpConnection>> connections;
  for (int i = 0; i < 16; ++i) connections.push_back(server->connect());
  for (int round = 0; round < 2; ++round) {
    for (auto& c : connections) {
      const HttpResponse r = c->request("POST", "/v1/check", {{"Content-Type", "application/json"}},
                                        R"({"policy":"login","key":"k"})");
      ASSERT_EQ(r.status, 200) << r.body;
    }
  }
  const HttpResponse last = server->post("/v1/check", R"({"policy":"login","key":"k"})");
  EXPECT_EQ(last.status, 200);
  EXPECT_EQ(last.header("X-RateLimit-Remaining"), "67");  // 100 - 33
}

TEST(Listen, ASecondServerCannotTakeThePortOfOneWithTwoWorkers) {
  auto server = SluiceProcess::start(kTwoWorkers);
  ASSERT_NE(server, nullptr);
  const char* tmp = std::getenv("TMPDIR");
  const std::string config = std::string(tmp ? tmp : "/tmp") + "/sluice-listen-test-" +
                             std::to_string(::getpid()) + ".yaml";
  {
    std::ofstream out(config);
    out << "listen: 127.0.0.1:" << server->port() << "\nadmin: 127.0.0.1:0\n" << kTwoWorkers;
  }
  // Bounded: a second server that did bind would serve until `timeout` ends it.
  const CommandResult second =
      run_command(std::string("timeout 20 ") + SLUICE_BINARY + " serve --config " + config);
  std::remove(config.c_str());
  EXPECT_NE(second.status, 0);
  EXPECT_NE(second.output.find("cannot bind listen address 127.0.0.1:" +
                               std::to_string(server->port()) + ": Address already in use"),
            std::string::npos)
      << second.output;
  // The first server is untouched.
  EXPECT_EQ(server->admin_get("/healthz").status, 200);
  EXPECT_EQ(server->post("/v1/check", R"({"policy":"login","key":"k"})").status, 200);
}

}  // namespace
}  // namespace sluice::test
