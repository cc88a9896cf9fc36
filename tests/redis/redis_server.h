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

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  const std::string& dir() const { return dir_; }

  // One command on a fresh connection (argv form). Null if unreachable.
  Reply command(const std::vector<std::string>& args) const;
  // The reply's integer, or -1000 when it is not an integer.
  long long integer(const std::vector<std::string>& args) const;
  // The reply's string/status, or "" otherwise.
  std::string text(const std::vector<std::string>& args) const;

 private:
  bool wait_answering(std::chrono::milliseconds timeout);
  bool signal_and_wait(int signal);
  // Chooses the port and binds the holding sockets (port_, holders_).
  bool hold_ports();

  std::vector<std::string> extra_;
  std::string dir_;
  int port_ = 0;
  std::vector<int> holders_;  // the sockets holding port_ (and the bus port)
  pid_t pid_ = -1;
  bool paused_ = false;
};

// Three masters with --cluster-enabled, joined by redis-cli --cluster create.
class RedisCluster {
 public:
  RedisCluster();
  bool start();
  RedisServer& node(size_t i) { return *nodes_[i]; }
  size_t size() const { return nodes_.size(); }
  std::vector<std::string> addresses() const;
  // The node id (CLUSTER MYID) of node i.
  std::string id(size_t i) const;
  // The index of the node serving `slot`, from node 0's CLUSTER SLOTS.
  int owner(int slot) const;

 private:
  std::vector<std::unique_ptr<RedisServer>> nodes_;
};

// A free TCP port on 127.0.0.1 (bound, read, closed).
int free_port();

}  // namespace sluice::testing
