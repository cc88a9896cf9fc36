// The YAML config loader (src/policy/config_loader.h): what a valid file
// means, and the exact `file:line:col: path: message` of every kind of error.
#include "policy/config_loader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace sluice::policy {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

std::vector<std::string> errors_of(std::string_view yaml) {
  const LoadResult r = load_config_string(yaml, "t.yaml");
  std::vector<std::string> out;
  for (const ConfigError& e : r.errors) out.push_back(e.text());
  EXPECT_EQ(r.config.has_value(), r.errors.empty());
  return out;
}

// Loads a file that must be valid; prints its errors otherwise.
Config valid(std::string_view yaml) {
  LoadResult r = load_config_string(yaml, "t.yaml");
  std::string all;
  for (const ConfigError& e : r.errors) all += e.text() + "\n";
  EXPECT_TRUE(r.config.has_value()) << all;
  return r.config ? *r.config : Config{};
}

using Errors = std::vector<std::string>;

// A consumers file that puts one consumer on plan `free`: its path.
std::string free_consumers_file() {
  const std::string path =
      (std::filesystem::temp_directory_path() / "sluice_config_loader_test_consumers.yaml")
          .string();
  std::ofstream(path) << "a: free\n";
  return path;
}

// ---- valid files ---------------------------------------------------------

TEST(ConfigLoader, EveryDefaultAppliesToAnEmptyMapping) {
  const Config c = valid("{}");
  EXPECT_EQ(c.source, "t.yaml");
  EXPECT_EQ(c.listen.text(), "127.0.0.1:8080");
  EXPECT_EQ(c.admin.text(), "127.0.0.1:9090");
  EXPECT_FALSE(c.grpc.has_value());
  EXPECT_FALSE(c.upstream.has_value());
  EXPECT_EQ(c.store.backend, StoreConfig::Backend::kMemory);
  EXPECT_EQ(c.store.max_keys, 1'000'000u);
  ASSERT_EQ(c.store.redis.addresses.size(), 1u);
  EXPECT_EQ(c.store.redis.addresses[0].text(), "127.0.0.1:6379");
  EXPECT_FALSE(c.store.redis.cluster);
  EXPECT_EQ(c.store.redis.timeout, milliseconds(5));
  EXPECT_TRUE(c.store.redis.on_failure_allow);
  EXPECT_TRUE(c.store.redis.time_source_redis);
  EXPECT_TRUE(c.store.redis.deny_cache);
  EXPECT_TRUE(c.client_ip.trusted_proxies.empty());
  EXPECT_EQ(c.client_ip.header, ClientIpConfig::Header::kXForwardedFor);
  EXPECT_EQ(c.client_ip.ipv6_prefix, 64);
  EXPECT_TRUE(c.headers.legacy);
  EXPECT_FALSE(c.headers.draft);
  EXPECT_FALSE(c.case_insensitive_paths);
  EXPECT_EQ(c.auth_deny_status, 429);
  EXPECT_TRUE(c.policies.empty());
  EXPECT_FALSE(c.default_route.has_value());
  EXPECT_TRUE(c.routes.empty());
  EXPECT_EQ(c.server.max_header_bytes, 16u * 1024);
  EXPECT_EQ(c.server.max_body_bytes, 1024u * 1024);
  EXPECT_EQ(c.server.header_timeout, seconds(10));
  EXPECT_EQ(c.server.idle_timeout, seconds(60));
  EXPECT_EQ(c.server.threads, 0u);
  EXPECT_EQ(c.server.shutdown_grace, seconds(10));
  EXPECT_EQ(c.logging.level, "info");
  EXPECT_FALSE(c.logging.access_log);
  EXPECT_EQ(c.logging.denial_log_per_second, 1.0);
  EXPECT_FALSE(c.watch_config);
}

TEST(ConfigLoader, AnInlineLimitDefaultsToTokenBucketKeyedByIp) {
  const Config c = valid(R"(routes:
  - match: GET /api/search
    limits: [{capacity: 20, refill_rate: 5/s}]
)");
  ASSERT_EQ(c.routes.size(), 1u);
  const Route& r = c.routes[0];
  EXPECT_EQ(r.name, "GET /api/search");
  EXPECT_EQ(r.method, "GET");
  EXPECT_EQ(r.pattern, "/api/search");
  EXPECT_EQ(r.line, 2);
  EXPECT_EQ(r.key.text, "ip");
  ASSERT_EQ(r.key.parts.size(), 1u);
  EXPECT_EQ(r.key.parts[0].kind, KeyPart::Kind::kIp);
  ASSERT_EQ(r.limits.size(), 1u);
  EXPECT_EQ(r.limits[0].name, "GET /api/search");  // one inline limit: no #index
  EXPECT_FALSE(r.limits[0].named_policy);
  EXPECT_EQ(r.limits[0].limit, *Limit::token_bucket(20, 5, seconds(1)));
}

TEST(ConfigLoader, RouteLimitNamesArePolicyNamesOrRouteNameWithIndex) {
  const Config c = valid(R"(policies:
  login: {capacity: 5, refill_rate: 1/s}
routes:
  - match: post   /api/auth/login
    limits: [login, {algorithm: fixed_window, limit: 100, window: 1h},
             {algorithm: sliding_log, limit: 10, window: 1m}]
  - match: GET /x
    name: x-route
    limits: [{algorithm: gcra, capacity: 3, refill_rate: 3/2s}]
)");
  ASSERT_EQ(c.policies.size(), 1u);
  EXPECT_EQ(c.policies[0].name, "login");
  ASSERT_EQ(c.routes.size(), 2u);
  const Route& login = c.routes[0];
  EXPECT_EQ(login.name, "POST /api/auth/login");  // method upper-cased, single space
  ASSERT_EQ(login.limits.size(), 3u);
  EXPECT_EQ(login.limits[0].name, "login");
  EXPECT_TRUE(login.limits[0].named_policy);
  EXPECT_EQ(login.limits[0].limit, c.policies[0].limit);
  EXPECT_EQ(login.limits[1].name, "POST /api/auth/login#1");  // index in the limits list
  EXPECT_EQ(login.limits[1].limit, *Limit::fixed_window(100, std::chrono::hours(1)));
  EXPECT_EQ(login.limits[2].name, "POST /api/auth/login#2");
  EXPECT_EQ(login.limits[2].limit, *Limit::sliding_log(10, std::chrono::minutes(1)));
  EXPECT_EQ(c.routes[1].name, "x-route");
  EXPECT_EQ(c.routes[1].limits[0].name, "x-route");
  EXPECT_EQ(c.routes[1].limits[0].limit, *Limit::gcra(3, 3, seconds(2)));
}

// `name:` names what a denial reports; the store keys stay those of the
// position, so a renamed limit keeps its counts.
TEST(ConfigLoader, ALimitsNameKeyNamesItAndKeepsItsCounter) {
  const Config c = valid(R"(policies:
  login: {capacity: 5, refill_rate: 1/s}
plans:
  free: [{name: free-minute, limit: 10, algorithm: fixed_window, window: 1m},
         {capacity: 100, refill_rate: 1/s}]
consumers: {key: header:x-api-key, file: )" +
                         free_consumers_file() + R"(, unknown: free}
routes:
  - match: GET /a
    limits: [login, {name: per-second, capacity: 2, refill_rate: 2/s},
             {name: "burst.1:x_y-z", capacity: 9, refill_rate: 9/s}, plan]
  - match: GET /b
    limits: [{name: only, capacity: 2, refill_rate: 2/s}]
)");
  ASSERT_EQ(c.routes.size(), 2u);
  const Route& a = c.routes[0];
  ASSERT_EQ(a.limits.size(), 3u);
  EXPECT_EQ(a.limits[0].name, "login");
  EXPECT_EQ(a.limits[1].name, "per-second");
  EXPECT_EQ(a.limits[1].counter_name(), "GET /a#1");
  EXPECT_EQ(a.limits[2].name, "burst.1:x_y-z");
  EXPECT_EQ(a.limits[2].counter_name(), "GET /a#2");
  EXPECT_EQ(c.routes[1].limits[0].name, "only");
  EXPECT_EQ(c.routes[1].limits[0].counter_name(), "GET /b");
  ASSERT_EQ(c.plans.size(), 1u);
  ASSERT_EQ(c.plans[0].limits.size(), 2u);
  EXPECT_EQ(c.plans[0].limits[0].name, "free-minute");
  EXPECT_EQ(c.plans[0].limits[0].counter_name(), "free#0");
  EXPECT_EQ(c.plans[0].limits[1].name, "free#1");
  EXPECT_EQ(c.plans[0].limits[1].counter_name(), "free#1");
}

TEST(ConfigLoader, LimitNameErrors) {
  const std::string long_name(65, 'n');
  EXPECT_EQ(
      errors_of(R"(policies:
  p: {name: q, capacity: 5, refill_rate: 1/s}
  ok: {capacity: 5, refill_rate: 1/s}
routes:
  - match: GET /a
    limits: [{name: "", capacity: 2, refill_rate: 2/s},
             {name: has space, capacity: 2, refill_rate: 2/s},
             {name: )" +
                long_name + R"(, capacity: 2, refill_rate: 2/s},
             {name: [x], capacity: 2, refill_rate: 2/s}]
  - match: GET /b
    limits: [{name: twice, capacity: 2, refill_rate: 2/s}, {name: twice, capacity: 3, refill_rate: 3/s}]
  - match: GET /c
    limits: [ok, {name: ok, capacity: 2, refill_rate: 2/s}]
)"),
      (Errors{"t.yaml:2:13: policies.p.name: a policy's limit is named by the policy: remove "
              "`name`",
              "t.yaml:6:21: routes[0].limits[0].name: a limit name is 1 to 64 letters, digits, "
              "'_', '-', '.' and ':', got \"\"",
              "t.yaml:7:21: routes[0].limits[1].name: a limit name is 1 to 64 letters, digits, "
              "'_', '-', '.' and ':', got \"has space\"",
              "t.yaml:8:21: routes[0].limits[2].name: a limit name is 1 to 64 letters, digits, "
              "'_', '-', '.' and ':', got \"" +
                  long_name + "\"",
              "t.yaml:9:21: routes[0].limits[3].name: must be a limit name like per-minute, got a "
              "list",
              "t.yaml:11:67: routes[1].limits[1].name: two limits of this list are named "
              "\"twice\" (the other at t.yaml:11:21): a denial must name one limit",
              "t.yaml:13:25: routes[2].limits[1].name: two limits of this list are named \"ok\" "
              "(the other at t.yaml:13:14): a denial must name one limit"}));
}

TEST(ConfigLoader, ARouteThatListsPlanNamesItsLimitsApartFromThePlans) {
  EXPECT_EQ(errors_of(R"(plans:
  free: [{name: minute, capacity: 10, refill_rate: 1/s}, {name: minute, capacity: 1, refill_rate: 1/s}]
consumers: {key: header:x-api-key, file: )" +
                      free_consumers_file() + R"(, unknown: free}
routes:
  - match: GET /a
    limits: [{name: minute, capacity: 2, refill_rate: 2/s}, plan]
)"),
            (Errors{"t.yaml:2:65: plans.free[1].name: two limits of this list are named "
                    "\"minute\" (the other at t.yaml:2:17): a denial must name one limit",
                    "t.yaml:6:21: routes[0].limits[0].name: this route lists `plan`, and plan "
                    "\"free\" has a limit named \"minute\" too (at t.yaml:2:10): a denial must "
                    "name one limit"}));
}

TEST(ConfigLoader, PoliciesMayBeDefinedAfterTheRoutesThatUseThem) {
  const Config c = valid(R"(routes:
  - match: GET /a
    limits: [p]
policies:
  p: {algorithm: sliding_window, limit: 60, window: 1m}
)");
  EXPECT_EQ(c.routes[0].limits[0].limit, *Limit::sliding_window(60, std::chrono::minutes(1)));
}

TEST(ConfigLoader, DefaultRouteMatchesEverything) {
  const Config c = valid(R"(default:
  key: header:X-Api-Key+ip
  limits: [{capacity: 100, refill_rate: 20/s}]
)");
  ASSERT_TRUE(c.default_route.has_value());
  EXPECT_EQ(c.default_route->name, "default");
  EXPECT_EQ(c.default_route->method, "*");
  EXPECT_EQ(c.default_route->pattern, "/*");
  EXPECT_EQ(c.default_route->key.text, "header:x-api-key+ip");
  EXPECT_EQ(c.default_route->limits[0].name, "default");
}

TEST(ConfigLoader, EveryTopLevelSettingIsRead) {
  const Config c = valid(R"(listen: "[::1]:0"
admin: 127.0.0.1:9191
grpc: 127.0.0.1:8081
rls:
  config_dir: /etc/ratelimit
upstream:
  url: http://127.0.0.1:3000/base/
  connect_timeout: 250ms
  timeout: 2s
  max_idle_connections: 8
store:
  backend: redis
  max_keys: 1_000
  redis:
    url: redis://:pw@10.0.0.1:7000/3
    timeout: 20ms
    on_failure: deny
    time_source: local
    deny_cache: false
client_ip:
  header: forwarded
  trusted_proxies: [10.0.0.0/8, "2001:db8::/32", 127.0.0.1]
  ipv6_prefix: 56
headers: [draft]
case_insensitive_paths: true
auth_deny_status: 403
server:
  max_header_bytes: 8KiB
  max_body_bytes: 65536
  header_timeout: 5s
  idle_timeout: 1m
  threads: 2
  shutdown_grace: 0s
logging:
  level: debug
  access_log: true
  denial_log_per_second: 0.5
)");
  EXPECT_EQ(c.listen.text(), "[::1]:0");
  EXPECT_EQ(c.admin.port, 9191);
  ASSERT_TRUE(c.grpc.has_value());
  EXPECT_EQ(c.grpc->text(), "127.0.0.1:8081");
  ASSERT_TRUE(c.rls.has_value());
  EXPECT_EQ(c.rls->config_dir, "/etc/ratelimit");
  ASSERT_TRUE(c.upstream.has_value());
  EXPECT_EQ(c.upstream->address.text(), "127.0.0.1:3000");
  EXPECT_EQ(c.upstream->base_path, "/base");
  EXPECT_EQ(c.upstream->connect_timeout, milliseconds(250));
  EXPECT_EQ(c.upstream->timeout, seconds(2));
  EXPECT_EQ(c.upstream->max_idle_connections, 8u);
  EXPECT_EQ(c.store.backend, StoreConfig::Backend::kRedis);
  EXPECT_EQ(c.store.max_keys, 1000u);
  ASSERT_EQ(c.store.redis.addresses.size(), 1u);
  EXPECT_EQ(c.store.redis.addresses[0].text(), "10.0.0.1:7000");
  EXPECT_EQ(c.store.redis.password, "pw");
  EXPECT_EQ(c.store.redis.database, 3);
  EXPECT_EQ(c.store.redis.timeout, milliseconds(20));
  EXPECT_FALSE(c.store.redis.on_failure_allow);
  EXPECT_FALSE(c.store.redis.time_source_redis);
  EXPECT_FALSE(c.store.redis.deny_cache);
  ASSERT_EQ(c.client_ip.trusted_proxies.size(), 3u);
  EXPECT_EQ(c.client_ip.trusted_proxies[0].prefix_length, 104);  // IPv4 /8 over 16 bytes
  EXPECT_EQ(c.client_ip.trusted_proxies[1].prefix_length, 32);
  EXPECT_EQ(c.client_ip.trusted_proxies[2].prefix_length, 128);
  EXPECT_EQ(c.client_ip.ipv6_prefix, 56);
  EXPECT_EQ(c.client_ip.header, ClientIpConfig::Header::kForwarded);
  EXPECT_FALSE(c.headers.legacy);
  EXPECT_TRUE(c.headers.draft);
  EXPECT_TRUE(c.case_insensitive_paths);
  EXPECT_EQ(c.auth_deny_status, 403);
  EXPECT_EQ(c.server.max_header_bytes, 8192u);
  EXPECT_EQ(c.server.max_body_bytes, 65536u);
  EXPECT_EQ(c.server.header_timeout, seconds(5));
  EXPECT_EQ(c.server.idle_timeout, seconds(60));
  EXPECT_EQ(c.server.threads, 2u);
  EXPECT_EQ(c.server.shutdown_grace, seconds(0));
  EXPECT_EQ(c.logging.level, "debug");
  EXPECT_TRUE(c.logging.access_log);
  EXPECT_EQ(c.logging.denial_log_per_second, 0.5);
}

TEST(ConfigLoader, RedisAddressesAndClusterAsSeparateKeys) {
  const Config c = valid(R"(store:
  redis:
    addresses: [10.0.0.1:7000, "[::1]:7001"]
    cluster: true
    password: secret
)");
  ASSERT_EQ(c.store.redis.addresses.size(), 2u);
  EXPECT_EQ(c.store.redis.addresses[1].text(), "[::1]:7001");
  EXPECT_TRUE(c.store.redis.cluster);
  EXPECT_EQ(c.store.redis.password, "secret");
}

TEST(ConfigLoader, HeaderStyles) {
  HeaderModes h = valid("headers: [legacy, draft]").headers;
  EXPECT_TRUE(h.legacy && h.draft);
  h = valid("headers: none").headers;
  EXPECT_FALSE(h.legacy || h.draft);
  h = valid("headers: []").headers;
  EXPECT_FALSE(h.legacy || h.draft);
  h = valid("headers: draft").headers;
  EXPECT_TRUE(!h.legacy && h.draft);
}

TEST(ConfigLoader, UpstreamAsAString) {
  const Config c = valid("upstream: http://localhost:3000");
  EXPECT_EQ(c.upstream->url, "http://localhost:3000");
  EXPECT_EQ(c.upstream->connect_timeout, seconds(1));
  EXPECT_EQ(c.upstream->timeout, seconds(30));
}

// ---- errors: file level --------------------------------------------------

TEST(ConfigLoader, MissingFileIsOneClearError) {
  const LoadResult r = load_config_file("/nonexistent/sluice.yaml");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_FALSE(r.config.has_value());
  EXPECT_EQ(r.errors[0].text(),
            "/nonexistent/sluice.yaml: cannot open the config file: No such file or directory");
}

TEST(ConfigLoader, EmptyFileIsAnError) {
  const Errors expected = {
      "t.yaml: the file is empty; expected a mapping of settings such as listen:, policies: and "
      "routes: (see docs/CONFIG.md)"};
  EXPECT_EQ(errors_of(""), expected);
  EXPECT_EQ(errors_of("# only a comment\n\n"), expected);
}

TEST(ConfigLoader, MalformedYamlReportsTheParserPosition) {
  EXPECT_EQ(errors_of("routes: [1, 2\nlisten: x\n"),
            Errors{"t.yaml:2:7: YAML syntax error: end of sequence flow not found"});
  EXPECT_EQ(errors_of("listen: a: b\n"),
            Errors{"t.yaml:1:10: YAML syntax error: illegal map value"});
}

// An unquoted `*` (a route for any method) reads as a YAML alias: the error
// says to quote it, and the rest of the file is still checked.
TEST(ConfigLoader, AnUnquotedStarSuggestsQuotingAndTheOtherErrorsAreStillReported) {
  EXPECT_EQ(errors_of(R"(routes:
  - match: * /static/*   # any method
    limits: [{capacity: 10, refill_rate: 10/s}]
  - match: GET /b
    limits: [{capacity: 5, refill_rate: 1/q}]
  - match: *
    limits: [{capacity: 5, refill_rate: 1/s}]
)"),
            (Errors{"t.yaml:2:12: a plain `*` starts a YAML alias: quote the value, as in match: "
                    "\"* /static/*\"",
                    "t.yaml:5:41: routes[1].limits[0].refill_rate: must be a rate like 10/s, "
                    "100/m, 1000/h, 5/d or 10/2s, got \"1/q\" (unknown unit \"q\"; use ms, s, m, "
                    "h, d or w)",
                    "t.yaml:6:12: a plain `*` starts a YAML alias: quote the value, as in match: "
                    "\"* /static/*\"",
                    "t.yaml:6:12: routes[2].match: must be \"METHOD /path\" like \"GET "
                    "/api/users/{id}\" or \"* /static/*\", got \"*\""}));
  // Only where a value starts: anything else stays a syntax error.
  EXPECT_EQ(errors_of("routes: [*a]\n"),
            (Errors{"t.yaml:1:10: a plain `*` starts a YAML alias: quote the value, as in match: "
                    "\"* /static/*\"",
                    "t.yaml:1:10: routes[0]: must be a route mapping with match: and limits:, "
                    "got \"*a\""}));
}

// What people write in nginx or other limiters' words.
TEST(ConfigLoader, WordsFromOtherRateLimitersSuggestSluicesOwn) {
  EXPECT_EQ(errors_of("policies:\n  p: {burst: 5, refill_rate: 10r/s}\n"),
            (Errors{"t.yaml:2:6: policies.p: token_bucket needs `capacity`",
                    "t.yaml:2:7: policies.p.burst: unknown key; did you mean `capacity`?",
                    "t.yaml:2:30: policies.p.refill_rate: must be a rate like 10/s, 100/m, "
                    "1000/h, 5/d or 10/2s, got \"10r/s\"; did you mean \"10/s\"? (nginx's r/s "
                    "is /s here)"}));
}

TEST(ConfigLoader, DenyErrors) {
  EXPECT_EQ(
      errors_of("deny: {status: 200}\n"),
      Errors{"t.yaml:1:16: deny.status: must be an HTTP status from 400 to 599, got \"200\""});
  EXPECT_EQ(errors_of("deny: {content_type: text/html}\n"),
            Errors{"t.yaml:1:22: deny.content_type: is the type of the body in body_file: set "
                   "body_file too"});
  const Errors missing = errors_of("deny: {body_file: /nonexistent/deny.json}\n");
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_EQ(missing[0].rfind("t.yaml:1:19: deny.body_file: cannot open the deny body file "
                             "/nonexistent/deny.json",
                             0),
            0u)
      << missing[0];
  EXPECT_EQ(errors_of("deny: {stauts: 503}\n"),
            Errors{"t.yaml:1:8: deny.stauts: unknown key; did you mean `status`?"});
}

TEST(ConfigLoader, LoggingFormatIsTextOrJson) {
  EXPECT_EQ(valid("{}").logging.format, "text");
  EXPECT_EQ(valid("logging: {format: json}\n").logging.format, "json");
  EXPECT_EQ(errors_of("logging:\n  format: jsn\n"),
            Errors{"t.yaml:2:11: logging.format: must be one of text, json, got \"jsn\"; did "
                   "you mean `json`?"});
}

TEST(ConfigLoader, WatchConfigIsABoolean) {
  EXPECT_TRUE(valid("watch_config: true\n").watch_config);
  EXPECT_EQ(errors_of("watch_config: yes\n"),
            Errors{"t.yaml:1:15: watch_config: must be true or false, got \"yes\""});
  EXPECT_EQ(errors_of("watch_confg: true\n"),
            Errors{"t.yaml:1:1: watch_confg: unknown key; did you mean `watch_config`?"});
}

// What watch_config watches: the config file, then each file and folder it
// names, once each; also when the config is refused, so
// that the file to fix is watched.
TEST(ConfigLoader, TheFilesAConfigNamesAreListedEvenWhenItIsRefused) {
  const LoadResult r = load_config_string(R"(
admin_token_file: token
deny: {body_file: /nonexistent/deny.json}
decision_api: {token_file: token}
grpc: 127.0.0.1:0
rls: {config_dir: ratelimit}
)",
                                          "/etc/sluice/sluice.yaml");
  EXPECT_FALSE(r.config.has_value());
  EXPECT_EQ(r.files, (std::vector<std::string>{"/etc/sluice/sluice.yaml", "/etc/sluice/token",
                                               "/etc/sluice/ratelimit", "/nonexistent/deny.json"}));
  const LoadResult missing = load_config_file("/nonexistent/sluice.yaml");
  EXPECT_EQ(missing.files, std::vector<std::string>{"/nonexistent/sluice.yaml"});
}

// `sluice validate` given an envoyproxy/ratelimit file says where it belongs.
TEST(ConfigLoader, AnEnvoyDescriptorFileSaysWhereSuchFilesGo) {
  EXPECT_EQ(errors_of("domain: edge\ndescriptors:\n  - key: remote_address\n"),
            Errors{"t.yaml:1:1: this is an envoyproxy/ratelimit descriptor file (domain:, "
                   "descriptors:), not a Sluice config: put it in a folder and name that folder "
                   "in a Sluice config's `rls: {config_dir: ...}` (see docs/ENVOY.md)"});
}

TEST(ConfigLoader, TopLevelMustBeAMapping) {
  EXPECT_EQ(errors_of("- listen\n"),
            Errors{"t.yaml:1:1: the top level must be a mapping of settings (listen:, routes:, "
                   "...), got a list"});
}

TEST(ConfigLoader, ASecondDocumentIsAnError) {
  EXPECT_EQ(errors_of("listen: 127.0.0.1:1\n---\nadmin: 127.0.0.1:2\n"),
            Errors{"t.yaml:3:1: a second YAML document starts here; a config file holds one "
                   "(check the indentation and any '---')"});
}

// yaml-cpp 0.7 reads empty documents forever after a ',' outside [...] or
// {...} at the top level: the load never returned (and kept allocating).
// Found by fuzz/config.cc.
TEST(ConfigLoader, TlsNeedsACertificateAndAKeyAndGrpcTlsNeedsBoth) {
  EXPECT_EQ(errors_of("tls: {cert: c.pem}\n"),
            (Errors{"t.yaml:1:6: tls: needs `key:`, the PEM private key file"}));
  EXPECT_EQ(errors_of("tls: {key: k.pem, min_version: \"1.1\"}\n"),
            (Errors{"t.yaml:1:6: tls: needs `cert:`, the PEM certificate chain file"}));
  EXPECT_EQ(errors_of("tls: {cert: /nonexistent/c.pem, key: /nonexistent/k.pem}\n"),
            (Errors{"t.yaml:1:13: tls.cert: cannot open the certificate file /nonexistent/c.pem: "
                    "No such file or directory",
                    "t.yaml:1:38: tls.key: cannot open the key file /nonexistent/k.pem: No such "
                    "file or directory"}));
  EXPECT_EQ(errors_of("grpc_tls: true\n"),
            (Errors{"t.yaml:1:11: grpc_tls: needs `grpc:`, the address of the port to serve "
                    "with TLS"}));
}

TEST(ConfigLoader, AStrayCommaIsASyntaxErrorNotAHang) {
  const Errors comma = {
      "t.yaml:1:1: YAML syntax error: a ',' outside a flow collection ([...] or "
      "{...})"};
  EXPECT_EQ(errors_of(","), comma);
  EXPECT_EQ(errors_of(",#\nlisten: 127.0.0.1:1\n"), comma);
  EXPECT_EQ(errors_of("\"x\" ,"), (Errors{"t.yaml:1:5: YAML syntax error: a ',' outside a flow "
                                          "collection ([...] or {...})"}));
  EXPECT_EQ(errors_of("- a\n,"), (Errors{"t.yaml:2:1: YAML syntax error: a ',' outside a flow "
                                         "collection ([...] or {...})"}));
}

// yaml-cpp wrote invalid UTF-8 back as U+FFFD, so a route path with a raw
// 0xC2 did not survive a round trip through to_yaml. Found by fuzz/config.cc.
TEST(ConfigLoader, TextThatIsNotUtf8IsAnError) {
  const std::string not_utf8 =
      "t.yaml:2:17: the file is not UTF-8 text (a byte that starts no valid UTF-8 character)";
  EXPECT_EQ(errors_of("routes:\n  - match: GET /\xC2"
                      "a\n    limits: [{capacity: 1, refill_rate: 1/s}]\n"),
            Errors{not_utf8});
  EXPECT_EQ(errors_of("routes:\n  - match: GET /\xED\xA0\x80\n"), Errors{not_utf8});  // a surrogate
  EXPECT_EQ(errors_of("routes:\n  - match: GET /\xC0\xAF\n"), Errors{not_utf8});  // overlong '/'
  EXPECT_EQ(errors_of("routes:\n  - match: GET /\xF4\x90\x80\x80\n"),
            Errors{not_utf8});  // > U+10FFFF
  const LoadResult ok = load_config_string(
      "routes:\n  - match: GET /a\n    name: caf\xC3\xA9 \xF0\x9F\x98\x80\n    limits: [{capacity: "
      "1, refill_rate: 1/s}]\n",
      "t.yaml");
  EXPECT_TRUE(ok.config.has_value());
}

// ---- errors: keys --------------------------------------------------------

TEST(ConfigLoader, UnknownKeySuggestsTheClosestKnownKey) {
  EXPECT_EQ(errors_of(R"(routes:
  - match: GET /a
    limits: [{capacity: 5, refil_rate: 1/s}]
)"),
            (Errors{"t.yaml:3:14: routes[0].limits[0]: token_bucket needs `refill_rate`",
                    "t.yaml:3:28: routes[0].limits[0].refil_rate: unknown key; did you mean "
                    "`refill_rate`?"}));
}

TEST(ConfigLoader, UnknownKeyWithoutACloseOneListsTheKnownKeys) {
  EXPECT_EQ(errors_of("logging:\n  colour: true\n"),
            Errors{"t.yaml:2:3: logging.colour: unknown key (known keys: level, format, "
                   "access_log, redact_keys, denial_log_per_second)"});
  EXPECT_EQ(errors_of("routs: []\n"),
            Errors{"t.yaml:1:1: routs: unknown key; did you mean `routes`?"});
}

TEST(ConfigLoader, DuplicateMappingKeysAreErrors) {
  EXPECT_EQ(errors_of("listen: 127.0.0.1:1\nadmin: 127.0.0.1:2\nlisten: 127.0.0.1:3\n"),
            Errors{"t.yaml:3:1: listen: duplicate key (first set on line 1)"});
  EXPECT_EQ(errors_of("policies:\n  p: {capacity: 1, refill_rate: 1/s, capacity: 2}\n"),
            Errors{"t.yaml:2:38: policies.p.capacity: duplicate key (first set on line 2)"});
}

// ---- errors: types and values --------------------------------------------

TEST(ConfigLoader, WrongTypesNameWhatWasExpected) {
  EXPECT_EQ(errors_of(R"(store: memory
listen: {host: a}
case_insensitive_paths: yes
routes:
  route1: {}
)"),
            (Errors{
                "t.yaml:1:8: store: must be a mapping, got \"memory\"",
                "t.yaml:2:9: listen: must be host:port like 127.0.0.1:8080, got a mapping",
                "t.yaml:3:25: case_insensitive_paths: must be true or false, got \"yes\"",
                "t.yaml:5:3: routes: must be a list of routes, got a mapping",
            }));
}

TEST(ConfigLoader, AnEmptyValueIsReportedAtItsKey) {
  EXPECT_EQ(errors_of("listen:\nserver:\n"),
            (Errors{"t.yaml:1:1: listen: must be host:port like 127.0.0.1:8080, got nothing",
                    "t.yaml:2:1: server: must be a mapping, got nothing"}));
}

TEST(ConfigLoader, LimitFieldsMustBePositiveIntegers) {
  EXPECT_EQ(errors_of(R"(routes:
  - match: GET /a
    limits:
      - capacity: ten
        refill_rate: 5/s
      - {algorithm: fixed_window, limit: 0, window: 1m}
      - {capacity: 4294967296, refill_rate: 1/s}
)"),
            (Errors{"t.yaml:4:19: routes[0].limits[0].capacity: must be a positive integer, got "
                    "\"ten\"",
                    "t.yaml:6:42: routes[0].limits[1].limit: must be a positive integer, got "
                    "\"0\"",
                    "t.yaml:7:20: routes[0].limits[2].capacity: must be at most 4294967295, got "
                    "\"4294967296\""}));
}

TEST(ConfigLoader, BadDurationsAndRates) {
  EXPECT_EQ(
      errors_of(R"(policies:
  a: {algorithm: sliding_window, limit: 5, window: 1.5s}
  b: {algorithm: fixed_window, limit: 5, window: 60}
  c: {capacity: 5, refill_rate: 5/x}
  d: {capacity: 5, refill_rate: 5}
server:
  idle_timeout: 0s
  header_timeout: -1s
)"),
      (Errors{"t.yaml:2:52: policies.a.window: must be a duration like 500ms, 1s, 1m, 1h, "
              "1d or 1w, got \"1.5s\" (whole numbers only: write 1500ms, not 1.5s)",
              "t.yaml:3:50: policies.b.window: must be a duration like 500ms, 1s, 1m, 1h, "
              "1d or 1w, got \"60\" (the unit is missing: add ms, s, m, h, d or w)",
              "t.yaml:4:33: policies.c.refill_rate: must be a rate like 10/s, 100/m, "
              "1000/h, 5/d or 10/2s, got \"5/x\" (unknown unit \"x\"; use ms, s, m, h, d or w)",
              "t.yaml:5:33: policies.d.refill_rate: must be a rate like 10/s, 100/m, "
              "1000/h, 5/d or 10/2s, got \"5\" (write a count, '/', and a unit or a "
              "duration)",
              "t.yaml:7:17: server.idle_timeout: must be greater than 0, got \"0s\"",
              "t.yaml:8:19: server.header_timeout: must be a duration like 500ms, 1s, 1m, "
              "1h, 1d or 1w, got \"-1s\" (a duration cannot be negative)"}));
}

TEST(ConfigLoader, UnknownAlgorithm) {
  EXPECT_EQ(errors_of("policies:\n  p: {algorithm: leaky_bucket, capacity: 5, refill_rate: 1/s}\n"),
            Errors{"t.yaml:2:18: policies.p.algorithm: must be one of token_bucket, gcra, "
                   "fixed_window, sliding_log, sliding_window, concurrency, got "
                   "\"leaky_bucket\"; did you mean `gcra`?"});
  EXPECT_EQ(errors_of("policies:\n  p: {algorithm: gcar, capacity: 5, refill_rate: 1/s}\n"),
            Errors{"t.yaml:2:18: policies.p.algorithm: must be one of token_bucket, gcra, "
                   "fixed_window, sliding_log, sliding_window, concurrency, got \"gcar\"; did "
                   "you mean `gcra`?"});
}

TEST(ConfigLoader, FieldsOfTheOtherAlgorithmFamilyAreErrors) {
  EXPECT_EQ(errors_of("policies:\n  p: {algorithm: fixed_window, capacity: 5, window: 1m}\n"),
            Errors{"t.yaml:2:42: policies.p.capacity: fixed_window takes limit and window, not "
                   "capacity (capacity and refill_rate are for token_bucket and gcra)"});
  EXPECT_EQ(errors_of("policies:\n  p: {capacity: 5, refill_rate: 1/s, window: 1m}\n"),
            Errors{"t.yaml:2:46: policies.p.window: token_bucket takes capacity and refill_rate, "
                   "not window (limit and window are for fixed_window, sliding_log and "
                   "sliding_window)"});
  EXPECT_EQ(errors_of("policies:\n  p: {algorithm: sliding_log, limit: 5}\n"),
            Errors{"t.yaml:2:6: policies.p: sliding_log needs `window`"});
}

TEST(ConfigLoader, LimitCreateErrorsAppearAtTheLimit) {
  EXPECT_EQ(errors_of("policies:\n  p: {algorithm: sliding_log, limit: 20000, window: 1m}\n"),
            Errors{"t.yaml:2:6: policies.p: sliding_log keeps one entry per allowed request, so "
                   "its limit must be at most 10000 (got 20000); use sliding_window for large "
                   "limits"});
}

TEST(ConfigLoader, UnknownPolicyNames) {
  EXPECT_EQ(errors_of(R"(policies:
  login: {capacity: 5, refill_rate: 1/s}
  search: {capacity: 5, refill_rate: 1/s}
routes:
  - match: POST /login
    limits: [logn]
  - match: GET /x
    limits: [other]
)"),
            (Errors{"t.yaml:6:14: routes[0].limits[0]: unknown policy \"logn\"; did you mean "
                    "`login`?",
                    "t.yaml:8:14: routes[1].limits[0]: unknown policy \"other\" (defined: login, "
                    "search)"}));
  EXPECT_EQ(errors_of("default:\n  limits: [p]\n"),
            Errors{"t.yaml:2:12: default.limits[0]: unknown policy \"p\" (no policies are "
                   "defined under `policies:`)"});
}

TEST(ConfigLoader, ABrokenPolicyIsReportedOnceNotAtEveryUse) {
  EXPECT_EQ(errors_of(R"(policies:
  p: {capacity: 0, refill_rate: 1/s}
routes:
  - match: GET /a
    limits: [p]
)"),
            Errors{"t.yaml:2:17: policies.p.capacity: must be a positive integer, got \"0\""});
}

TEST(ConfigLoader, DuplicateRoutes) {
  EXPECT_EQ(errors_of(R"(routes:
  - match: GET /api/users/{id}
    limits: [{capacity: 1, refill_rate: 1/s}]
  - match: get /api/users/{user}/
    limits: [{capacity: 1, refill_rate: 1/s}]
  - match: POST /api/users/{id}
    limits: [{capacity: 1, refill_rate: 1/s}]
)"),
            Errors{"t.yaml:4:12: routes[1].match: duplicate route \"GET /api/users/{user}/\": "
                   "routes[0] (line 2) already matches it"});
}

TEST(ConfigLoader, PathsDifferingOnlyInCaseAreDuplicatesWhenMatchingIgnoresCase) {
  const char* yaml = R"(routes:
  - match: GET /API
    limits: [{capacity: 1, refill_rate: 1/s}]
  - match: GET /api
    limits: [{capacity: 1, refill_rate: 1/s}]
)";
  EXPECT_TRUE(errors_of(yaml).empty());
  EXPECT_EQ(errors_of(std::string("case_insensitive_paths: true\n") + yaml),
            Errors{"t.yaml:5:12: routes[1].match: duplicate route \"GET /api\": routes[0] (line "
                   "3) already matches it"});
}

TEST(ConfigLoader, RouteStructureErrors) {
  EXPECT_EQ(errors_of(R"(routes:
  - limits: [{capacity: 1, refill_rate: 1/s}]
  - match: GET /b
  - match: GET /c
    limits: []
  - match: GET /d
    limits: {capacity: 1, refill_rate: 1/s}
  - match: GET /e
    name: default
    limits: [{capacity: 1, refill_rate: 1/s}]
  - match: GET /f
    limits: [[1]]
)"),
            (Errors{
                "t.yaml:2:5: routes[0]: `match` is required, like match: GET /api/users/{id}",
                "t.yaml:3:5: routes[1]: `limits` is required",
                "t.yaml:5:13: routes[2].limits: must list at least one limit",
                "t.yaml:7:13: routes[3].limits: must be a list of limits (write [ ... ] around "
                "a single one), got a mapping",
                "t.yaml:9:11: routes[4].name: the name `default` is reserved for the default "
                "route",
                "t.yaml:12:14: routes[5].limits[0]: must be a policy name or a limit like "
                "{capacity: 10, refill_rate: 2/s}, got a list",
            }));
}

TEST(ConfigLoader, BadMatchAndKey) {
  EXPECT_EQ(errors_of(R"(routes:
  - match: GET /a/{id
    key: cookie
    limits: [{capacity: 1, refill_rate: 1/s}]
)"),
            (Errors{"t.yaml:2:12: routes[0].match: must be \"METHOD /path\" like \"GET "
                    "/api/users/{id}\" or \"* /static/*\", got \"GET /a/{id\" ({param} must be a "
                    "whole segment, like /users/{id})",
                    "t.yaml:3:10: routes[0].key: must be ip, global, header:NAME, cookie:NAME, "
                    "query:NAME, jwt:CLAIM or a combination like ip+header:x-api-key, got "
                    "\"cookie\" "
                    "(unknown part \"cookie\")"}));
}

TEST(ConfigLoader, BadCidrs) {
  EXPECT_EQ(errors_of("client_ip:\n  trusted_proxies: [10.0.0.0/33, 10.0.0.0/8, proxy]\n"),
            (Errors{"t.yaml:2:21: client_ip.trusted_proxies[0]: must be a CIDR block like "
                    "10.0.0.0/8 or 2001:db8::/32, got \"10.0.0.0/33\"",
                    "t.yaml:2:46: client_ip.trusted_proxies[2]: must be a CIDR block like "
                    "10.0.0.0/8 or 2001:db8::/32, got \"proxy\""}));
}

TEST(ConfigLoader, BadListenAddressesAndUpstream) {
  EXPECT_EQ(errors_of(R"(listen: 8080
admin: "::1:9090"
grpc: localhost
upstream: https://api.example.com
)"),
            (Errors{"t.yaml:1:9: listen: must be host:port like 127.0.0.1:8080 or [::1]:8080, "
                    "got \"8080\" (the host is missing: write 127.0.0.1:8080)",
                    "t.yaml:2:8: admin: must be host:port like 127.0.0.1:8080 or [::1]:8080, got "
                    "\"::1:9090\" (put an IPv6 address in brackets, like [::1]:8080)",
                    "t.yaml:3:7: grpc: must be host:port like 127.0.0.1:8080 or [::1]:8080, got "
                    "\"localhost\" (the port is missing)",
                    "t.yaml:4:11: upstream: must be an http:// URL like http://127.0.0.1:3000, "
                    "got \"https://api.example.com\" (https is not supported: the gateway speaks "
                    "plain HTTP to its upstream)"}));
  EXPECT_EQ(errors_of("upstream:\n  timeout: 1s\n"),
            Errors{"t.yaml:2:3: upstream: `url` is required"});
}

// A GET route matches HEAD requests too and the first match wins: a HEAD
// route after the GET route of its path could never match.
TEST(ConfigLoader, AHeadRouteAfterTheGetRouteOfItsPathIsAnError) {
  EXPECT_EQ(errors_of(R"(routes:
  - match: GET /files/{id}
    limits: [{capacity: 1, refill_rate: 1/s}]
  - match: HEAD /files/{name}/
    limits: [{capacity: 1, refill_rate: 1/s}]
)"),
            Errors{"t.yaml:4:12: routes[1].match: route \"HEAD /files/{name}/\" is never matched: "
                   "the GET route routes[0] (line 2) takes HEAD requests of its path; list this "
                   "route before it"});
  // Listed first, it takes the HEAD requests; on another path, no question.
  EXPECT_TRUE(errors_of(R"(routes:
  - match: HEAD /files/{id}
    limits: [{capacity: 1, refill_rate: 1/s}]
  - match: GET /files/{id}
    limits: [{capacity: 1, refill_rate: 1/s}]
  - match: HEAD /other
    limits: [{capacity: 1, refill_rate: 1/s}]
)")
                  .empty());
}

TEST(ConfigLoader, ClientIpHeaderIsOneOfThree) {
  for (const auto& [text, header] :
       {std::pair{"x-forwarded-for", ClientIpConfig::Header::kXForwardedFor},
        std::pair{"x-real-ip", ClientIpConfig::Header::kXRealIp},
        std::pair{"forwarded", ClientIpConfig::Header::kForwarded}}) {
    const LoadResult r =
        load_config_string(std::string("client_ip: {header: ") + text + "}\n", "t.yaml");
    ASSERT_TRUE(r.config.has_value()) << text;
    EXPECT_EQ(r.config->client_ip.header, header) << text;
  }
  EXPECT_EQ(errors_of("client_ip: {header: x-forwarded-host}\n"),
            Errors{"t.yaml:1:21: client_ip.header: must be one of x-forwarded-for, x-real-ip, "
                   "forwarded, got \"x-forwarded-host\"; did you mean `x-forwarded-for`?"});
}

TEST(ConfigLoader, StoreErrors) {
  EXPECT_EQ(errors_of(R"(store:
  backend: redsi
  max_keys: 0
  redis:
    url: redis://10.0.0.1:6379
    addresses: [10.0.0.2:6379]
    on_failure: open
    cluster: true
    database: 2
)"),
            (Errors{"t.yaml:2:12: store.backend: must be one of memory, redis, got \"redsi\"; "
                    "did you mean `redis`?",
                    "t.yaml:3:13: store.max_keys: must be a positive whole number, got \"0\"",
                    "t.yaml:6:16: store.redis.addresses: set either `url` or `addresses`, not "
                    "both",
                    "t.yaml:7:17: store.redis.on_failure: must be one of allow, deny, got "
                    "\"open\"",
                    "t.yaml:9:15: store.redis.database: set either `url` or `database`, not "
                    "both"}));
  EXPECT_EQ(errors_of("store:\n  redis:\n    mode: cache\n"),
            Errors{"t.yaml:3:11: store.redis.mode: must be one of exact, cached, got \"cache\"; "
                   "did you mean `cached`?"});
  EXPECT_EQ(errors_of("store:\n  redis:\n    sync_interval: 20ms\n"),
            Errors{"t.yaml:3:20: store.redis.sync_interval: sync_interval is read only with "
                   "`mode: cached`"});
  EXPECT_EQ(errors_of("store:\n  redis:\n    mode: cached\n    sync_interval: 0s\n"),
            Errors{"t.yaml:4:20: store.redis.sync_interval: must be greater than 0, got \"0s\""});
  EXPECT_EQ(errors_of("store:\n  redis:\n    mode: cached\n    cluster: true\n"), Errors{});
  EXPECT_EQ(errors_of("store:\n  redis:\n    cluster: true\n    database: 1\n"),
            Errors{"t.yaml:4:15: store.redis.database: Redis Cluster has only database 0"});
}

TEST(ConfigLoader, OtherRangeErrors) {
  EXPECT_EQ(errors_of(R"(auth_deny_status: 200
headers: [legacy, legacy, fancy]
client_ip:
  ipv6_prefix: 129
server:
  max_header_bytes: 100
  threads: many
logging:
  level: verbose
  denial_log_per_second: -1
)"),
            (Errors{"t.yaml:1:19: auth_deny_status: must be an HTTP status from 400 to 599, got "
                    "\"200\"",
                    "t.yaml:2:19: headers[1]: legacy is listed twice",
                    "t.yaml:2:27: headers[2]: must be one of legacy, draft, got \"fancy\"",
                    "t.yaml:4:16: client_ip.ipv6_prefix: must be a prefix length from 1 to 128, "
                    "got \"129\"",
                    "t.yaml:6:21: server.max_header_bytes: must be at least 1024 bytes, got "
                    "\"100\"",
                    "t.yaml:7:12: server.threads: must be a whole number from 0 (one per core) to "
                    "1024, got \"many\"",
                    "t.yaml:9:10: logging.level: must be one of trace, debug, info, warn, error, "
                    "got \"verbose\"",
                    "t.yaml:10:26: logging.denial_log_per_second: must be a number of log lines "
                    "per second (0 to 1000000), got \"-1\""}));
}

TEST(ConfigLoader, PolicyNamesAreRestricted) {
  EXPECT_EQ(errors_of("policies:\n  \"my policy\": {capacity: 1, refill_rate: 1/s}\n"),
            Errors{"t.yaml:2:3: policies.my policy: a policy name may hold only letters, "
                   "digits, '_', '-', '.' and ':'"});
  EXPECT_EQ(errors_of("policies:\n  p: login\n"),
            Errors{"t.yaml:2:6: policies.p: must be a limit like {capacity: 5, refill_rate: "
                   "1/s}, got \"login\""});
}

TEST(ConfigLoader, EveryErrorInAFileIsReportedInFileOrder) {
  // Policies are checked before routes internally; the report is still in
  // file order, and one bad entry does not hide the next.
  const Errors errors = errors_of(R"(listen: nowhere
routes:
  - match: GET /a
    limits: [{capacity: 0, refill_rate: 1/s}]
  - match: GET /a
    limits: [missing]
policies:
  p: {capacity: 1, refill_rate: 1/q}
unknown: 1
)");
  EXPECT_EQ(
      errors,
      (Errors{"t.yaml:1:9: listen: must be host:port like 127.0.0.1:8080 or [::1]:8080, got "
              "\"nowhere\" (the port is missing)",
              "t.yaml:4:25: routes[0].limits[0].capacity: must be a positive integer, got "
              "\"0\"",
              "t.yaml:5:12: routes[1].match: duplicate route \"GET /a\": routes[0] (line 3) "
              "already matches it",
              "t.yaml:6:14: routes[1].limits[0]: unknown policy \"missing\" (defined: p)",
              "t.yaml:8:33: policies.p.refill_rate: must be a rate like 10/s, 100/m, "
              "1000/h, 5/d or 10/2s, got \"1/q\" (unknown unit \"q\"; use ms, s, m, h, d or w)",
              "t.yaml:9:1: unknown: unknown key (known keys: listen, tls, grpc_tls, admin, "
              "admin_token_file, "
              "admin_token_all, admin_hosts, admin_read_only, decision_api, grpc, rls, "
              "upstream, store, client_ip, access, headers, case_insensitive_paths, paths, "
              "auth_deny_status, deny, jwt, policies, plans, consumers, default, routes, server, "
              "logging, watch_config, http2)"}));
}

TEST(ConfigLoader, Http2IsABooleanOffByDefault) {
  EXPECT_FALSE(valid("listen: 127.0.0.1:0\n").http2);
  EXPECT_TRUE(valid("http2: true\n").http2);
  EXPECT_EQ(errors_of("http2: 2\n"), Errors{"t.yaml:1:8: http2: must be true or false, got \"2\""});
}

TEST(ConfigLoader, ErrorTextWithoutAPositionHasNoLineAndColumn) {
  EXPECT_EQ((ConfigError{"f.yaml", 0, 0, "boom"}).text(), "f.yaml: boom");
  EXPECT_EQ((ConfigError{"f.yaml", 3, 7, "boom"}).text(), "f.yaml:3:7: boom");
}

// ---- who may ask: the decision API and the admin port --------------------

// A file in a fresh temporary directory, removed with it.
class TempFile {
 public:
  explicit TempFile(const std::string& content) {
    char dir[] = "/tmp/sluice-config-test-XXXXXX";
    dir_ = ::mkdtemp(dir) != nullptr ? dir : "";
    path_ = dir_ + "/token";
    std::FILE* f = std::fopen(path_.c_str(), "wb");
    if (f != nullptr) {
      std::fwrite(content.data(), 1, content.size(), f);
      std::fclose(f);
    }
  }
  ~TempFile() {
    std::remove(path_.c_str());
    ::rmdir(dir_.c_str());
  }
  const std::string& path() const { return path_; }

 private:
  std::string dir_;
  std::string path_;
};

TEST(ConfigLoader, DecisionApiAndAdminAccessAreRead) {
  const TempFile decision("d-token\n");
  const TempFile admin("a-token\r\n");
  const Config c = valid("decision_api: {listen: 127.0.0.1:8082, token_file: " + decision.path() +
                         "}\nadmin: 0.0.0.0:9090\nadmin_token_file: " + admin.path() +
                         "\nadmin_token_all: true\nadmin_hosts: [Sluice-Admin.internal, "
                         "10.0.0.5]\nserver: {max_connections: 5000}\n");
  ASSERT_TRUE(c.decision_api.listen.has_value());
  EXPECT_EQ(c.decision_api.listen->text(), "127.0.0.1:8082");
  EXPECT_EQ(c.decision_api.token_file, decision.path());
  EXPECT_EQ(c.decision_api.token, "d-token");  // the trailing newline is not part of it
  EXPECT_EQ(c.admin_access.token, "a-token");
  EXPECT_TRUE(c.admin_access.token_all);
  EXPECT_EQ(c.admin_access.hosts, (std::vector<std::string>{"sluice-admin.internal", "10.0.0.5"}));
  EXPECT_EQ(c.server.max_connections, 5000u);
}

TEST(ConfigLoader, TheDefaultsAskForNoTokenAndServeNoDecisionPort) {
  const Config c = valid("{}");
  EXPECT_FALSE(c.decision_api.listen.has_value());
  EXPECT_TRUE(c.decision_api.token.empty());
  EXPECT_TRUE(c.admin_access.token.empty());
  EXPECT_FALSE(c.admin_access.token_all);
  EXPECT_TRUE(c.admin_access.hosts.empty());
  EXPECT_EQ(c.server.max_connections, 0u);  // derived from the open-file limit
}

TEST(ConfigLoader, AnAdminPortReachableFromOtherHostsNeedsAToken) {
  EXPECT_EQ(errors_of("admin: 0.0.0.0:9090\n"),
            Errors{"t.yaml:1:8: admin: an admin port on \"0.0.0.0\" is reachable from other hosts "
                   "and can reload the config and reset limits: set `admin_token_file` (a bearer "
                   "token for it), `admin_read_only: true` (no POST, PUT or DELETE), or bind it "
                   "to 127.0.0.1"});
  EXPECT_EQ(errors_of("admin: \"[::]:9090\"\n").size(), 1u);
  EXPECT_EQ(errors_of("admin: admin.internal:9090\n").size(), 1u);
  EXPECT_EQ(errors_of("admin: 0.0.0.0:9090\nadmin_read_only: false\n").size(), 1u);
  // Loopback in any spelling needs none.
  valid("admin: 127.0.0.2:9090\n");
  valid("admin: \"[::1]:9090\"\n");
  valid("admin: localhost:9090\n");
}

TEST(ConfigLoader, AReadOnlyAdminPortMayListenBeyondLoopbackWithoutAToken) {
  EXPECT_FALSE(valid("{}").admin_access.read_only);
  const Config c = valid("admin: 0.0.0.0:9090\nadmin_read_only: true\n");
  EXPECT_TRUE(c.admin_access.read_only);
  EXPECT_EQ(c.admin.text(), "0.0.0.0:9090");
  EXPECT_TRUE(c.admin_access.token.empty());
  EXPECT_EQ(errors_of("admin_read_only: yes please\n"),
            Errors{"t.yaml:1:18: admin_read_only: must be true or false, got \"yes please\""});
}

TEST(ConfigLoader, TokenFileErrors) {
  const TempFile empty("\n");
  const TempFile spaced("two words\n");
  EXPECT_EQ(errors_of("admin_token_file: /nonexistent/admin.token\n"),
            Errors{"t.yaml:1:19: admin_token_file: cannot open the token file "
                   "/nonexistent/admin.token: No such file or directory"});
  EXPECT_EQ(
      errors_of("decision_api: {token_file: " + empty.path() + "}\n"),
      Errors{"t.yaml:1:28: decision_api.token_file: the token file " + empty.path() + " is empty"});
  EXPECT_EQ(errors_of("admin_token_file: " + spaced.path() + "\n"),
            Errors{"t.yaml:1:19: admin_token_file: the token file " + spaced.path() +
                   " must hold one token of visible ASCII characters (no spaces, no lines after "
                   "it)"});
  EXPECT_EQ(errors_of("admin_token_all: true\n"),
            Errors{"t.yaml:1:18: admin_token_all: needs `admin_token_file`: the token that guards "
                   "every admin endpoint"});
  EXPECT_EQ(errors_of("admin_hosts: [\"http://x\"]\n"),
            Errors{"t.yaml:1:15: admin_hosts[0]: must be a host name like sluice-admin.internal "
                   "(no port, no scheme), got \"http://x\""});
  EXPECT_EQ(errors_of("decision_api: {listen: 127.0.0.1:8082, tokenfile: x}\n"),
            Errors{"t.yaml:1:40: decision_api.tokenfile: unknown key; did you mean "
                   "`token_file`?"});
  EXPECT_EQ(errors_of("server: {max_connections: 0}\n"),
            Errors{"t.yaml:1:27: server.max_connections: must be a whole number from 1 to "
                   "10000000, got \"0\""});
}

TEST(ConfigLoader, HeldRequestsAndTlsHandshakesHaveBounds) {
  const Config defaults = valid("{}");
  EXPECT_EQ(defaults.server.max_held, 0u);  // derived from max_connections in force
  EXPECT_EQ(defaults.server.max_tls_handshakes, 512u);
  const Config c = valid("server: {max_held: 100, max_tls_handshakes: 64}\n");
  EXPECT_EQ(c.server.max_held, 100u);
  EXPECT_EQ(c.server.max_tls_handshakes, 64u);
  EXPECT_EQ(errors_of("server: {max_held: 0, max_tls_handshakes: 0}\n"),
            (Errors{"t.yaml:1:20: server.max_held: must be a whole number from 1 to 10000000, "
                    "got \"0\"",
                    "t.yaml:1:43: server.max_tls_handshakes: must be a whole number from 1 to "
                    "1000000, got \"0\""}));
}

// A Kubernetes Secret mounted as a file: the URL with its password.
TEST(ConfigLoader, RedisUrlFileIsReadAsTheUrl) {
  const TempFile url("rediss://sluice:s%40cret@redis.internal:6380/2\n");
  const Config c = valid("store:\n  backend: redis\n  redis:\n    url_file: " + url.path() + "\n");
  const RedisConfig& r = c.store.redis;
  EXPECT_EQ(r.url_file, url.path());
  ASSERT_EQ(r.addresses.size(), 1u);
  EXPECT_EQ(r.addresses[0].text(), "redis.internal:6380");
  EXPECT_EQ(r.username, "sluice");
  EXPECT_EQ(r.password, "s@cret");
  EXPECT_EQ(r.database, 2);
  EXPECT_TRUE(r.tls.enabled);
  EXPECT_TRUE(valid("{}").store.redis.url_file.empty());
}

TEST(ConfigLoader, RedisUrlFileErrorsNeverShowThePassword) {
  const TempFile url("redis://sluice:hunter2@redis.internal:port\n");
  const std::vector<std::string> errors =
      errors_of("store:\n  redis:\n    url_file: " + url.path() + "\n");
  EXPECT_EQ(errors,
            Errors{"t.yaml:3:15: store.redis.url_file: the Redis URL in " + url.path() +
                   " must be a Redis URL like redis://127.0.0.1:6379/0 or "
                   "redis://user:password@host:6379, got \"redis://***@redis.internal:port\" "
                   "(the port must be 1 to 65535)"});
  EXPECT_EQ(errors_of("store:\n  redis:\n    url_file: /nonexistent/redis-url\n"),
            Errors{"t.yaml:3:15: store.redis.url_file: cannot open the Redis URL file "
                   "/nonexistent/redis-url: No such file or directory"});
  const TempFile two_lines("redis://a:6379\nredis://b:6379\n");
  EXPECT_EQ(errors_of("store:\n  redis:\n    url_file: " + two_lines.path() + "\n"),
            Errors{"t.yaml:3:15: store.redis.url_file: the Redis URL file " + two_lines.path() +
                   " must hold one Redis URL of visible ASCII characters (no spaces, no lines "
                   "after it)"});
  const TempFile good("redis://10.0.0.1:6379\n");
  EXPECT_EQ(errors_of("store:\n  redis:\n    url: redis://10.0.0.1:6379\n    url_file: " +
                      good.path() + "\n    password: pw\n"),
            (Errors{"t.yaml:4:15: store.redis.url_file: set either `url` or `url_file`, not both",
                    "t.yaml:5:15: store.redis.password: set either `url_file` or `password`, not "
                    "both"}));
}

// ---- jwt: the keys `jwt:CLAIM` client keys are verified with ------------

TEST(ConfigLoader, JwtSectionReadsItsKeyFileAndChecks) {
  const TempFile secret("hs256-secret\n");
  const Config c = valid("jwt: {secret_file: " + secret.path() +
                         ", issuer: https://auth.example.com, audience: api}\n"
                         "routes:\n  - match: GET /a\n    key: jwt:sub+ip\n"
                         "    limits: [{capacity: 5, refill_rate: 1/s}]\n");
  ASSERT_TRUE(c.jwt.has_value());
  EXPECT_EQ(c.jwt->secret, "hs256-secret");
  EXPECT_EQ(c.jwt->issuer, "https://auth.example.com");
  EXPECT_EQ(c.jwt->audience, "api");
  EXPECT_EQ(c.routes[0].key.text, "jwt:sub+ip");

  const TempFile jwks(R"({"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB"}]})");
  EXPECT_EQ(errors_of("jwt: {jwks_file: " + jwks.path() + "}\n"),
            Errors{"t.yaml:1:18: jwt.jwks_file: the JWKS file " + jwks.path() +
                   " has a bad key 1: an RSA key shorter than 2048 bits is refused"});
}

TEST(ConfigLoader, JwtErrors) {
  EXPECT_EQ(errors_of("routes:\n  - match: GET /a\n    key: jwt:sub\n"
                      "    limits: [{capacity: 5, refill_rate: 1/s}]\n"),
            Errors{"t.yaml:3:10: routes[0].key: a jwt: key needs the `jwt:` section (jwks_file "
                   "or secret_file) to verify tokens with"});
  EXPECT_EQ(errors_of("jwt: {issuer: x}\n"),
            Errors{"t.yaml:1:6: jwt: needs jwks_file (RS256 / ES256 public keys) or secret_file "
                   "(an HS256 secret)"});
  EXPECT_EQ(errors_of("jwt: {jwks_file: a.json, secret_file: b}\n"),
            Errors{"t.yaml:1:6: jwt: takes jwks_file or secret_file, not both"});
  EXPECT_EQ(errors_of("default: {key: \"jwt:\", limits: [{capacity: 1, refill_rate: 1/s}]}\n"),
            Errors{"t.yaml:1:16: default.key: must be ip, global, header:NAME, cookie:NAME, "
                   "query:NAME, jwt:CLAIM or a combination like ip+header:x-api-key, got \"jwt:\" "
                   "(\"\" is not a claim name: printable, without + \" \\ or spaces)"});
}

TEST(ConfigLoader, AccessListErrors) {
  EXPECT_EQ(errors_of("access: {allow: [10.0.0.0/33], deny: 1.2.3.4/8, block: []}\n"),
            (Errors{"t.yaml:1:18: access.allow[0]: must be a CIDR block like 10.0.0.0/8 or "
                    "2001:db8::/32, got \"10.0.0.0/33\"",
                    "t.yaml:1:38: access.deny: must be a list of CIDR blocks like [10.0.0.0/8], "
                    "got \"1.2.3.4/8\"",
                    "t.yaml:1:49: access.block: unknown key (known keys: allow, deny)"}));
}

TEST(ConfigLoader, CountStatusAndBlockAreReadOnAnyLimit) {
  const Config c = valid(R"(
upstream: http://127.0.0.1:3000
policies:
  login: {algorithm: fixed_window, limit: 5, window: 15m, count_status: [403, 401, 401], block: 30m}
routes:
  - match: POST /api/login
    limits:
      - login
      - {capacity: 10, refill_rate: 1/m, count_status: 401}
      - {capacity: 100, refill_rate: 1/s, block: 1m}
)");
  ASSERT_EQ(c.policies.size(), 1u);
  EXPECT_EQ(c.policies[0].count_status, (std::vector<int>{401, 403}));
  EXPECT_EQ(c.policies[0].limit.block(), std::chrono::minutes(30));
  const std::vector<RouteLimit>& limits = c.routes.at(0).limits;
  ASSERT_EQ(limits.size(), 3u);
  EXPECT_EQ(limits[0].count_status, (std::vector<int>{401, 403}));
  EXPECT_EQ(limits[0].limit.describe(), "fixed_window limit=5 window=15m block=30m");
  EXPECT_EQ(limits[1].count_status, (std::vector<int>{401}));
  EXPECT_EQ(limits[1].limit.block(), Nanos{0});
  EXPECT_TRUE(limits[2].count_status.empty());
  EXPECT_EQ(limits[2].limit.block(), std::chrono::minutes(1));
}

TEST(ConfigLoader, CountStatusAndBlockErrors) {
  EXPECT_EQ(errors_of(R"(upstream: http://127.0.0.1:3000
routes:
  - match: POST /a
    limits: [{limit: 5, window: 1m, algorithm: fixed_window, count_status: [99, abc], block: 0s}]
  - match: POST /b
    limits: [{capacity: 5, refill_rate: 1/s, count_status: [], block: 1.5us}]
)"),
            (Errors{"t.yaml:4:77: routes[0].limits[0].count_status[0]: must be an HTTP status "
                    "from 100 to 599, got \"99\"",
                    "t.yaml:4:81: routes[0].limits[0].count_status[1]: must be an HTTP status "
                    "from 100 to 599, got \"abc\"",
                    "t.yaml:4:94: routes[0].limits[0].block: must be greater than 0, got \"0s\"",
                    "t.yaml:6:60: routes[1].limits[0].count_status: must list at least one HTTP "
                    "status (leave count_status out to count every request)",
                    "t.yaml:6:71: routes[1].limits[0].block: must be a duration like 500ms, 1s, "
                    "1m, 1h, 1d or 1w, got \"1.5us\" (whole numbers only: write 1500ms, not "
                    "1.5s)"}));
}

TEST(ConfigLoader, CountStatusNeedsTheGateway) {
  EXPECT_EQ(errors_of(R"(policies:
  login: {capacity: 5, refill_rate: 1/m, count_status: [401]}
)"),
            (Errors{"t.yaml:2:56: policies.login.count_status: count_status needs `upstream:`: "
                    "only the gateway learns the status of the response (/v1/check and /v1/auth "
                    "count every request they decide)"}));
}

}  // namespace
}  // namespace sluice::policy
