// Connections opened at start and kept: a thread's connections open when it
// attaches, ready() waits for every attached thread's, and a call never
// waits for a connect or a TLS handshake (it fails at once while its
// connection is not up), so that its timeout is the call's alone. A Redis
// whose handshake is slow is played by a relay that holds each new
// connection's bytes for 300 ms (slow_start_proxy.h), longer than the calls'
// timeout; an established connection's calls pass at once.

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "slow_start_proxy.h"
#include "test_util.h"
#include "tls/test_certs.h"

namespace sluice::testing {
namespace {

constexpr auto kSlowHandshake = 300ms;

class ConnectTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SLUICE_REQUIRE_REDIS();
    ASSERT_TRUE(certs_.ok()) << certs_.error();
  }

  TestCerts certs_;
};

// rediss:// with an ACL user, through a relay that takes 300 ms to let a new
// connection's bytes through; the calls' timeout is 100 ms. A call made in
// the very turn its thread attaches fails at once (its connection is not up
// yet: it would otherwise wait for the handshake past its timeout), ready()
// says so, and once ready() the first calls are Redis's: exactly the
// capacity is allowed, and no call timed out.
TEST_F(ConnectTest, ACallNeverWaitsForItsConnectionsTlsHandshake) {
  RedisServer redis;
  redis.use_tls({&certs_, false});
  ASSERT_TRUE(redis.start());
  ASSERT_TRUE(redis.command({"ACL", "SETUSER", "alice", "on", ">s3cret", "~*", "&*", "+@all"}));
  SlowStartProxy far(redis.tls_port(), kSlowHandshake);

  RedisStoreOptions o;
  o.addresses = {"rediss://alice:s3cret@127.0.0.1:" + std::to_string(far.port())};
  o.tls.ca_file = certs_.ca();
  o.timeout = 100ms;
  o.health_interval = 50ms;
  auto created = RedisStore::create(o);
  ASSERT_TRUE(created.ok()) << created.error().message;
  std::shared_ptr<RedisStore> store = *created;
  ASSERT_TRUE(store->wait_ready(10s));

  const Limit two = must(Limit::token_bucket(2, 1, 1h));
  AsyncDriver loop(store, AsyncDriver::Attach::kLater);
  // One call from the loop's thread; its outcome, and whether it completed
  // before acquire_async() returned. `attach_first`: the thread attaches in
  // the same turn, just before.
  struct Outcome {
    Status status;
    Decision decision;
    bool at_once = false;
    bool ready_at_attach = false;
  };
  const auto call = [&](const std::string& key, bool attach_first) {
    Outcome outcome;
    const AcquireRequest request{&two, key, 1};
    std::promise<void> done;
    bool returned = false;  // acquire_async() has returned
    loop.run([&] {
      if (attach_first) {
        store->attach(loop.io());
        outcome.ready_at_attach = store->ready();
      }
      store->acquire_async({&request, 1}, us(kEpochUs), {&outcome.decision, 1}, [&](Status st) {
        outcome.status = std::move(st);
        outcome.at_once = !returned;
        done.set_value();
      });
      returned = true;
    });
    done.get_future().wait();
    return outcome;
  };

  const Outcome first = call("first", true);
  EXPECT_FALSE(first.ready_at_attach) << "ready() before the attached thread's connection is up";
  EXPECT_TRUE(first.at_once) << "the call waited for its connection";
  ASSERT_FALSE(first.status.ok());
  EXPECT_EQ(first.status.error().code, ErrorCode::kStoreUnavailable);
  EXPECT_NE(first.status.error().message.find("not connected to Redis"), std::string::npos)
      << first.status.error().message;

  ASSERT_TRUE(store->wait_ready(10s));
  const uint64_t timeouts = store->stats().timeouts;
  std::vector<bool> allowed;
  for (int i = 0; i < 3; ++i) {
    const Outcome o = call("k", false);
    ASSERT_TRUE(o.status.ok()) << o.status.error().message;
    allowed.push_back(o.decision.allowed);
  }
  EXPECT_EQ(allowed, (std::vector<bool>{true, true, false}));
  EXPECT_EQ(store->stats().timeouts, timeouts);
  // The store's own thread's connection and the attached thread's.
  EXPECT_EQ(store->connections().up, 2);
}

// ready() holds only while every attached thread's connections are up: a
// thread attached to a loop that does not run yet leaves the store not
// ready, until the loop runs.
TEST_F(ConnectTest, ReadyWaitsForEveryAttachedThread) {
  RedisServer redis;
  ASSERT_TRUE(redis.start());
  std::shared_ptr<RedisStore> store = make_store(local_options(redis.address()));
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->ready());

  boost::asio::io_context io;
  auto work = boost::asio::make_work_guard(io);
  std::promise<void> attached;
  std::promise<void> go;
  std::thread thread([&] {
    store->attach(io);  // this thread's connection opens on `io`, which runs once told
    attached.set_value();
    go.get_future().wait();
    io.run();
  });
  attached.get_future().wait();
  EXPECT_EQ(store->connections().down, 1);
  EXPECT_FALSE(store->ready());
  go.set_value();
  EXPECT_TRUE(store->wait_ready(10s));
  EXPECT_EQ(store->connections().up, 2);
  EXPECT_EQ(store->connections().down, 0);
  std::promise<void> detached;
  boost::asio::post(io, [&] {
    store->detach();
    detached.set_value();
  });
  detached.get_future().wait();
  work.reset();
  thread.join();
  EXPECT_TRUE(store->ready());  // detached: no longer waited for
  EXPECT_EQ(store->connections().up, 1);
}

// A Redis that refuses connections is not waited for: wait_connected()
// returns at the first refused connect, not after its timeout.
TEST_F(ConnectTest, WaitConnectedReturnsWhenRedisRefuses) {
  RedisStoreOptions o = local_options("127.0.0.1:" + std::to_string(free_port()));
  auto created = RedisStore::create(o);
  ASSERT_TRUE(created.ok()) << created.error().message;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE((*created)->wait_connected(60s).ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
  EXPECT_FALSE((*created)->ready());
  EXPECT_GE((*created)->stats().connection_errors, 1u);
}

}  // namespace
}  // namespace sluice::testing
