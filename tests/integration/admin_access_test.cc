// Who may use the admin port. It reloads the config and resets limits, so a
// web page must never drive it (a foreign Origin, a text/plain or form POST,
// a DNS-rebound Host), and with admin_token_file nothing changes state
// without the bearer token; admin_token_all closes the reads too.
#include "test_support.h"

namespace sluice::test {
namespace {

const std::string kYaml = R"(
headers: [legacy]
policies:
  login: {capacity: 2, refill_rate: 1/h}
)";
const std::string kReset = R"({"policy":"login","key":"user:1"})";
const Headers kJson = {{"Content-Type", "application/json"}};

Headers with(Headers headers, const std::string& name, const std::string& value) {
  headers.emplace_back(name, value);
  return headers;
}

std::string code_of(const HttpResponse& r) {
  const std::string marker = R"({"error":{"code":")";
  if (r.body.rfind(marker, 0) != 0) return "<" + r.body + ">";
  return r.body.substr(marker.size(), r.body.find('"', marker.size()) - marker.size());
}

// DNS rebinding: evil.example is made to resolve to 127.0.0.1, and the
// victim's browser then sends "Host: evil.example" to the admin port.
TEST(AdminAccess, AHostOtherThanTheAdminAddressLocalhostOrAdminHostsGets421) {
  auto server = SluiceProcess::start(kYaml + "admin_hosts: [sluice-admin.internal]\n");
  ASSERT_NE(server, nullptr);
  const std::string port = std::to_string(server->admin_port());
  for (const std::string target : {"/admin/stats", "/metrics", "/healthz", "/dashboard"}) {
    const HttpResponse r = server->admin_request("GET", target, {{"Host", "evil.example:" + port}});
    EXPECT_EQ(r.status, 421) << target;
    EXPECT_EQ(code_of(r), "MISDIRECTED_REQUEST") << target;
  }
  const HttpResponse reset = server->admin_request(
      "POST", "/admin/reset", with(kJson, "Host", "evil.example:" + port), kReset);
  EXPECT_EQ(reset.status, 421);
  for (const std::string& host :
       {"127.0.0.1:" + port, "localhost:" + port, std::string("LOCALHOST"),
        "sluice-admin.internal:" + port, std::string("Sluice-Admin.Internal")}) {
    EXPECT_EQ(server->admin_request("GET", "/admin/stats", {{"Host", host}}).status, 200) << host;
  }
}

// A kubelet probe and a port mapping name the address they connected to,
// which is not the one the server sees ("Host: 10.1.2.3:9090" for a pod IP,
// "Host: 127.0.0.1:9090" through a container's port mapping). No DNS name
// was rebound to send an IP literal: every one is answered, names are not.
TEST(AdminAccess, AnyIpLiteralHostIsAnsweredButNotANameThatLooksLikeOne) {
  auto server = SluiceProcess::start(kYaml);
  ASSERT_NE(server, nullptr);
  const std::string port = std::to_string(server->admin_port());
  for (const std::string& host :
       {"10.1.2.3:" + port, std::string("10.1.2.3"), std::string("192.0.2.77:1"),
        "[2001:db8::1]:" + port, std::string("[2001:db8::1]"), std::string("[::1]:9090"),
        std::string("[::ffff:10.1.2.3]:" + port)}) {
    EXPECT_EQ(server->admin_request("GET", "/healthz", {{"Host", host}}).status, 200) << host;
    EXPECT_EQ(server->admin_request("GET", "/readyz", {{"Host", host}}).status, 200) << host;
  }
  for (const std::string& host :
       {std::string("10.1.2.3.nip.io:") + port, std::string("10.1.2.3.evil.example"),
        std::string("2001:db8::1"), std::string("[2001:db8::1"), std::string("[10.1.2.3]:9090"),
        std::string("10.1.2.3:90x"), std::string("10.1.2:9090"), std::string("[::1]x")}) {
    const HttpResponse r = server->admin_request("GET", "/healthz", {{"Host", host}});
    EXPECT_EQ(r.status, 421) << host;
    EXPECT_EQ(code_of(r), "MISDIRECTED_REQUEST") << host;
  }
}

// The container image's admin port: other hosts reach it, and it has
// nothing for them to change.
TEST(AdminAccess, AReadOnlyAdminPortRefusesEveryChangeAndServesTheReads) {
  auto server = SluiceProcess::start(kYaml + "admin_read_only: true\n");
  ASSERT_NE(server, nullptr);
  ASSERT_EQ(server->post("/v1/check", kReset).status, 200);
  for (const auto& [method, target] :
       std::vector<std::pair<std::string, std::string>>{{"POST", "/admin/reload"},
                                                        {"POST", "/admin/reset"},
                                                        {"PUT", "/admin/consumers/u1"},
                                                        {"DELETE", "/admin/consumers/u1"}}) {
    const HttpResponse r = server->admin_request(method, target, kJson, "{}");
    EXPECT_EQ(r.status, 403) << method << " " << target;
    EXPECT_EQ(r.body, R"({"error":{"code":"FORBIDDEN","message":"this admin port is read-only )"
                      R"((admin_read_only: true): a )" +
                          method + R"( changes state and is not served"}})")
        << method << " " << target;
  }
  EXPECT_EQ(server->metric(R"(sluice_config_reloads_total{result="success"})"), 0);
  for (const std::string target : {"/healthz", "/readyz", "/metrics", "/admin/stats"}) {
    EXPECT_EQ(server->admin_get(target).status, 200) << target;
  }
  // The reset was refused: user:1 has spent one of its two.
  const HttpResponse second = server->post("/v1/check", kReset);
  EXPECT_EQ(second.status, 200);
  EXPECT_NE(second.body.find(R"("remaining":0)"), std::string::npos) << second.body;
}

TEST(AdminAccess, APostFromAnotherOriginGets403AndANonJsonBody415) {
  auto server = SluiceProcess::start(kYaml);
  ASSERT_NE(server, nullptr);
  const std::string self = "http://127.0.0.1:" + std::to_string(server->admin_port());
  const HttpResponse foreign = server->admin_request(
      "POST", "/admin/reset", with(kJson, "Origin", "http://evil.example"), kReset);
  EXPECT_EQ(foreign.status, 403);
  EXPECT_EQ(code_of(foreign), "FORBIDDEN");
  EXPECT_EQ(server->admin_request("POST", "/admin/reload", {{"Origin", "null"}}).status, 403);
  EXPECT_EQ(server->metric(R"(sluice_config_reloads_total{result="success"})"), 0);

  // What a page can POST without a CORS preflight: text/plain, forms.
  for (const std::string type :
       {"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"}) {
    const HttpResponse r =
        server->admin_request("POST", "/admin/reset", {{"Content-Type", type}}, kReset);
    EXPECT_EQ(r.status, 415) << type;
    EXPECT_EQ(code_of(r), "UNSUPPORTED_MEDIA_TYPE") << type;
  }
  EXPECT_EQ(server->admin_request("POST", "/admin/reset", {}, kReset).status, 415);

  // The admin port's own origin, JSON: accepted (and there is state to reset).
  ASSERT_EQ(server->post("/v1/check", kReset).status, 200);
  const HttpResponse own = server->admin_request(
      "POST", "/admin/reset",
      with({{"Content-Type", "application/json; charset=utf-8"}}, "Origin", self), kReset);
  EXPECT_EQ(own.status, 200) << own.body;
  // A reload has no body and needs no Content-Type.
  EXPECT_EQ(server->admin_request("POST", "/admin/reload", {}).status, 200);
}

TEST(AdminAccess, WithATokenFileEveryPostNeedsTheBearerTokenAndGetsStayOpen) {
  auto server = SluiceProcess::start(kYaml + "admin_token_file: admin.token\n", "127.0.0.1",
                                     {{"admin.token", "4dm1n-s3cret\n"}});
  ASSERT_NE(server, nullptr);
  const HttpResponse none = server->admin_request("POST", "/admin/reload", {});
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(none.header("WWW-Authenticate"), "Bearer");
  EXPECT_EQ(code_of(none), "UNAUTHORIZED");
  EXPECT_EQ(server
                ->admin_request("POST", "/admin/reset",
                                with(kJson, "Authorization", "Bearer wrong"), kReset)
                .status,
            401);
  EXPECT_EQ(server->metric(R"(sluice_config_reloads_total{result="success"})"), 0);
  const HttpResponse reload =
      server->admin_request("POST", "/admin/reload", {{"Authorization", "Bearer 4dm1n-s3cret"}});
  EXPECT_EQ(reload.status, 200) << reload.body;
  EXPECT_EQ(server->metric(R"(sluice_config_reloads_total{result="success"})"), 1);
  EXPECT_EQ(server->admin_get("/admin/stats").status, 200);
  EXPECT_EQ(server->admin_get("/metrics").status, 200);
}

TEST(AdminAccess, AdminTokenAllGuardsTheReadsButNotTheDashboardsFiles) {
  auto server =
      SluiceProcess::start(kYaml + "admin_token_file: admin.token\nadmin_token_all: true\n",
                           "127.0.0.1", {{"admin.token", "4dm1n-s3cret"}});
  ASSERT_NE(server, nullptr);
  for (const std::string target :
       {"/admin/stats", "/admin/history", "/metrics", "/healthz", "/readyz"}) {
    EXPECT_EQ(server->admin_get(target).status, 401) << target;
    EXPECT_EQ(
        server->admin_request("GET", target, {{"Authorization", "Bearer 4dm1n-s3cret"}}).status,
        200)
        << target;
  }
  // The page and its script hold no data; the script asks for the token.
  EXPECT_EQ(server->admin_get("/dashboard").status, 200);
  EXPECT_EQ(server->admin_get("/dashboard/dashboard.js").status, 200);
}

TEST(AdminAccess, AnAdminPortReachableFromOtherHostsWithoutATokenIsRefusedAtLoad) {
  std::string log;
  const int code = SluiceProcess::run_and_capture("listen: 127.0.0.1:0\nadmin: 0.0.0.0:0\n", &log);
  EXPECT_EQ(code, 1);
  EXPECT_NE(log.find("sluice.yaml:2:8: admin: an admin port on \"0.0.0.0\" is reachable from other "
                     "hosts"),
            std::string::npos)
      << log;
}

}  // namespace
}  // namespace sluice::test
