// PUT /admin/consumers writes the consumers file off the admin port's
// control thread: while a write waits on the disk, /healthz and the other
// admin requests are answered; the PUT is answered, and its change put in
// force, once the file holds it.
//
// The slow disk: this binary's fsync() (which every write of the file ends
// with) waits, while the gate is armed, until the test opens it.
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>

#include "http/admin.h"
#include "http/context.h"
#include "http/state.h"
#include "policy/config_loader.h"
#include "session_pipe.h"
#include "sluice/memory_store.h"

namespace {

struct FsyncGate {
  std::mutex mutex;
  std::condition_variable changed;
  bool armed = false;
  bool open = false;
  int waiting = 0;  // fsync calls held at the gate now
};

FsyncGate& gate() {
  static FsyncGate g;
  return g;
}

}  // namespace

// Interposes libc's fsync for this test binary (the server's code calls it
// by name); passes straight through unless armed.
extern "C" int fsync(int fd) {
  FsyncGate& g = gate();
  {
    std::unique_lock lock(g.mutex);
    if (g.armed) {
      ++g.waiting;
      g.changed.notify_all();
      g.changed.wait(lock, [&g] { return g.open; });
      --g.waiting;
    }
  }
  return static_cast<int>(::syscall(SYS_fsync, fd));
}

namespace sluice::http {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// One admin connection: the test writes requests and reads answers on a
// plain blocking socket; the session runs on the control io_context.
class AdminConnection {
 public:
  AdminConnection(asio::io_context& io, ServerContext& context, AdminHandler& handler,
                  SessionRegistry& registry) {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    client_ = fds[1];
    asio::post(io, [&io, &context, &handler, &registry, fd = fds[0]] {
      asio::ip::tcp::socket socket(io);
      socket.assign(asio::ip::tcp::v6(), fd);
      std::make_shared<Session>(std::move(socket), ConnectionTicket(context.admin_connections),
                                context, handler, registry, true)
          ->start();
    });
  }
  ~AdminConnection() { ::close(client_); }

  void send(const std::string& method, const std::string& target, const std::string& body = "") {
    std::string request = method + " " + target + " HTTP/1.1\r\nHost: localhost\r\n";
    if (!body.empty()) request += "Content-Type: application/json\r\n";
    request += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    ASSERT_EQ(::write(client_, request.data(), request.size()),
              static_cast<ssize_t>(request.size()));
  }

  // Whether an answer has begun to arrive within `wait`.
  bool answered_within(std::chrono::milliseconds wait) {
    pollfd p{client_, POLLIN, 0};
    return ::poll(&p, 1, static_cast<int>(wait.count())) == 1;
  }

  // The status line and body of the next answer ("" when none came within
  // `wait`; a bound for a failing build, never reached when it works).
  std::string answer(std::chrono::milliseconds wait = 10s) {
    const auto until = std::chrono::steady_clock::now() + wait;
    for (;;) {
      const size_t head_end = buffer_.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        const size_t length_at = buffer_.find("Content-Length: ");
        const size_t length = length_at < head_end ? std::stoul(buffer_.substr(length_at + 16)) : 0;
        if (buffer_.size() >= head_end + 4 + length) {
          const std::string status = buffer_.substr(0, buffer_.find("\r\n"));
          const std::string body = buffer_.substr(head_end + 4, length);
          buffer_.erase(0, head_end + 4 + length);
          return status + "\n" + body;
        }
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
      if (left.count() <= 0 || !answered_within(left)) return "";
      char chunk[4096];
      const ssize_t n = ::read(client_, chunk, sizeof chunk);
      if (n <= 0) return "";
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

 private:
  int client_ = -1;
  std::string buffer_;
};

class AdminConsumersWrite : public ::testing::Test {
 protected:
  AdminConsumersWrite()
      : clock_(Nanos{std::chrono::seconds(1'700'000'000)}), context_(store_, clock_) {
    char templ[] = "/tmp/sluice-admin-consumers-XXXXXX";
    dir_ = ::mkdtemp(templ);
    file_ = dir_ + "/consumers.yaml";
    std::ofstream(file_) << "key-a: free\nkey-b: free\n";
    policy::LoadResult loaded = policy::load_config_string(
        "headers: none\nplans:\n  free: [{capacity: 2, refill_rate: 1/h}]\n"
        "  pro: [{capacity: 5, refill_rate: 1/h}]\n"
        "consumers: {key: header:x-api-key, file: " +
            file_ + ", unknown: reject}\nroutes:\n  - match: GET /a\n    limits: [plan]\n",
        dir_ + "/sluice.yaml");
    EXPECT_TRUE(loaded.config.has_value());
    testing::register_session_metrics(context_);
    context_.state.store(
        build_state(std::move(*loaded.config), 1, context_.registry, context_.decision_sinks));
    control_ = std::thread([this] { io_.run(); });
  }
  ~AdminConsumersWrite() override {
    open_gate();
    work_.reset();
    io_.stop();
    control_.join();
    std::remove(file_.c_str());
    ::rmdir(dir_.c_str());
  }

  static void arm_gate() {
    std::lock_guard lock(gate().mutex);
    gate().armed = true;
    gate().open = false;
  }
  static void open_gate() {
    std::lock_guard lock(gate().mutex);
    gate().armed = false;
    gate().open = true;
    gate().changed.notify_all();
  }
  // Waits until a write is held at the gate.
  static bool write_held() {
    std::unique_lock lock(gate().mutex);
    return gate().changed.wait_for(lock, 10s, [] { return gate().waiting > 0; });
  }

  std::string dir_;
  std::string file_;
  MemoryStore store_;
  ManualClock clock_;
  ServerContext context_;
  // As in the server: the control io_context outlives the handler, whose
  // writer posts its answers there.
  SessionRegistry sessions_;
  asio::io_context io_{1};
  asio::executor_work_guard<asio::io_context::executor_type> work_ = asio::make_work_guard(io_);
  AdminHandler admin_{context_, [] { return ReloadOutcome{}; }, [] { return std::nullopt; }};
  std::thread control_;
};

TEST_F(AdminConsumersWrite, HealthzIsAnsweredWhileTheConsumersFileIsWritten) {
  AdminConnection writer(io_, context_, admin_, sessions_);
  AdminConnection probe(io_, context_, admin_, sessions_);
  arm_gate();
  writer.send("PUT", "/admin/consumers/key-a", R"({"plan":"pro"})");
  ASSERT_TRUE(write_held());

  // The disk has not finished: the admin port still answers...
  probe.send("GET", "/healthz");
  EXPECT_EQ(probe.answer(), "HTTP/1.1 200 OK\nok\n");
  // ...and the change is not in force before the file holds it.
  probe.send("GET", "/admin/consumers/key-a");
  EXPECT_EQ(probe.answer(), "HTTP/1.1 200 OK\n{\"consumer\":\"key-a\",\"plan\":\"free\"}");
  EXPECT_FALSE(writer.answered_within(0ms));

  open_gate();
  EXPECT_EQ(writer.answer(), "HTTP/1.1 200 OK\n{\"consumer\":\"key-a\",\"plan\":\"pro\"}");
  EXPECT_EQ(read_file(file_), "key-a: pro\nkey-b: free\n");
  probe.send("GET", "/admin/consumers/key-a");
  EXPECT_EQ(probe.answer(), "HTTP/1.1 200 OK\n{\"consumer\":\"key-a\",\"plan\":\"pro\"}");
}

}  // namespace
}  // namespace sluice::http
