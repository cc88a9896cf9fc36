// `upstreams:` and `upstream: NAME` in the config loader: what a valid
// section gives the gateway, each mistake reported at its line, and the
// section written back by to_yaml.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "policy/config_loader.h"
#include "policy/config_yaml.h"
#include "tls/test_certs.h"

namespace sluice::policy {
namespace {

using Errors = std::vector<std::string>;

LoadResult load(const std::string& yaml) {
  return load_config_string(yaml, "t.yaml");
}

Errors errors_of(const std::string& yaml) {
  Errors out;
  for (const ConfigError& e : load(yaml).errors) out.push_back(e.text());
  return out;
}

const std::string kRoutes = R"(routes:
  - match: GET /a
    limits: [{capacity: 5, refill_rate: 1/s}]
  - match: POST /login
    limits: [{capacity: 5, refill_rate: 1/s}]
    upstream: auth
)";

TEST(UpstreamsConfig, NamedUpstreamsTheDefaultAndARoutesOwn) {
  LoadResult r = load(R"(upstreams:
  api:
    servers: [http://10.0.0.5:3000, "http://10.0.0.6:3000/"]
    balance: least_request
    health: {fail_after: 2, retry_after: 5s}
    retries: 1
    connect_timeout: 300ms
    timeout: 2s
    max_idle_connections: 8
  auth:
    servers: [http://auth.internal]
upstream: api
)" + kRoutes);
  ASSERT_TRUE(r.errors.empty()) << r.errors.front().text();
  const Config& c = *r.config;
  ASSERT_EQ(c.upstreams.size(), 2u);
  ASSERT_TRUE(c.upstream);
  EXPECT_EQ(c.upstream->name, "api");
  ASSERT_EQ(c.upstream->servers.size(), 2u);
  EXPECT_EQ(c.upstream->servers[0].address.text(), "10.0.0.5:3000");
  EXPECT_EQ(c.upstream->servers[1].address.text(), "10.0.0.6:3000");
  EXPECT_FALSE(c.upstream->servers[0].tls);
  EXPECT_EQ(c.upstream->balance, Balance::kLeastRequest);
  EXPECT_EQ(c.upstream->fail_after, 2u);
  EXPECT_EQ(c.upstream->retry_after, std::chrono::seconds(5));
  EXPECT_EQ(c.upstream->retries, 1u);
  EXPECT_EQ(c.upstream->connect_timeout, std::chrono::milliseconds(300));
  EXPECT_EQ(c.upstream->timeout, std::chrono::seconds(2));
  EXPECT_EQ(c.upstream->max_idle_connections, 8u);
  EXPECT_EQ(c.upstreams[1].name, "auth");
  EXPECT_EQ(c.upstreams[1].servers[0].address.text(), "auth.internal:80");
  EXPECT_EQ(c.upstreams[1].balance, Balance::kRoundRobin);
  EXPECT_EQ(c.upstreams[1].fail_after, 0u);  // no `health:`: off
  EXPECT_EQ(c.upstreams[1].retries, 0u);
  ASSERT_EQ(c.routes.size(), 2u);
  EXPECT_EQ(c.routes[0].upstream, "");
  EXPECT_EQ(c.routes[1].upstream, "auth");
}

TEST(UpstreamsConfig, AUrlUpstreamIsOneServerAsBefore) {
  LoadResult r = load("upstream: http://127.0.0.1:3000/base/\n");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front().text();
  const Upstream& u = *r.config->upstream;
  EXPECT_EQ(u.name, "");
  EXPECT_EQ(u.label(), "default");
  EXPECT_EQ(u.url, "http://127.0.0.1:3000/base/");
  EXPECT_EQ(u.base_path, "/base");
  ASSERT_EQ(u.servers.size(), 1u);
  EXPECT_EQ(u.servers[0].address.text(), "127.0.0.1:3000");
  EXPECT_EQ(u.retries, 0u);
  EXPECT_EQ(u.fail_after, 0u);
}

TEST(UpstreamsConfig, WrittenBackByToYamlAndReadAgainTheSame) {
  LoadResult r = load(R"(upstreams:
  api:
    servers: [http://10.0.0.5:3000, http://10.0.0.6:3000]
    balance: least_request
    health: {fail_after: 4, retry_after: 1500ms}
    retries: 1
  auth:
    servers: [http://auth.internal:8080]
upstream: api
)" + kRoutes);
  ASSERT_TRUE(r.errors.empty()) << r.errors.front().text();
  LoadResult again = load(to_yaml(*r.config));
  ASSERT_TRUE(again.errors.empty()) << again.errors.front().text() << "\n" << to_yaml(*r.config);
  EXPECT_EQ(*again.config, *r.config);
}

TEST(UpstreamsConfig, UpstreamNamingNoUpstreamIsAnErrorAtItsLine) {
  EXPECT_EQ(errors_of(R"(upstreams:
  api:
    servers: [http://10.0.0.5:3000]
upstream: apj
)"),
            Errors{"t.yaml:4:11: upstream: names no upstream: \"apj\" is not under `upstreams:` "
                   "(did you mean \"api\"?)"});
  EXPECT_EQ(errors_of(R"(upstreams:
  api:
    servers: [http://10.0.0.5:3000]
upstream: api
routes:
  - match: GET /a
    limits: [{capacity: 5, refill_rate: 1/s}]
    upstream: other
)"),
            Errors{"t.yaml:8:15: routes[0].upstream: names no upstream: \"other\" is not under "
                   "`upstreams:`"});
}

TEST(UpstreamsConfig, UpstreamsWithoutADefaultIsAnError) {
  EXPECT_EQ(errors_of(R"(upstreams:
  api:
    servers: [http://10.0.0.5:3000]
)"),
            Errors{"t.yaml:2:3: upstreams: needs `upstream: NAME`, the upstream of the routes "
                   "that name none"});
}

TEST(UpstreamsConfig, AServerUrlWithAPathOrUserInfoIsAnError) {
  const Errors path = errors_of(R"(upstreams:
  api:
    servers: [http://10.0.0.5:3000/v1]
upstream: api
)");
  ASSERT_EQ(path.size(), 2u);  // the server, then the default naming an upstream with an error
  EXPECT_EQ(path[0],
            "t.yaml:3:15: upstreams.api.servers[0]: must be a server URL like "
            "http://10.0.0.5:3000 or https://auth.internal:8443, got \"http://10.0.0.5:3000/v1\" "
            "(a server URL has no path, query or fragment)");
  const Errors user = errors_of(R"(upstreams:
  api:
    servers: [http://bob@10.0.0.5:3000]
upstream: api
)");
  ASSERT_FALSE(user.empty());
  EXPECT_EQ(user[0],
            "t.yaml:3:15: upstreams.api.servers[0]: must be a server URL like "
            "http://10.0.0.5:3000 or https://auth.internal:8443, got \"http://bob@10.0.0.5:3000\" "
            "(user info is not supported)");
}

TEST(UpstreamsConfig, AnUnknownBalanceIsAnError) {
  const Errors e = errors_of(R"(upstreams:
  api:
    servers: [http://10.0.0.5:3000]
    balance: random
upstream: api
)");
  ASSERT_FALSE(e.empty());
  EXPECT_EQ(e[0].rfind("t.yaml:4:14: upstreams.api.balance: ", 0), 0u) << e[0];
  EXPECT_NE(e[0].find("round_robin"), std::string::npos) << e[0];
}

class UpstreamsTlsConfig : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(certs_.ok()) << certs_.error(); }
  sluice::testing::TestCerts certs_;
};

TEST_F(UpstreamsTlsConfig, HttpsServersWithCaServerNameAndClientCertificate) {
  LoadResult r = load(R"(upstreams:
  auth:
    servers: [https://127.0.0.1:8443, https://auth.internal]
    tls:
      ca_file: )" + certs_.ca() +
                      R"(
      server_name: localhost
      cert_file: )" + certs_.client_cert() +
                      R"(
      key_file: )" + certs_.client_key() +
                      R"(
upstream: auth
)");
  ASSERT_TRUE(r.errors.empty()) << r.errors.front().text();
  const Upstream& u = *r.config->upstream;
  EXPECT_TRUE(u.servers[0].tls);
  EXPECT_EQ(u.servers[1].address.text(), "auth.internal:443");
  EXPECT_EQ(u.tls.ca_file, certs_.ca());
  EXPECT_EQ(u.tls.server_name, "localhost");
  EXPECT_EQ(u.tls.cert_file, certs_.client_cert());
  EXPECT_EQ(u.tls.key_file, certs_.client_key());
}

TEST_F(UpstreamsTlsConfig, AnUnreadableCaIsAnErrorAtItsKey) {
  const Errors e = errors_of(R"(upstreams:
  auth:
    servers: [https://127.0.0.1:8443]
    tls: {ca_file: /nonexistent/ca.pem}
upstream: auth
)");
  ASSERT_FALSE(e.empty());
  EXPECT_EQ(e[0].rfind("t.yaml:4:20: upstreams.auth.tls.ca_file: ", 0), 0u) << e[0];
  EXPECT_NE(e[0].find("/nonexistent/ca.pem"), std::string::npos) << e[0];
}

}  // namespace
}  // namespace sluice::policy
