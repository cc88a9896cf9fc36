// The README's quick start as `make run` serves it: examples/quickstart.yaml
// in front of the demo upstream (on ports the test picks). What the README
// says its loops print is what they print.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gateway_support.h"
#include "test_support.h"

namespace sluice::test {
namespace {

// examples/quickstart.yaml without its fixed addresses: the harness adds
// `listen` and `admin`, the upstream is the test's, the decision API port 0.
std::string quickstart_yaml(const std::string& upstream_url) {
  std::ifstream file(std::string(SLUICE_SOURCE_DIR) + "/examples/quickstart.yaml");
  std::string out = "upstream: " + upstream_url + "\n";
  std::string line;
  while (std::getline(file, line)) {
    if (line.starts_with("listen:") || line.starts_with("admin:") ||
        line.starts_with("upstream:")) {
      continue;
    }
    const size_t port = line.find("127.0.0.1:8082");
    if (port != std::string::npos) line.replace(port, 14, "127.0.0.1:0");
    out += line + "\n";
  }
  return out;
}

TEST(Quickstart, TheReadmeLoopsPrintWhatTheReadmeSays) {
  DemoUpstream upstream(SLUICE_BINARY);
  ASSERT_NE(upstream.port(), 0);
  auto server = SluiceProcess::start(quickstart_yaml(upstream.url()));
  ASSERT_NE(server, nullptr);
  // for i in $(seq 7); do curl ... /api/hello; done
  std::string codes;
  for (int i = 0; i < 7; ++i) codes += std::to_string(server->get("/api/hello").status) + " ";
  EXPECT_EQ(codes, "200 200 200 200 200 429 429 ");
  // for i in $(seq 5); do curl ... -X POST /api/login -d '{"password":"guess"}'; done
  codes.clear();
  std::vector<HttpResponse> logins;
  for (int i = 0; i < 5; ++i) {
    logins.push_back(server->post("/api/login", R"({"password":"guess"})",
                                  {{"Content-Type", "application/x-www-form-urlencoded"}}));
    codes += std::to_string(logins.back().status) + " ";
  }
  EXPECT_EQ(codes, "401 401 401 429 429 ");
  // The 4th "locks this client out for 5 minutes".
  EXPECT_EQ(logins[3].header("Retry-After"), "300");
}

}  // namespace
}  // namespace sluice::test
