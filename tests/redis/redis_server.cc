#include "redis_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "tls/test_certs.h"

namespace sluice::testing {
namespace {

bool on_path(const char* program) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  std::string p(path);
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find(':', start);
    if (end == std::string::npos) end = p.size();
    const std::string candidate = p.substr(start, end - start) + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return true;
    start = end + 1;
  }
  return false;
}

pid_t spawn(const std::vector<std::string>& args, const std::string& log_path) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    // Dies with the test process, even if the test aborts before stopping it.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    const int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::close(fd);
    }
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

// A TCP socket bound to 127.0.0.1:port (0: any free port) with
// SO_REUSEADDR, not listening, or -1. Not inherited by the processes spawned.
int bind_holder(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

int bound_port(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return ntohs(addr.sin_port);
}

// A cluster node listens on its port and on the bus port, 10000 above.
constexpr int kClusterBusOffset = 10'000;

}  // namespace

bool redis_installed() {
  return on_path("redis-server") && on_path("redis-cli");
}

bool missing_redis_allowed() {
  const char* allow = std::getenv("SLUICE_ALLOW_MISSING_REDIS");
  return allow != nullptr && std::string(allow) == "1";
}

long long fixed_window_count(const Reply& state) {
  if (!state || state->type != REDIS_REPLY_STRING) return 0;
  return std::stoll(std::string(state->str, state->len));
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

RedisServer::RedisServer(std::vector<std::string> extra) : extra_(std::move(extra)) {
  char tmpl[] = "/tmp/sluice-redis-XXXXXX";
  const char* d = ::mkdtemp(tmpl);
  dir_ = d != nullptr ? d : "/tmp";
}

RedisServer::~RedisServer() {
  stop();
  for (int fd : holders_) ::close(fd);
  std::error_code ec;
  if (dir_ != "/tmp") std::filesystem::remove_all(dir_, ec);
}

bool RedisServer::hold_ports() {
  const bool cluster = std::find(extra_.begin(), extra_.end(), "--cluster-enabled") != extra_.end();
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int fd = bind_holder(0);
    if (fd < 0) break;
    const int port = bound_port(fd);
    if (!cluster) {
      holders_ = {fd};
      port_ = port;
      return hold_tls_port();
    }
    const int bus = port + kClusterBusOffset <= 65'535 ? bind_holder(port + kClusterBusOffset) : -1;
    if (bus >= 0) {
      holders_ = {fd, bus};
      port_ = port;
      return hold_tls_port();
    }
    ::close(fd);  // no bus port above this one: another
  }
  std::fprintf(stderr, "no free loopback port to hold for redis-server\n");
  return false;
}

bool RedisServer::hold_tls_port() {
  if (tls_.certs == nullptr) return true;
  const int fd = bind_holder(0);
  if (fd < 0) return false;
  holders_.push_back(fd);
  tls_port_ = bound_port(fd);
  return true;
}

std::vector<std::string> RedisServer::tls_arguments() const {
  if (tls_.certs == nullptr) return {};
  const TestCerts& c = *tls_.certs;
  std::vector<std::string> args = {"--tls-port",         std::to_string(tls_port_),
                                   "--tls-cert-file",    c.server_cert(),
                                   "--tls-key-file",     c.server_key(),
                                   "--tls-ca-cert-file", c.ca(),
                                   "--tls-auth-clients", tls_.auth_clients ? "yes" : "no"};
  if (std::find(extra_.begin(), extra_.end(), "--cluster-enabled") != extra_.end()) {
    // The bus and replication between nodes over TLS too; a node presents
    // its server certificate as a client of another.
    for (const char* a : {"--tls-cluster", "yes", "--tls-replication", "yes"}) args.push_back(a);
  } else if (tls_.replication) {
    for (const char* a : {"--tls-replication", "yes"}) args.push_back(a);
  }
  return args;
}

bool RedisServer::start() {
  // Held ports are bound with SO_REUSEADDR (so that redis-server can bind
  // them too), which another test process's holder may also do for the same
  // port (its bus port, say): a first start that fails moves to new ports. A
  // restart keeps its port, which clients and the cluster know.
  const bool first_start = port_ == 0;
  if (first_start && !hold_ports()) return false;
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (attempt > 0 && first_start) {
      for (int fd : holders_) ::close(fd);
      holders_.clear();
      if (!hold_ports()) return false;
    }
    std::vector<std::string> args = {"redis-server"};
    if (!config_.empty()) {
      // Written once: a sentinel keeps its state in it across restarts.
      const std::string path = dir_ + "/redis.conf";
      if (!std::filesystem::exists(path)) std::ofstream(path) << config_;
      args.push_back(path);
    }
    for (std::string a : std::vector<std::string>{
             "--port", std::to_string(port_), "--bind", "127.0.0.1", "--save", "", "--appendonly",
             "no", "--dir", dir_, "--daemonize", "no", "--protected-mode", "no"})
      args.push_back(std::move(a));
    for (const std::string& e : extra_) args.push_back(e);
    for (std::string& t : tls_arguments()) args.push_back(std::move(t));
    pid_ = spawn(args, dir_ + "/redis.log");
    if (pid_ > 0 && wait_answering(std::chrono::seconds(5))) return true;
    kill();
  }
  // The folder goes with the test: its log's end is shown here.
  std::ifstream log(dir_ + "/redis.log");
  std::vector<std::string> lines;
  for (std::string line; std::getline(log, line);) lines.push_back(line);
  std::fprintf(stderr, "redis-server did not start on port %d; the end of its log:\n", port_);
  for (size_t i = lines.size() > 8 ? lines.size() - 8 : 0; i < lines.size(); ++i) {
    std::fprintf(stderr, "  %s\n", lines[i].c_str());
  }
  return false;
}

void RedisServer::stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  if (paused_) ::kill(pid_, SIGCONT);  // a stopped process acts on SIGTERM only once continued
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  paused_ = false;
}

void RedisServer::kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  paused_ = false;
}

bool RedisServer::pause() {
  if (paused_ || !signal_and_wait(SIGSTOP)) return false;
  paused_ = true;
  return true;
}

bool RedisServer::resume() {
  // Only after pause(): SIGCONT to a running process reports no change to wait for.
  if (!paused_) return false;
  paused_ = false;
  return signal_and_wait(SIGCONT);
}

bool RedisServer::signal_and_wait(int signal) {
  if (pid_ <= 0 || ::kill(pid_, signal) != 0) return false;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, signal == SIGSTOP ? WUNTRACED : WCONTINUED);
    if (r < 0 && errno == EINTR) continue;
    if (r != pid_) return false;
    if (WIFEXITED(status) || WIFSIGNALED(status)) {
      pid_ = -1;
      return false;
    }
    if (signal == SIGSTOP ? WIFSTOPPED(status) : WIFCONTINUED(status)) return true;
  }
}

bool RedisServer::wait_answering(std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (text({"PING"}) == "PONG") return true;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {  // exited (port taken?)
      pid_ = -1;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

Reply RedisServer::command(const std::vector<std::string>& args) const {
  return commands({args});
}

Reply RedisServer::read_replica(const std::vector<std::string>& args) const {
  return commands({{"READONLY"}, args});
}

Reply RedisServer::commands(const std::vector<std::vector<std::string>>& list) const {
  timeval tv{2, 0};
  redisContext* c = redisConnectWithTimeout("127.0.0.1", port_, tv);
  if (c == nullptr) return nullptr;
  if (c->err != 0) {
    redisFree(c);
    return nullptr;
  }
  redisSetTimeout(c, tv);
  Reply last;
  for (const std::vector<std::string>& args : list) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const std::string& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    last.reset(static_cast<redisReply*>(
        redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data())));
    if (!last) break;
  }
  redisFree(c);
  return last;
}

long long RedisServer::integer(const std::vector<std::string>& args) const {
  Reply r = command(args);
  if (!r || r->type != REDIS_REPLY_INTEGER) return -1000;
  return r->integer;
}

long long RedisServer::script_calls() const {
  const std::string info = text({"INFO", "commandstats"});
  long long n = 0;
  for (const std::string name : {"cmdstat_evalsha:calls=", "cmdstat_eval:calls="}) {
    const size_t at = info.find(name);
    if (at != std::string::npos) n += std::stoll(info.substr(at + name.size()));
  }
  return n;
}

std::string RedisServer::role() const {
  Reply r = command({"ROLE"});
  if (!r || r->type != REDIS_REPLY_ARRAY || r->elements == 0 ||
      r->element[0]->type != REDIS_REPLY_STRING)
    return "";
  return std::string(r->element[0]->str, r->element[0]->len);
}

std::string RedisServer::info(const std::string& section, const std::string& field) const {
  const std::string text = this->text({"INFO", section});
  const std::string key = "\r\n" + field + ":";
  const std::string all = "\r\n" + text;
  const size_t at = all.find(key);
  if (at == std::string::npos) return "";
  const size_t start = at + key.size();
  return all.substr(start, all.find("\r\n", start) - start);
}

std::string RedisServer::text(const std::vector<std::string>& args) const {
  Reply r = command(args);
  if (!r) return "";
  if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS ||
      r->type == REDIS_REPLY_ERROR)
    return std::string(r->str, r->len);
  return "";
}

RedisCluster::RedisCluster(RedisClusterOptions options) : options_(options) {
  for (size_t i = 0; i < 3 * (1 + options_.replicas); ++i) {
    nodes_.push_back(std::make_unique<RedisServer>(std::vector<std::string>{
        "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout",
        std::to_string(options_.node_timeout.count()), "--cluster-require-full-coverage", "no",
        // A replica's first sync starts at once, not after the 5 s that
        // diskless replication waits by default for more replicas.
        "--repl-diskless-sync-delay", "0"}));
  }
}

bool RedisCluster::start() {
  for (auto& n : nodes_) {
    n->use_tls(tls_);
    if (!n->start()) return false;
  }
  std::vector<std::string> args = {"redis-cli", "--cluster", "create"};
  for (const auto& a : addresses()) args.push_back(a);
  args.push_back("--cluster-replicas");
  args.push_back(std::to_string(options_.replicas));
  args.push_back("--cluster-yes");
  const pid_t pid = spawn(args, nodes_[0]->dir() + "/create.log");
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "redis-cli --cluster create failed; see %s/create.log\n",
                 nodes_[0]->dir().c_str());
    return false;
  }
  // Replicas take a full sync and their role spreads by gossip: a test that
  // kills a master before then would see no failover.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < until) {
    if (converged()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::fprintf(stderr, "the cluster did not reach cluster_state:ok with every replica in sync\n");
  return false;
}

bool RedisCluster::converged() const {
  const size_t replicas = 3 * options_.replicas;
  for (const auto& n : nodes_) {
    if (n->text({"CLUSTER", "INFO"}).find("cluster_state:ok") == std::string::npos) return false;
    // One line per node: every node known, none in handshake or failing,
    // every replica known as one.
    const std::string nodes = n->text({"CLUSTER", "NODES"});
    size_t lines = 0;
    size_t slaves = 0;
    size_t start = 0;
    while (start < nodes.size()) {
      size_t end = nodes.find('\n', start);
      if (end == std::string::npos) end = nodes.size();
      const std::string line = nodes.substr(start, end - start);
      start = end + 1;
      if (line.empty()) continue;
      ++lines;
      if (line.find("handshake") != std::string::npos || line.find("fail") != std::string::npos ||
          line.find("noaddr") != std::string::npos)
        return false;
      if (line.find("slave") != std::string::npos) ++slaves;
    }
    if (lines != nodes_.size() || slaves != replicas) return false;
  }
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const std::string r = role(i);
    if (r != (i < 3 ? "master" : "slave")) return false;
    if (r == "slave" &&
        nodes_[i]->text({"INFO", "replication"}).find("master_link_status:up") == std::string::npos)
      return false;
  }
  return true;
}

std::vector<std::string> RedisCluster::addresses() const {
  std::vector<std::string> out;
  for (const auto& n : nodes_) out.push_back(n->address());
  return out;
}

std::vector<std::string> RedisCluster::tls_addresses() const {
  std::vector<std::string> out;
  for (const auto& n : nodes_) out.push_back("127.0.0.1:" + std::to_string(n->tls_port()));
  return out;
}

std::string RedisCluster::id(size_t i) const {
  return nodes_[i]->text({"CLUSTER", "MYID"});
}

int RedisCluster::owner(int slot) const {
  Reply r;
  for (const auto& n : nodes_) {
    if (n->pid() <= 0) continue;
    r = n->command({"CLUSTER", "SLOTS"});
    if (r && r->type == REDIS_REPLY_ARRAY) break;
  }
  if (!r || r->type != REDIS_REPLY_ARRAY) return -1;
  for (size_t i = 0; i < r->elements; ++i) {
    const redisReply* range = r->element[i];
    if (range->element[0]->integer <= slot && slot <= range->element[1]->integer) {
      const long long port = range->element[2]->element[1]->integer;
      for (size_t n = 0; n < nodes_.size(); ++n) {
        if (nodes_[n]->port() == port) return static_cast<int>(n);
      }
    }
  }
  return -1;
}

std::string RedisCluster::role(size_t i) const {
  return nodes_[i]->role();
}

int RedisCluster::replica_of(size_t master) const {
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (i == master || nodes_[i]->pid() <= 0) continue;
    // A replica's ROLE: "slave", master ip, master port, link state, offset.
    Reply r = nodes_[i]->command({"ROLE"});
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
        r->element[0]->type != REDIS_REPLY_STRING || std::string(r->element[0]->str) != "slave" ||
        r->element[2]->type != REDIS_REPLY_INTEGER)
      continue;
    if (r->element[2]->integer == nodes_[master]->port()) return static_cast<int>(i);
  }
  return -1;
}

RedisSentinelGroup::RedisSentinelGroup(RedisSentinelGroupOptions options) : options_(options) {}

namespace {

// "127.0.0.1:<the port clients use>": the TLS port with TLS.
std::string client_address(const RedisServer& server, bool tls) {
  return "127.0.0.1:" + std::to_string(tls ? server.tls_port() : server.port());
}

// A replica's first sync starts at once, not after the 5 s that diskless
// replication waits by default for more replicas.
const std::vector<std::string> kNoSyncDelay = {"--repl-diskless-sync-delay", "0"};

}  // namespace

bool RedisSentinelGroup::start() {
  const bool tls = options_.certs != nullptr;
  const RedisTlsServer server_tls{options_.certs, false, true};
  master_ = std::make_unique<RedisServer>(kNoSyncDelay);
  // A config file each: the sentinels rewrite theirs on a failover, and the
  // promoted replica's (CONFIG REWRITE).
  master_->use_config("# master\n");
  if (tls) master_->use_tls(server_tls);
  if (!master_->start()) return false;
  const int master_port = tls ? master_->tls_port() : master_->port();
  std::vector<std::string> replica_args = kNoSyncDelay;
  for (const std::string a : {"--replicaof", "127.0.0.1"}) replica_args.push_back(a);
  replica_args.push_back(std::to_string(master_port));
  replica_ = std::make_unique<RedisServer>(replica_args);
  replica_->use_config("# replica\n");
  if (tls) replica_->use_tls(server_tls);
  if (!replica_->start()) return false;
  for (int i = 0; i < 3; ++i) {
    sentinels_.push_back(std::make_unique<RedisServer>(std::vector<std::string>{"--sentinel"}));
    sentinels_.back()->use_config(sentinel_config());
    if (tls) sentinels_.back()->use_tls(server_tls);
    if (!sentinels_.back()->start()) return false;
  }
  // Sentinels find the replica in the master's INFO and each other by hello
  // messages (every 2 s).
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < until) {
    if (watching()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::fprintf(stderr,
               "the sentinels did not come to know the master, its replica and each other\n");
  return false;
}

std::string RedisSentinelGroup::sentinel_config() const {
  const bool tls = options_.certs != nullptr;
  const std::string name = kMasterName;
  return "sentinel monitor " + name + " 127.0.0.1 " +
         std::to_string(tls ? master_->tls_port() : master_->port()) + " 2\n" +
         "sentinel down-after-milliseconds " + name + " " +
         std::to_string(options_.down_after.count()) + "\n" + "sentinel failover-timeout " + name +
         " " + std::to_string(options_.failover_timeout.count()) + "\n" +
         "sentinel parallel-syncs " + name + " 1\n";
}

bool RedisSentinelGroup::watching() const {
  if (replica_->info("replication", "master_link_status") != "up") return false;
  for (const auto& s : sentinels_) {
    Reply r = s->command({"SENTINEL", "MASTER", kMasterName});
    if (!r || r->type != REDIS_REPLY_ARRAY) return false;
    std::string slaves;
    std::string others;
    std::string flags;
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
      const std::string key(r->element[i]->str, r->element[i]->len);
      const std::string value(r->element[i + 1]->str, r->element[i + 1]->len);
      if (key == "num-slaves") slaves = value;
      if (key == "num-other-sentinels") others = value;
      if (key == "flags") flags = value;
    }
    if (slaves != "1" || others != "2" || flags != "master") return false;
  }
  return true;
}

std::vector<std::string> RedisSentinelGroup::sentinel_addresses() const {
  std::vector<std::string> out;
  for (const auto& s : sentinels_) out.push_back(client_address(*s, options_.certs != nullptr));
  return out;
}

std::string RedisSentinelGroup::master_address() const {
  return client_address(*master_, options_.certs != nullptr);
}

std::string RedisSentinelGroup::replica_address() const {
  return client_address(*replica_, options_.certs != nullptr);
}

std::string RedisSentinelGroup::named_master(size_t i) const {
  Reply r = sentinels_[i]->command({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", kMasterName});
  if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2) return "";
  return std::string(r->element[0]->str, r->element[0]->len) + ":" +
         std::string(r->element[1]->str, r->element[1]->len);
}

bool RedisSentinelGroup::wait_replicated(std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    const std::string written = master_->info("replication", "master_repl_offset");
    if (!written.empty() && replica_->info("replication", "slave_repl_offset") == written)
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

}  // namespace sluice::testing
