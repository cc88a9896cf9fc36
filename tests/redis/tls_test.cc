// The store over TLS (rediss://) against redis-server's TLS port: an ACL
// user, client certificates, a server the store must refuse (unknown CA,
// certificate for another name), a TLS cluster, and a restart. Decisions are
// exact counts; a refused server is an unreachable Redis (kStoreUnavailable,
// which the caller's on_failure answers), counted and logged with OpenSSL's
// reason.

#include "test_util.h"
#include "tls/test_certs.h"

namespace sluice::testing {
namespace {

std::string tls_url(int port, const std::string& userinfo = "") {
  std::string url = "rediss://";
  if (!userinfo.empty()) url.append(userinfo).append("@");
  return url.append("127.0.0.1:").append(std::to_string(port));
}

// How many of `calls` acquisitions of one key are allowed.
int allowed(Store& store, const Limit& limit, const std::string& key, int calls) {
  int n = 0;
  for (int i = 0; i < calls; ++i) {
    Result<Decision> d = acquire_one(store, limit, key, us(kEpochUs));
    EXPECT_TRUE(d.ok()) << (d.ok() ? "" : d.error().message);
    if (d.ok() && d->allowed) ++n;
  }
  return n;
}

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SLUICE_REQUIRE_REDIS();
    ASSERT_TRUE(certs_.ok()) << certs_.error();
  }

  // A store that connects but cannot get through: every call fails as with
  // an unreachable Redis, and the log says why.
  void expect_refused(RedisStoreOptions o, const std::string& reason) {
    LogCapture log;
    o.reconnect_min = 10ms;
    o.reconnect_max = 50ms;
    auto created = RedisStore::create(std::move(o));
    ASSERT_TRUE(created.ok()) << created.error().message;
    std::shared_ptr<RedisStore> store = *created;
    EXPECT_TRUE(wait_until([&] { return store->stats().connection_errors >= 2; }, 5s));
    EXPECT_FALSE(store->ready());
    Result<Decision> d = acquire_one(*store, five_, "refused", us(kEpochUs));
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.error().code, ErrorCode::kStoreUnavailable);
    EXPECT_TRUE(wait_until([&] { return !log.line_with(reason).empty(); }, 5s))
        << "no log line saying " << reason << "; the log:\n"
        << log.all();
  }

  // Starts `server` with TLS; options for a store of it that trusts its CA.
  RedisStoreOptions start_tls(RedisServer& server, bool auth_clients = false,
                              const std::string& userinfo = "") {
    server.use_tls({&certs_, auth_clients});
    EXPECT_TRUE(server.start());
    RedisStoreOptions o = local_options(tls_url(server.tls_port(), userinfo));
    o.tls.ca_file = certs_.ca();
    return o;
  }

  TestCerts certs_;
  const Limit five_ = must(Limit::fixed_window(5, std::chrono::hours(1)));
};

TEST_F(TlsTest, AclUserOverTlsDecidesExactly) {
  // alice may do anything; the default user only PING and GET, so the
  // decisions below can only come from alice's connection.
  RedisServer server({"--user", "alice", "on", ">secret", "~*", "&*", "+@all", "--user", "default",
                      "on", "nopass", "~*", "-@all", "+ping", "+get"});
  RedisStoreOptions o = start_tls(server, false, "alice:secret");
  ASSERT_NE(server.text({"EVAL", "return 1", "0"}).find("NOPERM"), std::string::npos);
  std::shared_ptr<RedisStore> store = make_store(o);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(allowed(*store, five_, "acl", 8), 5);
  EXPECT_EQ(fixed_window_count(
                server.command({"GET", store->redis_window_key(five_, "acl", us(kEpochUs))})),
            5);
  // Pipelined calls of one loop turn, over TLS.
  AsyncDriver driver(store);
  const auto outcomes = driver.calls(five_, std::vector<std::string>(9, "acl-async"), us(kEpochUs));
  int async_allowed = 0;
  for (const auto& out : outcomes) {
    ASSERT_TRUE(out.status.ok()) << out.status.error().message;
    async_allowed += out.decision.allowed ? 1 : 0;
  }
  EXPECT_EQ(async_allowed, 5);
  EXPECT_EQ(store->stats().connection_errors, 0u);
}

TEST_F(TlsTest, WrongPasswordOverTlsIsRefused) {
  RedisServer server({"--user", "alice", "on", ">secret", "~*", "&*", "+@all", "--user", "default",
                      "on", "nopass", "-@all", "+ping"});
  RedisStoreOptions o = start_tls(server, false, "alice:wrong");
  expect_refused(o, "WRONGPASS");
}

TEST_F(TlsTest, ClientCertificateRequiredByTheServer) {
  RedisServer server;
  RedisStoreOptions o = start_tls(server, true);

  RedisStoreOptions with_cert = o;
  with_cert.tls.cert_file = certs_.client_cert();
  with_cert.tls.key_file = certs_.client_key();
  std::shared_ptr<RedisStore> store = make_store(with_cert);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(allowed(*store, five_, "cert", 7), 5);

  // Without one, the server ends the session (TLS 1.3: after the handshake,
  // with an alert that the log names).
  expect_refused(o, "certificate required");
}

TEST_F(TlsTest, ServerSignedByAnotherCaIsRefused) {
  RedisServer server;
  RedisStoreOptions o = start_tls(server);
  o.tls.ca_file = certs_.other_ca();
  expect_refused(o, "TLS handshake with 127.0.0.1:" + std::to_string(server.tls_port()) +
                        " failed: certificate verify failed: ");
}

TEST_F(TlsTest, CertificateForAnotherNameIsRefusedAndTheRightNameServes) {
  RedisServer server;
  RedisStoreOptions o = start_tls(server);
  RedisStoreOptions wrong = o;
  wrong.tls.server_name = "redis.example.com";
  expect_refused(wrong, "certificate verify failed: hostname mismatch");

  // Connecting by IP, verifying the DNS name the certificate carries.
  RedisStoreOptions by_name = o;
  by_name.tls.server_name = "localhost";
  std::shared_ptr<RedisStore> store = make_store(by_name);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(allowed(*store, five_, "name", 6), 5);
}

TEST_F(TlsTest, ReconnectsAfterTheTlsServerRestarts) {
  RedisServer server;
  RedisStoreOptions o = start_tls(server);
  o.reconnect_min = 10ms;
  o.reconnect_max = 100ms;
  std::shared_ptr<RedisStore> store = make_store(o);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(allowed(*store, five_, "before", 3), 3);
  const uint64_t reconnects = store->stats().reconnects;

  server.kill();
  EXPECT_TRUE(wait_until([&] { return !store->ready(); }, 5s));
  Result<Decision> down = acquire_one(*store, five_, "down", us(kEpochUs));
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.error().code, ErrorCode::kStoreUnavailable);

  ASSERT_TRUE(server.start());  // same ports, empty data set
  EXPECT_TRUE(store->wait_ready(5s));
  EXPECT_TRUE(
      wait_until([&] { return acquire_one(*store, five_, "probe", us(kEpochUs)).ok(); }, 5s));
  EXPECT_GT(store->stats().reconnects, reconnects);
  EXPECT_EQ(allowed(*store, five_, "after", 8), 5);
}

TEST_F(TlsTest, ClusterOverTlsAdmitsExactlyTheCapacity) {
  RedisCluster cluster;
  cluster.use_tls({&certs_, false});
  ASSERT_TRUE(cluster.start());
  RedisStoreOptions o = local_options(tls_url(cluster.node(0).tls_port()));
  o.cluster = true;
  o.tls.ca_file = certs_.ca();
  std::shared_ptr<RedisStore> store = make_store(o);
  ASSERT_NE(store, nullptr);
  // Keys on every master: each admits exactly five of eight.
  std::vector<bool> masters_seen(3, false);
  for (int k = 0; k < 12; ++k) {
    const std::string key = "cluster-" + std::to_string(k);
    const int owner = cluster.owner(RedisStore::key_slot(store->redis_key(five_, key)));
    ASSERT_GE(owner, 0);
    masters_seen[static_cast<size_t>(owner)] = true;
    EXPECT_EQ(allowed(*store, five_, key, 8), 5) << key;
  }
  EXPECT_EQ(masters_seen, std::vector<bool>(3, true));
  EXPECT_EQ(store->stats().connection_errors, 0u);
}

TEST_F(TlsTest, TlsFilesAndAddressesAreCheckedAtCreate) {
  RedisStoreOptions o = local_options("rediss://127.0.0.1:1");
  o.tls.ca_file = certs_.dir() + "/missing.pem";
  auto missing = RedisStore::create(o);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(missing.error().message.find("tls ca_file: cannot open"), std::string::npos)
      << missing.error().message;

  o.tls.ca_file = certs_.ca();
  o.tls.cert_file = certs_.client_cert();
  o.tls.key_file = certs_.server_key();  // another certificate's key
  auto mismatch = RedisStore::create(o);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.error().message.find("tls key_file"), std::string::npos)
      << mismatch.error().message;

  o.tls.key_file.clear();
  EXPECT_FALSE(RedisStore::create(o).ok()) << "cert_file without key_file";

  RedisStoreOptions plain = local_options("127.0.0.1:1");
  plain.tls.ca_file = certs_.ca();
  EXPECT_FALSE(RedisStore::create(plain).ok()) << "tls settings with TLS off";

  RedisStoreOptions mixed = local_options("rediss://127.0.0.1:1");
  mixed.addresses.push_back("redis://127.0.0.1:2");
  mixed.cluster = true;
  EXPECT_FALSE(RedisStore::create(mixed).ok()) << "rediss:// and redis:// seeds";
}

}  // namespace
}  // namespace sluice::testing
