// policy::to_yaml (src/policy/config_yaml.h): the server config written back
// as YAML that loads to an equal Config, and what "equal" means (config.h:
// positions in the file are not compared).
#include "policy/config_yaml.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "policy/config_loader.h"
#include "source_dir.h"
#include "tls/test_certs.h"

namespace sluice::policy {
namespace {

using sluice::test::source_dir;

std::string errors_of(const LoadResult& r) {
  std::string all;
  for (const ConfigError& e : r.errors) all += e.text() + "\n";
  return all;
}

Config valid(std::string_view yaml, const std::string& name = "t.yaml") {
  LoadResult r = load_config_string(yaml, name);
  EXPECT_TRUE(r.config.has_value()) << errors_of(r);
  return r.config ? *r.config : Config{};
}

// Written, read back, written again: equal configs and the same text.
void expect_round_trip(const Config& config, const std::string& name) {
  const std::string yaml = to_yaml(config);
  const LoadResult back = load_config_string(yaml, name);
  ASSERT_TRUE(back.config.has_value()) << errors_of(back) << yaml;
  EXPECT_TRUE(*back.config == config) << yaml;
  EXPECT_EQ(to_yaml(*back.config), yaml);
}

TEST(ConfigYaml, EveryExampleConfigRoundTrips) {
  const std::vector<std::string> examples = {"quickstart.yaml", "tiered-api.yaml", "gateway.yaml",
                                             "nginx/sluice.yaml", "envoy/sluice.yaml"};
  for (const std::string& example : examples) {
    SCOPED_TRACE(example);
    const std::string path = (source_dir() / "examples" / example).string();
    const LoadResult loaded = load_config_file(path);
    ASSERT_TRUE(loaded.config.has_value()) << errors_of(loaded);
    expect_round_trip(*loaded.config, path);
  }
}

TEST(ConfigYaml, WritesEverySettingInTheLoadersGrammar) {
  const Config c = valid(R"(
policies:
  login: {algorithm: gcra, capacity: 5, refill_rate: 3/1500ms}
routes:
  - match: GET /api/users/{id}/
    key: ip+header:X-Api-Key
    limits: [login, {algorithm: sliding_log, limit: 10, window: 2w}]
)");
  EXPECT_EQ(to_yaml(c), R"(listen: "127.0.0.1:8080"
admin: "127.0.0.1:9090"
admin_token_all: false
admin_hosts:
  []
admin_read_only: false
store:
  backend: memory
  max_keys: 1000000
  redis:
    addresses:
      - "127.0.0.1:6379"
    database: 0
    cluster: false
    timeout: 5ms
    on_failure: allow
    time_source: redis
    deny_cache: true
    mode: exact
client_ip:
  header: x-forwarded-for
  trusted_proxies:
    []
  ipv6_prefix: 64
access:
  allow:
    []
  deny:
    []
headers: [legacy]
case_insensitive_paths: false
paths:
  escaped_slashes: reject
  backslash: reject
  matrix_params: strip
  forward: normalized
auth_deny_status: 429
deny:
  status: 429
policies:
  login: {algorithm: gcra, capacity: 5, refill_rate: 3/1500ms}
routes:
  - match: "GET /api/users/{id}/"
    key: "ip+header:x-api-key"
    limits:
      - "login"
      - {algorithm: sliding_log, limit: 10, window: 2w}
server:
  max_tls_handshakes: 512
  max_header_bytes: 16384
  max_body_bytes: 1048576
  header_timeout: 10s
  idle_timeout: 1m
  threads: 0
  shutdown_grace: 10s
logging:
  level: info
  format: text
  access_log: false
  redact_keys: true
  denial_log_per_second: 1
watch_config: false
http2: false
)");
  expect_round_trip(c, "t.yaml");
}

TEST(ConfigYaml, RedisUserAndPasswordGoInAnEscapedUrl) {
  const Config c = valid(R"(
store:
  backend: redis
  redis:
    url: "redis://us%40er:p%3Aw%25d@[::1]:6380/2"
    time_source: local
)");
  EXPECT_EQ(c.store.redis.username, "us@er");
  EXPECT_EQ(c.store.redis.password, "p:w%d");
  const std::string yaml = to_yaml(c);
  EXPECT_NE(yaml.find(R"(url: "redis://us%40er:p%3Aw%25d@[::1]:6380/2")"), std::string::npos)
      << yaml;
  expect_round_trip(c, "t.yaml");
}

// A %-escape can put bytes that are not UTF-8 in the password; YAML text
// cannot hold them (yaml-cpp wrote U+FFFD), so the URL carries them. Found by
// fuzz/config.cc.
// The password stays in its file: to_yaml names the file.
TEST(ConfigYaml, ARedisUrlFileIsWrittenAsTheFile) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("sluice-yaml-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "redis-url") << "rediss://user:hunter2@redis.internal:6380/1\n";
  const std::string name = (dir / "sluice.yaml").string();
  const Config c = valid("store:\n  backend: redis\n  redis:\n    url_file: redis-url\n", name);
  EXPECT_EQ(c.store.redis.password, "hunter2");
  const std::string yaml = to_yaml(c);
  EXPECT_NE(yaml.find("url_file: \"" + (dir / "redis-url").string() + "\""), std::string::npos)
      << yaml;
  EXPECT_EQ(yaml.find("hunter2"), std::string::npos) << yaml;
  expect_round_trip(c, name);
  std::filesystem::remove_all(dir);
}

TEST(ConfigYaml, APasswordThatIsNotUtf8GoesInAUrl) {
  const Config c = valid(R"(
store:
  backend: redis
  redis:
    url: "redis://p%8Aw,@[::1]:63/2"
)");
  EXPECT_EQ(c.store.redis.password, "p\x8Aw,");
  const std::string yaml = to_yaml(c);
  EXPECT_NE(yaml.find(R"(url: "redis://:p%8Aw%2C@[::1]:63/2")"), std::string::npos) << yaml;
  expect_round_trip(c, "t.yaml");
}

TEST(ConfigYaml, ServerBoundsRoundTrip) {
  const Config c = valid("server: {max_connections: 800, max_held: 50, max_tls_handshakes: 32}\n");
  const std::string yaml = to_yaml(c);
  EXPECT_NE(yaml.find("  max_connections: 800\n  max_held: 50\n  max_tls_handshakes: 32\n"),
            std::string::npos)
      << yaml;
  expect_round_trip(c, "t.yaml");
}

// A file named `name` in the temporary folder holding `content`.
std::filesystem::path temp_file(const std::string& name, const std::string& content) {
  const std::filesystem::path path = std::filesystem::temp_directory_path() / name;
  std::ofstream(path) << content;
  return path;
}

TEST(ConfigYaml, DenyAnswersCookieAndQueryKeysAndRedactionRoundTrip) {
  const std::filesystem::path body =
      temp_file("sluice_config_yaml_test_deny.html", "<p>slow down</p>\n");
  const Config c = valid("deny: {status: 503, body_file: \"" + body.string() +
                         "\", content_type: text/html}\n"
                         "logging: {redact_keys: false}\n"
                         "routes:\n"
                         "  - match: GET /a\n"
                         "    key: cookie:session+query:api_key\n"
                         "    limits: [{capacity: 1, refill_rate: 1/s}]\n");
  EXPECT_EQ(c.deny.status, 503);
  EXPECT_EQ(c.deny.content_type, "text/html");
  EXPECT_FALSE(c.logging.redact_keys);
  expect_round_trip(c, "t.yaml");
  std::filesystem::remove(body);
}

TEST(ConfigYaml, JwtSectionAndJwtKeysRoundTrip) {
  const std::filesystem::path secret =
      temp_file("sluice_config_yaml_test_jwt.secret", "hs256-secret\n");
  const Config c = valid("jwt: {secret_file: \"" + secret.string() +
                         "\", issuer: \"https://auth.example.com\", audience: api}\n"
                         "routes:\n"
                         "  - match: GET /a\n"
                         "    key: jwt:sub+ip\n"
                         "    limits: [{capacity: 1, refill_rate: 1/s}]\n");
  ASSERT_TRUE(c.jwt.has_value());
  expect_round_trip(c, "t.yaml");
  std::filesystem::remove(secret);
}

TEST(ConfigYaml, TlsOnListenAndToRedisRoundTrip) {
  const testing::TestCerts certs;
  ASSERT_TRUE(certs.ok()) << certs.error();
  const Config c = valid("tls: {cert: " + certs.server_cert() + ", key: " + certs.server_key() +
                         ", min_version: \"1.3\"}\n"
                         "store:\n"
                         "  backend: redis\n"
                         "  redis:\n"
                         "    url: rediss://alice:pw@127.0.0.1:6380\n"
                         "    tls: {ca_file: " +
                         certs.ca() + ", cert_file: " + certs.client_cert() +
                         ", key_file: " + certs.client_key() + ", server_name: localhost}\n");
  ASSERT_TRUE(c.tls.has_value());
  EXPECT_TRUE(c.tls->min_tls13);
  EXPECT_TRUE(c.store.redis.tls.enabled);
  const std::string yaml = to_yaml(c);
  EXPECT_NE(yaml.find(R"(url: "rediss://alice:pw@127.0.0.1:6380/0")"), std::string::npos) << yaml;
  expect_round_trip(c, "t.yaml");
  // Beside addresses, the block alone turns TLS on (the system's CAs).
  const Config bare =
      valid("store: {backend: redis, redis: {addresses: [127.0.0.1:6380], tls: {}}}\n");
  EXPECT_TRUE(bare.store.redis.tls.enabled);
  expect_round_trip(bare, "t.yaml");
}

TEST(ConfigYaml, PlansConsumersAndPlanInLimitsRoundTrip) {
  const std::filesystem::path consumers =
      temp_file("sluice_config_yaml_test_consumers.yaml", "key-a: pro\n\"b:c\": free\n");
  const std::filesystem::path secret =
      temp_file("sluice_config_yaml_test_plans.secret", "hs256-secret\n");
  for (const std::string unknown : {"free", "reject"}) {
    SCOPED_TRACE(unknown);
    const Config c = valid(R"(
upstream: http://127.0.0.1:3000
jwt: {secret_file: ")" + secret.string() +
                           R"("}
plans:
  free: [{capacity: 2, refill_rate: 1/h}]
  pro: [{capacity: 5, refill_rate: 1/h}, {algorithm: sliding_window, limit: 10, window: 1m, block: 5m, count_status: [200]}]
consumers: {key: jwt:sub, file: ")" +
                           consumers.string() + R"(", unknown: )" + unknown + R"(}
policies:
  search: {capacity: 9, refill_rate: 1/s}
default:
  limits: [{capacity: 1, refill_rate: 1/s}, plan]
routes:
  - match: GET /a
    limits: [plan]
  - match: GET /b
    limits: [search, plan, {capacity: 3, refill_rate: 1/s}]
)");
    ASSERT_EQ(c.plans.size(), 2u);
    EXPECT_EQ(c.routes[1].plan_at, 1u);
    EXPECT_EQ(c.default_route->plan_at, 1u);
    expect_round_trip(c, "t.yaml");
    const std::string yaml = to_yaml(c);
    EXPECT_NE(yaml.find("limits:\n      - \"search\"\n      - plan\n"), std::string::npos) << yaml;
    EXPECT_NE(yaml.find("unknown: \"" + unknown + "\""), std::string::npos) << yaml;
  }
  std::filesystem::remove(consumers);
  std::filesystem::remove(secret);
}

// `name:` is written where it differs from the default (the route's name,
// ROUTE#i when it has several inline limits, PLAN#i; i counts `plan` and
// policy names too), and read back as written.
TEST(ConfigYaml, LimitNamesRoundTrip) {
  const std::filesystem::path consumers =
      temp_file("sluice_config_yaml_test_named.yaml", "key-a: free\n");
  const Config c = valid(R"(
policies:
  search: {capacity: 9, refill_rate: 1/s}
plans:
  free: [{capacity: 2, refill_rate: 1/h}, {name: free-day, capacity: 20, refill_rate: 1/h}]
consumers: {key: header:x-api-key, file: ")" +
                         consumers.string() + R"(", unknown: free}
default:
  limits: [{name: everyone, capacity: 1, refill_rate: 1/s}]
routes:
  - match: GET /b
    limits: [search, plan, {capacity: 3, refill_rate: 1/s}, {name: "b:minute", capacity: 4, refill_rate: 1/s}]
)");
  ASSERT_EQ(c.routes[0].limits.size(), 3u);
  EXPECT_EQ(c.routes[0].limits[1].name, "GET /b#2");
  EXPECT_EQ(c.routes[0].limits[2].counter_name(), "GET /b#3");
  EXPECT_EQ(c.routes[0].limits[2].name, "b:minute");
  expect_round_trip(c, "t.yaml");
  const std::string yaml = to_yaml(c);
  EXPECT_NE(yaml.find("- {name: \"free-day\", algorithm: token_bucket, capacity: 20"),
            std::string::npos)
      << yaml;
  EXPECT_NE(yaml.find("- {name: \"everyone\", algorithm: token_bucket, capacity: 1,"),
            std::string::npos)
      << yaml;
  EXPECT_NE(yaml.find("- {name: \"b:minute\", algorithm: token_bucket, capacity: 4,"),
            std::string::npos)
      << yaml;
  // Default names are not written.
  EXPECT_EQ(yaml.find("name: \"free#0\""), std::string::npos) << yaml;
  EXPECT_EQ(yaml.find("name: \"GET /b#2\""), std::string::npos) << yaml;
  // A renamed limit is another config.
  Config renamed = c;
  renamed.routes[0].limits[2].name = "b:hour";
  EXPECT_FALSE(renamed == c);
  std::filesystem::remove(consumers);
}

TEST(ConfigYaml, AccessListsRoundTrip) {
  const Config c =
      valid("access: {allow: [10.0.0.0/8, \"2001:db8::/32\"], deny: [203.0.113.0/24]}\n");
  ASSERT_EQ(c.access.allow.size(), 2u);
  ASSERT_EQ(c.access.deny.size(), 1u);
  EXPECT_EQ(c.access.deny[0].text, "203.0.113.0/24");
  expect_round_trip(c, "t.yaml");
}

TEST(ConfigYaml, ClientIpHeaderRoundTrips) {
  for (const char* header : {"x-forwarded-for", "x-real-ip", "forwarded"}) {
    const Config c = valid(std::string("client_ip: {header: ") + header +
                           ", trusted_proxies: [127.0.0.1/32]}\n");
    EXPECT_NE(to_yaml(c).find(std::string("\n  header: ") + header + "\n"), std::string::npos)
        << to_yaml(c);
    expect_round_trip(c, "t.yaml");
  }
}

TEST(ConfigYaml, CountStatusAndBlockRoundTrip) {
  const Config c = valid(R"(
upstream: http://127.0.0.1:3000
policies:
  login: {algorithm: fixed_window, limit: 5, window: 15m, count_status: [401, 403], block: 30m}
routes:
  - match: POST /api/login
    limits: [login, {capacity: 10, refill_rate: 1/m, count_status: [401], block: 90s}]
)");
  ASSERT_EQ(c.routes.size(), 1u);
  EXPECT_EQ(c.routes[0].limits[1].count_status, (std::vector<int>{401}));
  expect_round_trip(c, "t.yaml");
}

TEST(ConfigYaml, ShadowRoutesRoundTrip) {
  const Config c = valid(R"(
default: {shadow: true, limits: [{capacity: 5, refill_rate: 1/s}]}
routes:
  - match: GET /a
    shadow: true
    limits: [{capacity: 1, refill_rate: 1/s}]
  - match: GET /b
    shadow: false
    limits: [{capacity: 1, refill_rate: 1/s}]
)");
  EXPECT_TRUE(c.default_route->shadow);
  EXPECT_TRUE(c.routes[0].shadow);
  EXPECT_FALSE(c.routes[1].shadow);
  expect_round_trip(c, "t.yaml");
}

TEST(ConfigYaml, ARouteNamedApartKeepsItsName) {
  const Config c = valid(R"(
routes:
  - match: "* /static/*"
    name: assets
    key: global
    limits: [{limit: 3, window: 90s, algorithm: fixed_window}]
default:
  key: header:x-user
  limits: [{capacity: 1, refill_rate: 1/d}]
)");
  const std::string yaml = to_yaml(c);
  EXPECT_NE(yaml.find("  - match: \"* /static/*\"\n    name: \"assets\"\n"), std::string::npos)
      << yaml;
  expect_round_trip(c, "t.yaml");
}

TEST(ConfigYaml, EqualityIgnoresWhereThingsAreWritten) {
  const Config a = valid(
      "policies:\n  p: {capacity: 2, refill_rate: 1/s}\nroutes:\n"
      "  - {match: GET /a, limits: [p]}\n");
  const Config b = valid(
      "\n\n\npolicies: {p: {capacity: 2, refill_rate: 1/1000ms}}\n"
      "routes: [{match: GET /a, limits: [p]}]\n");
  EXPECT_NE(a.routes.front().line, b.routes.front().line);
  EXPECT_TRUE(a == b);
  const Config c = valid(
      "policies:\n  p: {capacity: 3, refill_rate: 1/s}\nroutes:\n"
      "  - {match: GET /a, limits: [p]}\n");
  EXPECT_FALSE(a == c);
}

}  // namespace
}  // namespace sluice::policy
