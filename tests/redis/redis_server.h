// Test support: real redis-server processes on free loopback ports, started
// and stopped by PID, and a small synchronous client to inspect them.
//
// A RedisServer holds its port (and a cluster node its bus port, port +
// 10000) from its first start() to its destruction: a socket bound to it with
// SO_REUSEADDR, never listening. redis-server binds the same port beside it
// (Linux lets SO_REUSEADDR sockets share a port while none of the others
// listens), and no other test can take the port while this server is
// stopped: the kernel hands a bound port neither to bind(port 0) nor to an
// outgoing connection. So a restart after stop() or kill() finds its port free.
//
// With use_tls() a server also listens for TLS on a second held port
// (tls_port()); its plain port stays, for the test's own inspection (hiredis
// here has no TLS). A cluster with TLS runs its bus and replication over TLS
// and announces its TLS ports to TLS clients.
//
// A RedisSentinelGroup is a master, its replica and three Redis Sentinels
// (redis-server --sentinel) watching it, each a RedisServer.
#pragma once

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <sys/types.h>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace sluice::testing {

// Whether redis-server (and redis-cli) can be found on PATH.
bool redis_installed();

// Whether a missing redis-server may skip the Redis tests rather than fail
// them: only with SLUICE_ALLOW_MISSING_REDIS=1 in the environment, for a
// developer without Redis. CI never sets it, so there a missing Redis fails.
bool missing_redis_allowed();

// The failure (or, see missing_redis_allowed(), skip) message.
inline constexpr const char* kRedisMissing =
    "redis-server/redis-cli not found on PATH: the Redis tests need them "
    "(scripts/install-deps.sh installs redis-server and redis-tools); "
    "SLUICE_ALLOW_MISSING_REDIS=1 skips these tests instead";

// In a test body or SetUp(): fails the test, or skips it when allowed, if
// redis-server is not installed.
#define SLUICE_REQUIRE_REDIS()                            \
  do {                                                    \
    if (!::sluice::testing::redis_installed()) {          \
      if (::sluice::testing::missing_redis_allowed())     \
        GTEST_SKIP() << ::sluice::testing::kRedisMissing; \
      FAIL() << ::sluice::testing::kRedisMissing;         \
    }                                                     \
  } while (0)

// A reply owned by the test.
struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

class TestCerts;

// How a server speaks TLS.
struct RedisTlsServer {
  const TestCerts* certs = nullptr;  // its certificate and CA; null: no TLS
  bool auth_clients = false;         // --tls-auth-clients: a client certificate is required
  // --tls-replication yes: a replica syncs over TLS and announces its TLS
  // port; a sentinel watches over TLS and announces its TLS port.
  bool replication = false;
};

class RedisServer {
 public:
  // extra: more redis-server arguments (e.g. {"--cluster-enabled", "yes"}).
  explicit RedisServer(std::vector<std::string> extra = {});
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  // Starts on a free port, held from then on: the same port again after
  // stop()/kill(). Returns false with a message on stderr if it does not
  // answer in 5 s.
  bool start();
  void stop();  // SIGTERM, wait
  void kill();  // SIGKILL, wait
  // SIGSTOP, and wait until the process has stopped (kill() only queues the
  // signal): from then on it runs nothing, and replies it had not written
  // yet wait with it. False if it is not running.
  bool pause();
  // SIGCONT after pause(), and wait until the process runs again.
  bool resume();

  // Before the first start(): also listen for TLS on tls_port().
  void use_tls(RedisTlsServer tls) { tls_ = tls; }
  // Before start(): a config file, written in dir() and read first (a
  // sentinel needs one, and writes its state back to it).
  void use_config(std::string text) { config_ = std::move(text); }

  int port() const { return port_; }
  int tls_port() const { return tls_port_; }
  pid_t pid() const { return pid_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  const std::string& dir() const { return dir_; }

  // One command on a fresh connection (argv form). Null if unreachable.
  Reply command(const std::vector<std::string>& args) const;
  // The reply's integer, or -1000 when it is not an integer.
  long long integer(const std::vector<std::string>& args) const;
  // The reply's string/status, or "" otherwise.
  std::string text(const std::vector<std::string>& args) const;
  // Script calls run so far (EVALSHA and EVAL in INFO commandstats).
  long long script_calls() const;
  // What it says it is (ROLE): "master", "slave", "sentinel", or "" if it
  // does not answer.
  std::string role() const;
  // The value of `field` in INFO `section`, or "".
  std::string info(const std::string& section, const std::string& field) const;
  // READONLY, then one command, on one fresh connection: a cluster replica
  // then reads its own copy of a key rather than answering MOVED.
  Reply read_replica(const std::vector<std::string>& args) const;

 private:
  bool wait_answering(std::chrono::milliseconds timeout);
  bool signal_and_wait(int signal);
  // Each command in turn on one fresh connection; the last reply.
  Reply commands(const std::vector<std::vector<std::string>>& list) const;
  // Chooses the port and binds the holding sockets (port_, holders_).
  bool hold_ports();
  // With use_tls(): one more held port, for TLS (tls_port_).
  bool hold_tls_port();
  std::vector<std::string> tls_arguments() const;

  std::vector<std::string> extra_;
  RedisTlsServer tls_;
  std::string config_;
  std::string dir_;
  int port_ = 0;
  int tls_port_ = 0;
  std::vector<int> holders_;  // the sockets holding port_ (and the bus port)
  pid_t pid_ = -1;
  bool paused_ = false;
};

struct RedisClusterOptions {
  // Replicas per master. With replicas, a master that dies is replaced by its
  // replica (automatic failover) once the others have not heard from it for
  // node_timeout.
  size_t replicas = 0;
  std::chrono::milliseconds node_timeout{5'000};
};

// Three masters (with their replicas, if any) with --cluster-enabled, joined
// by redis-cli --cluster create. Nodes 0-2 are the masters when it starts;
// the replicas follow.
class RedisCluster {
 public:
  explicit RedisCluster(RedisClusterOptions options = {});
  // Before start(): TLS for clients, the cluster bus and replication.
  void use_tls(RedisTlsServer tls) { tls_ = tls; }
  // Returns once every node says cluster_state:ok, knows every other node
  // and its role, and every replica has finished its first sync (so that it
  // may be elected).
  bool start();
  RedisServer& node(size_t i) { return *nodes_[i]; }
  size_t size() const { return nodes_.size(); }
  std::vector<std::string> addresses() const;
  // "127.0.0.1:<tls port>" of each node (with use_tls()).
  std::vector<std::string> tls_addresses() const;
  // The node id (CLUSTER MYID) of node i.
  std::string id(size_t i) const;
  // The index of the node serving `slot`, from the CLUSTER SLOTS of the
  // first node that answers.
  int owner(int slot) const;
  // What node i says it is (ROLE): "master", "slave", or "" if it does not answer.
  std::string role(size_t i) const;
  // The index of a node replicating master i, or -1.
  int replica_of(size_t master) const;

 private:
  bool converged() const;

  RedisClusterOptions options_;
  RedisTlsServer tls_;
  std::vector<std::unique_ptr<RedisServer>> nodes_;
};

struct RedisSentinelGroupOptions {
  // sentinel down-after-milliseconds: how long the master may not answer
  // before a sentinel thinks it down.
  std::chrono::milliseconds down_after{1'000};
  // sentinel failover-timeout.
  std::chrono::milliseconds failover_timeout{10'000};
  // TLS for everyone (use_tls()): replication and the sentinels' watch over
  // TLS ports, which the sentinels name to their clients.
  const TestCerts* certs = nullptr;
};

// A master, its replica, and three sentinels that watch it as kMasterName
// (quorum 2), on free loopback ports.
class RedisSentinelGroup {
 public:
  static constexpr const char* kMasterName = "mymaster";

  explicit RedisSentinelGroup(RedisSentinelGroupOptions options = {});
  // Returns once every sentinel knows the master, its replica (in sync) and
  // the two other sentinels: a failover can then happen.
  bool start();
  RedisServer& master() { return *master_; }
  RedisServer& replica() { return *replica_; }
  RedisServer& sentinel(size_t i) { return *sentinels_[i]; }
  size_t sentinels() const { return sentinels_.size(); }
  // "127.0.0.1:<port>" of each sentinel (its TLS port with TLS).
  std::vector<std::string> sentinel_addresses() const;
  // "127.0.0.1:<port>" of the master (its TLS port with TLS).
  std::string master_address() const;
  std::string replica_address() const;
  // What sentinel i names as the master ("ip:port"), or "".
  std::string named_master(size_t i) const;
  // Returns once the replica's writes have caught up with the master's
  // (replication offsets equal), or false after `timeout`.
  bool wait_replicated(std::chrono::milliseconds timeout);

 private:
  std::string sentinel_config() const;
  bool watching() const;

  RedisSentinelGroupOptions options_;
  std::unique_ptr<RedisServer> master_;
  std::unique_ptr<RedisServer> replica_;
  std::vector<std::unique_ptr<RedisServer>> sentinels_;
};

// The count in a Sluice fixed_window counter (RedisStore::redis_window_key())
// as GET returns it, or 0 for none (nil).
long long fixed_window_count(const Reply& state);

// A free TCP port on 127.0.0.1 (bound, read, closed).
int free_port();

}  // namespace sluice::testing
