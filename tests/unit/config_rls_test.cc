// The `rls:` section of the config (docs/CONFIG.md) and its pairing with
// `grpc:`: what a valid section means and the exact errors of a bad one.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "policy/config_loader.h"
#include "policy/config_yaml.h"

namespace sluice::policy {
namespace {

using Errors = std::vector<std::string>;

Errors errors_of(std::string_view yaml, const std::string& name = "t.yaml") {
  const LoadResult r = load_config_string(yaml, name);
  Errors out;
  for (const ConfigError& e : r.errors) out.push_back(e.text());
  EXPECT_EQ(r.config.has_value(), r.errors.empty());
  return out;
}

Config valid(std::string_view yaml, const std::string& name = "t.yaml") {
  LoadResult r = load_config_string(yaml, name);
  std::string all;
  for (const ConfigError& e : r.errors) all += e.text() + "\n";
  EXPECT_TRUE(r.config.has_value()) << all;
  return r.config ? *r.config : Config{};
}

TEST(ConfigRls, AbsentMeansNoRlsApi) {
  const Config c = valid("listen: 127.0.0.1:8080\n");
  EXPECT_FALSE(c.grpc.has_value());
  EXPECT_FALSE(c.rls.has_value());
}

TEST(ConfigRls, DefaultsWithOnlyTheFolder) {
  const Config c = valid("grpc: 127.0.0.1:8081\nrls:\n  config_dir: /etc/ratelimit/config\n");
  ASSERT_TRUE(c.grpc.has_value());
  EXPECT_EQ(c.grpc->text(), "127.0.0.1:8081");
  ASSERT_TRUE(c.rls.has_value());
  EXPECT_EQ(c.rls->config_dir, "/etc/ratelimit/config");
  EXPECT_EQ(c.rls->response_headers, RlsSettings::ResponseHeaders::kOff);
  EXPECT_FALSE(c.rls->dynamic_metadata);
  EXPECT_FALSE(c.rls->shadow_mode);
  EXPECT_FALSE(c.rls->merge_domains);
  EXPECT_EQ(c.rls->near_limit_ratio, 0.8);
}

TEST(ConfigRls, EveryKeyIsRead) {
  const Config c = valid(R"(grpc: "[::1]:0"
rls:
  config_dir: descriptors
  response_headers: draft
  dynamic_metadata: true
  shadow_mode: true
  merge_domains: true
  near_limit_ratio: 0.75
)");
  ASSERT_TRUE(c.rls.has_value());
  EXPECT_EQ(c.rls->near_limit_ratio, 0.75);
  EXPECT_EQ(c.rls->config_dir, "descriptors");  // no folder in the name "t.yaml"
  EXPECT_EQ(c.rls->response_headers, RlsSettings::ResponseHeaders::kDraft);
  EXPECT_TRUE(c.rls->dynamic_metadata);
  EXPECT_TRUE(c.rls->shadow_mode);
  EXPECT_TRUE(c.rls->merge_domains);
  EXPECT_EQ(valid("grpc: 127.0.0.1:1\nrls: {config_dir: d, response_headers: ratelimit}\n")
                .rls->response_headers,
            RlsSettings::ResponseHeaders::kRateLimit);
  EXPECT_EQ(valid("grpc: 127.0.0.1:1\nrls: {config_dir: d, response_headers: off}\n")
                .rls->response_headers,
            RlsSettings::ResponseHeaders::kOff);
}

TEST(ConfigRls, RelativeFolderIsRelativeToTheConfigFile) {
  const std::string yaml = "grpc: 127.0.0.1:1\nrls: {config_dir: ratelimit/config}\n";
  EXPECT_EQ(valid(yaml, "/etc/sluice/sluice.yaml").rls->config_dir, "/etc/sluice/ratelimit/config");
  EXPECT_EQ(valid(yaml, "examples/envoy/sluice.yaml").rls->config_dir,
            "examples/envoy/ratelimit/config");
  EXPECT_EQ(valid("grpc: 127.0.0.1:1\nrls: {config_dir: /srv/rl}\n", "/etc/sluice/sluice.yaml")
                .rls->config_dir,
            "/srv/rl");
  // "." and ".." resolved, no trailing slash: file names in messages stay plain.
  EXPECT_EQ(valid("grpc: 127.0.0.1:1\nrls: {config_dir: ./a/../rl/}\n", "/etc/sluice/sluice.yaml")
                .rls->config_dir,
            "/etc/sluice/rl");
  EXPECT_EQ(
      valid("grpc: 127.0.0.1:1\nrls: {config_dir: .}\n", "/etc/sluice/sluice.yaml").rls->config_dir,
      "/etc/sluice");
}

TEST(ConfigRls, GrpcWithoutRlsIsAnError) {
  EXPECT_EQ(errors_of("listen: 127.0.0.1:8080\ngrpc: 127.0.0.1:8081\n"),
            Errors{"t.yaml:2:7: grpc: the Envoy RLS API on this address needs `rls:` with "
                   "`config_dir:`, the folder of its envoyproxy/ratelimit descriptor files"});
}

TEST(ConfigRls, RlsWithoutGrpcIsAnError) {
  EXPECT_EQ(errors_of("rls:\n  config_dir: /etc/ratelimit\n"),
            Errors{"t.yaml:2:3: rls: needs `grpc:`, the address the Envoy RLS API listens on"});
}

TEST(ConfigRls, MissingOrEmptyFolder) {
  EXPECT_EQ(errors_of("grpc: 127.0.0.1:8081\nrls:\n  shadow_mode: true\n"),
            Errors{"t.yaml:3:3: rls: `config_dir` is required: the folder of "
                   "envoyproxy/ratelimit descriptor files"});
  EXPECT_EQ(errors_of("grpc: 127.0.0.1:8081\nrls:\n  config_dir: \"\"\n"),
            Errors{"t.yaml:3:15: rls.config_dir: must not be empty"});
  EXPECT_EQ(errors_of("grpc: 127.0.0.1:8081\nrls:\n  config_dir: [a, b]\n"),
            Errors{"t.yaml:3:15: rls.config_dir: must be a folder path, got a list"});
}

TEST(ConfigRls, BadValuesAndUnknownKeysAreAllReported) {
  EXPECT_EQ(errors_of(R"(grpc: 127.0.0.1:8081
rls:
  config_dir: /etc/ratelimit
  response_headers: legacy
  shadow_mode: maybe
  dynamic_metadata: 1
  merge_domain: true
)"),
            (Errors{"t.yaml:4:21: rls.response_headers: must be one of off, ratelimit, draft, got "
                    "\"legacy\"",
                    "t.yaml:5:16: rls.shadow_mode: must be true or false, got \"maybe\"",
                    "t.yaml:6:21: rls.dynamic_metadata: must be true or false, got \"1\"",
                    "t.yaml:7:3: rls.merge_domain: unknown key; did you mean `merge_domains`?"}));
  EXPECT_EQ(errors_of("grpc: 127.0.0.1:8081\nrls: /etc/ratelimit\n"),
            Errors{"t.yaml:2:6: rls: must be a mapping with config_dir:, got \"/etc/ratelimit\""});
}

TEST(ConfigRls, NearLimitRatioIsAFractionUpToOne) {
  EXPECT_EQ(
      valid("grpc: 127.0.0.1:1\nrls: {config_dir: d, near_limit_ratio: 1}\n").rls->near_limit_ratio,
      1.0);
  EXPECT_EQ(valid("grpc: 127.0.0.1:1\nrls: {config_dir: d, near_limit_ratio: .5}\n")
                .rls->near_limit_ratio,
            0.5);
  for (const char* bad : {"0", "1.5", "80%", "-0.5", "1e-1", "0.8.1", "."}) {
    EXPECT_EQ(errors_of("grpc: 127.0.0.1:1\nrls: {config_dir: d, near_limit_ratio: " +
                        std::string(bad) + "}\n"),
              Errors{"t.yaml:2:40: rls.near_limit_ratio: must be a number greater than 0 and at "
                     "most 1, like 0.8, got \"" +
                     std::string(bad) + "\""})
        << bad;
  }
}

TEST(ConfigRls, MaxConnectionsIsAWholeNumberAndRoundTrips) {
  // 0: derived from the open-file limit when the port starts.
  EXPECT_EQ(valid("grpc: 127.0.0.1:1\nrls: {config_dir: d}\n").rls->max_connections, 0u);
  const Config c = valid("grpc: 127.0.0.1:1\nrls: {config_dir: d, max_connections: 500}\n");
  EXPECT_EQ(c.rls->max_connections, 500u);
  const std::string yaml = to_yaml(c);
  EXPECT_NE(yaml.find("  near_limit_ratio: 0.8\n  max_connections: 500\n"), std::string::npos)
      << yaml;
  EXPECT_TRUE(valid(yaml) == c) << yaml;
  EXPECT_EQ(to_yaml(valid("grpc: 127.0.0.1:1\nrls: {config_dir: d}\n")).find("max_connections"),
            std::string::npos);
  for (const char* bad : {"0", "-1", "many", "10000001", "1.5"}) {
    EXPECT_EQ(errors_of("grpc: 127.0.0.1:1\nrls: {config_dir: d, max_connections: " +
                        std::string(bad) + "}\n"),
              Errors{"t.yaml:2:39: rls.max_connections: must be a whole number from 1 to "
                     "10000000, got \"" +
                     std::string(bad) + "\""})
        << bad;
  }
}

TEST(ConfigRls, ABadGrpcAddressIsReportedAlone) {
  // The address error is enough: no second error about the missing rls section.
  EXPECT_EQ(errors_of("grpc: localhost\n"),
            Errors{"t.yaml:1:7: grpc: must be host:port like 127.0.0.1:8080 or [::1]:8080, got "
                   "\"localhost\" (the port is missing)"});
}

}  // namespace
}  // namespace sluice::policy
