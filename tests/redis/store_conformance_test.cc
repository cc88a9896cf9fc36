// The store conformance table (tests/conformance) on a Redis store: one
// redis-server, and a 3-master Redis Cluster, each started for the test on
// free loopback ports. The table's times are given as `now`
// (RedisTimeSource::kLocal); the store reports durations in whole
// microseconds.
#include "conformance/store_conformance.h"
#include "test_util.h"

namespace sluice {
namespace conformance {
namespace {

using testing::RedisCluster;
using testing::RedisServer;

// Long enough for anything on a loaded machine: this is not a latency test.
constexpr auto kStoreTimeout = std::chrono::seconds(5);
constexpr auto kReadyBound = std::chrono::seconds(30);

// Fails the test (or skips it, when allowed) if Redis is not installed.
void require_redis() {
  SLUICE_REQUIRE_REDIS();
}

RedisStoreOptions options(std::vector<std::string> addresses, bool cluster) {
  RedisStoreOptions o;
  o.addresses = std::move(addresses);
  o.cluster = cluster;
  o.time_source = RedisTimeSource::kLocal;
  o.timeout = kStoreTimeout;
  // Key TTLs run on Redis's clock while the table moves its own: keep every
  // key far longer than a test takes.
  o.ttl_extra = std::chrono::hours(1);
  return o;
}

// A store on `servers` (a RedisServer or a RedisCluster, started), which it
// owns: they stop when the store is released.
template <class Servers>
std::shared_ptr<Store> store_on(std::unique_ptr<Servers> servers, RedisStoreOptions o) {
  struct Owner {
    std::unique_ptr<Servers> servers;
    std::shared_ptr<RedisStore> store;
  };
  auto owner = std::make_shared<Owner>();
  owner->servers = std::move(servers);
  auto created = RedisStore::create(std::move(o));
  if (!created.ok()) {
    ADD_FAILURE() << created.error().message;
    return nullptr;
  }
  owner->store = *created;
  if (!owner->store->wait_ready(kReadyBound)) {
    ADD_FAILURE() << "the Redis store was not ready within " << kReadyBound.count() << " s";
    return nullptr;
  }
  return std::shared_ptr<Store>(owner, owner->store.get());
}

std::shared_ptr<Store> single_server() {
  require_redis();
  if (::testing::Test::IsSkipped() || ::testing::Test::HasFatalFailure()) return nullptr;
  auto server = std::make_unique<RedisServer>();
  if (!server->start()) return nullptr;
  const std::string address = server->address();
  return store_on(std::move(server), options({address}, false));
}

std::shared_ptr<Store> cluster() {
  require_redis();
  if (::testing::Test::IsSkipped() || ::testing::Test::HasFatalFailure()) return nullptr;
  auto nodes = std::make_unique<RedisCluster>();
  if (!nodes->start()) return nullptr;
  const std::vector<std::string> addresses = nodes->addresses();
  return store_on(std::move(nodes), options(addresses, true));
}

const StoreRow kRedisRows[] = {
    {"Redis", single_server, std::chrono::microseconds(1), true},
    {"RedisCluster", cluster, std::chrono::microseconds(1), true, true},
};

}  // namespace

SLUICE_STORE_CONFORMANCE(Stores, ::testing::ValuesIn(kRedisRows));

}  // namespace conformance
}  // namespace sluice
