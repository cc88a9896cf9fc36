// Upstreams for the gateway tests (and the nginx end-to-end test):
//
// - DemoUpstream: the project's real demo upstream (examples/demo-upstream,
//   built next to the sluice binary) as a child process on a free loopback
//   port, stopped by PID.
// - TestUpstream: a small HTTP/1.1 server inside the test process, for what
//   the demo cannot show: it counts connections and requests, records the
//   request headers it received, and can misbehave on purpose (close a
//   keep-alive connection, answer garbage, cut a body short, answer chunked,
//   send hop-by-hop headers), or hold its answers until the test releases them.
// - RefusingPort, UnansweredPort: ports where a TCP connect is refused at
//   once, or never completes.
//
// Header-only, so that the test directories' CMake lists need no new source.
// Every wait is bounded; destructors stop what was started.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "http_client.h"
#include "wait_until.h"

extern char** environ;

namespace sluice::test {

// The address 127.0.0.1:port.
inline sockaddr_in loopback_address(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  return a;
}

// A TCP socket bound to 127.0.0.1 on a port the kernel picks, which is put in
// `port` (0 if the bind failed; the socket is returned all the same).
inline int bound_loopback_socket(uint16_t& port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a = loopback_address(0);
  socklen_t len = sizeof a;
  port = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                 ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0
             ? ntohs(a.sin_port)
             : 0;
  return fd;
}

// A loopback TCP port that was free a moment ago (bound to port 0, then
// released). For programs that cannot bind port 0 and report it.
inline uint16_t pick_free_port() {
  uint16_t port = 0;
  ::close(bound_loopback_socket(port));
  return port;
}

// The directory of the sluice binary: the other programs of the build sit there.
inline std::string build_dir_of(const std::string& sluice_binary) {
  const size_t slash = sluice_binary.rfind('/');
  return slash == std::string::npos ? "." : sluice_binary.substr(0, slash);
}

// Starts `argv` with stdin from /dev/null and stdout/stderr to `log_path`.
inline pid_t spawn_program(const std::vector<std::string>& argv_in, const std::string& log_path) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                   0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<std::string> args = argv_in;
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

// Stops a child: SIGTERM, then SIGKILL if it is still there after `grace`.
// Returns the exit status as waitpid reports it (-1 if it could not be reaped).
inline int stop_child(pid_t pid, std::chrono::milliseconds grace = std::chrono::seconds(10)) {
  if (pid <= 0) return -1;
  ::kill(pid, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + grace;
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::waitpid(pid, &status, WNOHANG) == pid) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid, SIGKILL);
  return ::waitpid(pid, &status, 0) == pid ? status : -1;
}

// Waits until something accepts connections on 127.0.0.1:port.
inline bool wait_listening(uint16_t port, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (HttpConnection::can_connect("127.0.0.1", port)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// How many TCP connections to 127.0.0.1:port are in `state` on this host
// (/proc/net/tcp, its hex code; the side that connected): "01" ESTABLISHED,
// "08" CLOSE_WAIT (the peer's FIN has reached the socket, which its owner
// has not closed yet).
inline int connections_to(uint16_t port, std::string_view state_code) {
  char remote[16];
  std::snprintf(remote, sizeof remote, "0100007F:%04X", port);
  std::ifstream table("/proc/net/tcp");
  std::string line;
  std::getline(table, line);  // the column names
  int count = 0;
  while (std::getline(table, line)) {
    std::istringstream fields(line);
    std::string slot, local, rem, state;
    fields >> slot >> local >> rem >> state;
    if (rem == remote && state == state_code) ++count;
  }
  return count;
}
inline int established_to(uint16_t port) {
  return connections_to(port, "01");
}

// ---------------------------------------------------------------- DemoUpstream

class DemoUpstream {
 public:
  // Starts examples/demo-upstream on a free port; port() is 0 if it failed.
  explicit DemoUpstream(const std::string& sluice_binary, int threads = 1) {
    const std::string binary = build_dir_of(sluice_binary) + "/sluice-demo-upstream";
    const char* tmp = std::getenv("TMPDIR");
    log_path_ = std::string(tmp ? tmp : "/tmp") + "/sluice-demo-upstream-" +
                std::to_string(::getpid()) + "-" + std::to_string(counter()++) + ".log";
    // The port is picked, released, then bound by the child: retry if another
    // process took it meanwhile.
    for (int attempt = 0; attempt < 5 && port_ == 0; ++attempt) {
      const uint16_t port = pick_free_port();
      pid_ = spawn_program({binary, "--host", "127.0.0.1", "--port", std::to_string(port),
                            "--threads", std::to_string(threads)},
                           log_path_);
      if (pid_ < 0) break;
      if (wait_listening(port, std::chrono::seconds(10))) {
        int status = 0;
        if (::waitpid(pid_, &status, WNOHANG) == 0) port_ = port;
      }
      if (port_ == 0) {
        stop_child(pid_);
        pid_ = -1;
      }
    }
  }
  ~DemoUpstream() {
    stop();
    ::unlink(log_path_.c_str());
  }
  DemoUpstream(const DemoUpstream&) = delete;
  DemoUpstream& operator=(const DemoUpstream&) = delete;

  uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  void stop() {
    if (pid_ > 0) stop_child(pid_);
    pid_ = -1;
  }

 private:
  static int& counter() {
    static int n = 0;
    return n;
  }
  pid_t pid_ = -1;
  uint16_t port_ = 0;
  std::string log_path_;
};

// The brute-force lockout the lockout tests put on a login route (docs/ABUSE.md):
// 5 failed logins in 15 minutes, then 30 minutes out.
inline const std::string kLoginLockout =
    "{algorithm: fixed_window, limit: 5, window: 15m, count_status: [401, 403], block: 30m}";

// ---------------------------------------------------------------- TestUpstream

class TestUpstream {
 public:
  enum class Mode {
    kNormal,                // 200 {"n":<request number>} with Content-Length, keep-alive
    kCloseOnSecondRequest,  // on a connection's 2nd request: read it, close without answering
    kCloseWhenIdle,         // answer (keep-alive, as far as the client knows), then close
    kGarbage,               // answer bytes that are not HTTP
    kTruncated,             // Content-Length: 1000, send 10 bytes, close
    kChunked,               // answer with a chunked body in three chunks
    kHopByHop,              // answer with hop-by-hop headers that must not reach the client
    kResetUnanswered,       // read the request, reset the connection (RST) without answering
  };

  explicit TestUpstream(Mode mode = Mode::kNormal) : mode_(mode) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(listen_fd_, 64) != 0 ||
        ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      return;
    }
    port_ = ntohs(a.sin_port);
    accept_thread_ = std::thread([this] { accept_loop(); });
  }

  ~TestUpstream() {
    {
      std::lock_guard<std::mutex> lock(gate_mutex_);
      stop_ = true;
    }
    gate_.notify_all();
    if (accept_thread_.joinable()) accept_thread_.join();
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      threads.swap(threads_);
    }
    for (std::thread& t : threads) t.join();
    ::close(listen_fd_);
  }
  TestUpstream(const TestUpstream&) = delete;
  TestUpstream& operator=(const TestUpstream&) = delete;

  uint16_t port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int connections() const { return connections_.load(); }
  // Connections it has closed, after its peer did or on its own.
  int closed() const { return closed_.load(); }
  int requests() const { return requests_.load(); }
  // While held, requests are read and counted but answered only after
  // release(): a response stays in flight, or several connections stay busy
  // at once, for as long as a test needs.
  void hold() {
    std::lock_guard<std::mutex> lock(gate_mutex_);
    held_ = true;
  }
  void release() {
    {
      std::lock_guard<std::mutex> lock(gate_mutex_);
      held_ = false;
    }
    gate_.notify_all();
  }
  // How requests are answered from now on (the mode it was made with until set).
  void switch_to(Mode mode) { mode_.store(mode); }
  // The status of the answers in Mode::kNormal from now on (200 until set).
  void answer_with(int status) { status_.store(status); }
  // Closes the connections accepted so far once they wait for a request, as
  // a server whose keep-alive timeout passed (within the 20 ms of a poll).
  void close_idle_connections() { close_idle_upto_.store(connections_.load()); }
  // The header block (request line and fields, "\r\n" separated) of each request, in order.
  std::vector<std::string> request_heads() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return heads_;
  }
  // When each request's head and body had been read, in the order of
  // request_heads(): server-side times, free of the client's scheduling.
  std::vector<std::chrono::steady_clock::time_point> request_times() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return times_;
  }

 private:
  void accept_loop() {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      const int number = connections_.fetch_add(1) + 1;
      std::lock_guard<std::mutex> lock(mutex_);
      threads_.emplace_back([this, fd, number] { serve(fd, number); });
    }
  }

  // Reads into `buf` until it holds `n` bytes or more; false on close, error or stop.
  bool fill_to(int fd, std::string& buf, size_t n) {
    while (buf.size() < n) {
      if (!read_more(fd, buf)) return false;
    }
    return true;
  }
  // `idle_connection`: the number of a connection waiting for its next
  // request, which close_idle_connections() may end.
  bool read_more(int fd, std::string& buf, int idle_connection = 0) {
    for (;;) {
      if (stop_) return false;
      if (idle_connection != 0 && idle_connection <= close_idle_upto_.load()) return false;
      pollfd p{fd, POLLIN, 0};
      const int r = ::poll(&p, 1, 20);
      if (r == 0) continue;
      if (r < 0) return false;
      char chunk[16384];
      const ssize_t got = ::recv(fd, chunk, sizeof chunk, 0);
      if (got <= 0) return false;
      buf.append(chunk, static_cast<size_t>(got));
      return true;
    }
  }
  static void send_all(int fd, const std::string& bytes) {
    size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;
      sent += static_cast<size_t>(n);
    }
  }

  void serve(int fd, int number) {
    std::string buf;
    int on_this_connection = 0;
    for (;;) {
      size_t end;
      while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
        if (!read_more(fd, buf, buf.empty() ? number : 0)) return finish(fd);
      }
      const std::string head = buf.substr(0, end);
      buf.erase(0, end + 4);
      // Content-Length bodies, and chunked ones read up to their last chunk
      // (enough for the small bodies the tests send; the body is not kept).
      size_t length = 0;
      std::string lower_head = head;
      for (char& c : lower_head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      const size_t cl = lower_head.find("\r\ncontent-length:");
      if (cl != std::string::npos) length = std::strtoul(head.c_str() + cl + 17, nullptr, 10);
      if (lower_head.find("\r\ntransfer-encoding:") != std::string::npos) {
        size_t last;
        while ((last = ("\r\n" + buf).find("\r\n0\r\n\r\n")) == std::string::npos) {
          if (!read_more(fd, buf)) return finish(fd);
        }
        // The searched string is buf shifted by 2: the match's '0' is buf[last].
        length = last + 5;
      }
      if (!fill_to(fd, buf, length)) return finish(fd);
      buf.erase(0, length);
      ++on_this_connection;
      const int n = requests_.fetch_add(1) + 1;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        heads_.push_back(head);
        times_.push_back(std::chrono::steady_clock::now());
      }
      if (mode_ == Mode::kCloseOnSecondRequest && on_this_connection == 2) return finish(fd);
      {
        std::unique_lock<std::mutex> lock(gate_mutex_);
        gate_.wait(lock, [this] { return !held_ || stop_; });
      }
      const std::string body = "{\"n\":" + std::to_string(n) + "}";
      switch (mode_.load()) {
        case Mode::kResetUnanswered: {
          const linger abort{1, 0};  // close() sends a reset
          ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort, sizeof abort);
          ::close(fd);
          closed_.fetch_add(1);
          return;
        }
        case Mode::kGarbage:
          send_all(fd, "this is not HTTP at all\r\n\r\n");
          return finish(fd);
        case Mode::kTruncated:
          send_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n0123456789");
          return finish(fd);
        case Mode::kChunked:
          send_all(fd,
                   "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                   "5\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\n\r\n");
          continue;
        case Mode::kHopByHop:
          send_all(fd,
                   "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) +
                       "\r\nConnection: keep-alive, X-Upstream-Private\r\nKeep-Alive: timeout=5\r\n"
                       "X-Upstream-Private: secret\r\nProxy-Authenticate: Basic\r\n"
                       "Trailer: X-Checksum\r\nUpgrade: h2c\r\nX-Upstream-Public: yes\r\n\r\n" +
                       body);
          continue;
        default: {
          const int status = status_.load();
          // A response to HEAD announces the body's length without it.
          const bool head_request = head.rfind("HEAD ", 0) == 0;
          send_all(fd, "HTTP/1.1 " + std::to_string(status) + (status == 200 ? " OK" : " Test") +
                           "\r\nContent-Type: application/json\r\nContent-Length: " +
                           std::to_string(body.size()) + "\r\n\r\n" +
                           (head_request ? std::string() : body));
        }
      }
      if (mode_ == Mode::kCloseWhenIdle) return finish(fd);
    }
  }
  void finish(int fd) {
    ::shutdown(fd, SHUT_RDWR);
    ::close(fd);
    closed_.fetch_add(1);
  }

  std::atomic<Mode> mode_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::atomic<int> requests_{0};
  std::atomic<int> closed_{0};
  std::atomic<int> close_idle_upto_{0};
  std::atomic<int> status_{200};
  std::mutex gate_mutex_;
  std::condition_variable gate_;
  bool held_ = false;  // guarded by gate_mutex_
  mutable std::mutex mutex_;
  std::vector<std::string> heads_;
  std::vector<std::chrono::steady_clock::time_point> times_;
  std::vector<std::thread> threads_;
  std::thread accept_thread_;
};

// ---------------------------------------------------------------- RefusingPort

// A loopback port that refuses connections: held by a bound socket that does
// not listen, so a connect gets a reset at once, and no other program can
// bind the port while the test runs (as one could a port picked and released).
class RefusingPort {
 public:
  RefusingPort() { fd_ = bound_loopback_socket(port_); }
  ~RefusingPort() {
    if (fd_ >= 0) ::close(fd_);
  }
  RefusingPort(const RefusingPort&) = delete;
  RefusingPort& operator=(const RefusingPort&) = delete;

  // 0 if it could not be set up.
  uint16_t port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

// ---------------------------------------------------------------- UnansweredPort

// A loopback port where a TCP connect never completes: a socket listening
// with a backlog of 1 that never accepts, its accept queue filled by two
// connections of its own. Linux drops the SYN of any further connect (no
// SYN-ACK, no reset): the connecting side retransmits until its own timeout.
class UnansweredPort {
 public:
  UnansweredPort() {
    uint16_t port = 0;
    listen_fd_ = bound_loopback_socket(port);
    if (port == 0 || ::listen(listen_fd_, 1) != 0) return;
    const sockaddr_in a = loopback_address(port);
    for (int& fd : fillers_) {
      fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) return;
    }
    // Full once both handshakes are done: for a listening socket, tcpi_unacked
    // is the length of its accept queue.
    const bool full = wait_until([this] {
      tcp_info info{};
      socklen_t size = sizeof info;
      return ::getsockopt(listen_fd_, IPPROTO_TCP, TCP_INFO, &info, &size) == 0 &&
             info.tcpi_unacked == 2;
    });
    if (full) port_ = port;
  }
  ~UnansweredPort() {
    for (int fd : fillers_) {
      if (fd >= 0) ::close(fd);
    }
    if (listen_fd_ >= 0) ::close(listen_fd_);
  }
  UnansweredPort(const UnansweredPort&) = delete;
  UnansweredPort& operator=(const UnansweredPort&) = delete;

  // 0 if it could not be set up.
  uint16_t port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  int listen_fd_ = -1;
  int fillers_[2] = {-1, -1};
  uint16_t port_ = 0;
};

// ---------------------------------------------------------------- raw exchanges

// Sends `bytes` on a new connection and returns everything the server sends
// until it closes the connection or `timeout` passes.
inline std::string raw_exchange(uint16_t port, const std::string& bytes,
                                std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const sockaddr_in a = loopback_address(port);
  std::string out;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return out;
  }
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    char chunk[16384];
    const ssize_t got = ::recv(fd, chunk, sizeof chunk, 0);
    if (got <= 0) break;
    out.append(chunk, static_cast<size_t>(got));
  }
  ::close(fd);
  return out;
}

// Decodes a chunked body (RFC 9112 §7.1); sets *complete when the last chunk was seen.
inline std::string dechunk(const std::string& body, bool* complete) {
  std::string out;
  size_t pos = 0;
  *complete = false;
  for (;;) {
    const size_t line_end = body.find("\r\n", pos);
    if (line_end == std::string::npos) return out;
    const size_t size = std::strtoul(body.substr(pos, line_end - pos).c_str(), nullptr, 16);
    pos = line_end + 2;
    if (size == 0) {
      *complete = body.compare(pos, 2, "\r\n") == 0;
      return out;
    }
    if (pos + size + 2 > body.size()) return out;
    out += body.substr(pos, size);
    pos += size + 2;
  }
}

}  // namespace sluice::test
