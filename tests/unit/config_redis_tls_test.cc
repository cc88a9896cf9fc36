// store.redis.tls and rediss:// in the config loader: what a valid block
// gives the store, and each mistake reported at its key (the files are
// loaded as the store loads them).

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "policy/config_loader.h"
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

class RedisTlsConfig : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(certs_.ok()) << certs_.error(); }

  // A store.redis block with `url` and a tls block of `tls_lines`.
  static std::string config(const std::string& url, const std::string& tls_lines) {
    std::string yaml = "store:\n  backend: redis\n  redis:\n    url: ";
    yaml.append(url).append("\n");
    if (!tls_lines.empty()) yaml.append("    tls:\n").append(tls_lines);
    return yaml;
  }

  sluice::testing::TestCerts certs_;
};

TEST_F(RedisTlsConfig, RedissUrlWithCaAndClientCertificate) {
  const std::string yaml =
      config("rediss://alice:secret@127.0.0.1:6380",
             "      ca_file: " + certs_.ca() + "\n      cert_file: " + certs_.client_cert() +
                 "\n      key_file: " + certs_.client_key() + "\n      server_name: localhost\n");
  LoadResult r = load(yaml);
  ASSERT_TRUE(r.errors.empty()) << r.errors.front().text();
  const RedisConfig& redis = r.config->store.redis;
  EXPECT_TRUE(redis.tls.enabled);
  EXPECT_EQ(redis.username, "alice");
  EXPECT_EQ(redis.password, "secret");
  EXPECT_EQ(redis.tls.ca_file, certs_.ca());
  EXPECT_EQ(redis.tls.cert_file, certs_.client_cert());
  EXPECT_EQ(redis.tls.key_file, certs_.client_key());
  EXPECT_EQ(redis.tls.server_name, "localhost");
}

TEST_F(RedisTlsConfig, RedissUrlAloneUsesTheSystemCas) {
  LoadResult r = load(config("rediss://127.0.0.1:6380", ""));
  ASSERT_TRUE(r.errors.empty());
  EXPECT_TRUE(r.config->store.redis.tls.enabled);
  EXPECT_TRUE(r.config->store.redis.tls.ca_file.empty());
  EXPECT_FALSE(load(config("redis://127.0.0.1:6380", "")).config->store.redis.tls.enabled);
}

TEST_F(RedisTlsConfig, MissingFileIsReportedAtItsKey) {
  const std::string missing = certs_.dir() + "/nope.pem";
  EXPECT_EQ(errors_of(config("rediss://127.0.0.1:6380", "      ca_file: " + missing + "\n")),
            Errors{"t.yaml:6:16: store.redis.tls.ca_file: cannot open " + missing +
                   ": No such file or directory"});
}

TEST_F(RedisTlsConfig, KeyOfAnotherCertificateIsReportedAtKeyFile) {
  const Errors errors = errors_of(
      config("rediss://127.0.0.1:6380", "      cert_file: " + certs_.client_cert() +
                                            "\n      key_file: " + certs_.server_key() + "\n"));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].rfind("t.yaml:7:17: store.redis.tls.key_file: ", 0), 0u) << errors[0];
  EXPECT_NE(errors[0].find("mismatch"), std::string::npos) << errors[0];
}

TEST_F(RedisTlsConfig, CertificateWithoutKey) {
  EXPECT_EQ(errors_of(config("rediss://127.0.0.1:6380",
                             "      cert_file: " + certs_.client_cert() + "\n")),
            Errors{"t.yaml:6:18: store.redis.tls.cert_file: `cert_file` and `key_file` go "
                   "together: give both or neither"});
}

TEST_F(RedisTlsConfig, TlsBlockWithPlainUrlIsAnError) {
  EXPECT_EQ(errors_of(config("redis://127.0.0.1:6379", "      ca_file: " + certs_.ca() + "\n")),
            Errors{"t.yaml:6:7: store.redis.tls: needs a rediss:// url: with redis:// the "
                   "connection is plain TCP"});
}

TEST_F(RedisTlsConfig, TlsBlockWithAddressesTurnsTlsOn) {
  const std::string yaml =
      "store:\n  backend: redis\n  redis:\n    cluster: true\n"
      "    addresses: [127.0.0.1:7000, 127.0.0.1:7001]\n    tls:\n"
      "      ca_file: " +
      certs_.ca() + "\n";
  LoadResult r = load(yaml);
  ASSERT_TRUE(r.errors.empty()) << r.errors.front().text();
  EXPECT_TRUE(r.config->store.redis.tls.enabled);
}

}  // namespace
}  // namespace sluice::policy
