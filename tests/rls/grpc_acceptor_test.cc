// GrpcAcceptor and HandedSockets without gRPC: which handed-over sockets are
// still open, the bound on connections, and what the acceptor hands over.
#include "rls/grpc_acceptor.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "rls/handed_sockets.h"

namespace sluice::rls {
namespace {

TEST(HandedSockets, CountsTheSocketsStillOpen) {
  int a[2], b[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, a), 0);
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, b), 0);
  HandedSockets handed;
  handed.add(a[0]);
  handed.add(b[0]);
  EXPECT_EQ(handed.count_open(), 2u);
  ::close(a[0]);
  EXPECT_EQ(handed.recorded(), 2u);  // not known until counted
  EXPECT_EQ(handed.count_open(), 1u);
  EXPECT_EQ(handed.recorded(), 1u);
  // b[0]'s number now names another file (a pipe): that socket is closed.
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  ASSERT_EQ(::dup2(pipe_fds[0], b[0]), b[0]);
  EXPECT_EQ(handed.count_open(), 0u);
  // Another socket under a recorded number replaces the one recorded.
  int c[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, c), 0);
  handed.add(c[0]);
  ASSERT_EQ(::dup2(c[0], a[0]), a[0]);
  handed.add(a[0]);
  EXPECT_EQ(handed.recorded(), 2u);
  EXPECT_EQ(handed.count_open(), 2u);
  for (int fd : {a[0], a[1], b[0], b[1], c[0], c[1], pipe_fds[0], pipe_fds[1]}) ::close(fd);
}

int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  return fd;
}

// True once the peer closed `fd` (EOF), within 10 s.
bool closed_by_peer(int fd) {
  timeval timeout{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  char byte;
  return ::recv(fd, &byte, 1, 0) == 0;
}

// The connections an acceptor handed over, kept open until taken.
class Taken {
 public:
  void add(int fd) {
    std::lock_guard lock(mutex_);
    fds_.push_back(fd);
  }
  size_t count() {
    std::lock_guard lock(mutex_);
    return fds_.size();
  }
  // Waits up to 10 s for `n` connections.
  std::vector<int> wait_for(size_t n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      {
        std::lock_guard lock(mutex_);
        if (fds_.size() >= n) return fds_;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::lock_guard lock(mutex_);
    return fds_;
  }

 private:
  std::mutex mutex_;
  std::vector<int> fds_;
};

TEST(GrpcAcceptor, HandsOverNonBlockingConnectionsUpToTheBound) {
  Result<std::unique_ptr<GrpcAcceptor>> listened =
      GrpcAcceptor::listen(config::HostPort{"127.0.0.1", 0}, 2);
  ASSERT_TRUE(listened.ok()) << listened.error().message;
  GrpcAcceptor& acceptor = **listened;
  ASSERT_GT(acceptor.port(), 0);
  Taken taken;
  acceptor.start([&taken](int, int fd) { taken.add(fd); });

  const int first = connect_to(acceptor.port());
  const int second = connect_to(acceptor.port());
  std::vector<int> fds = taken.wait_for(2);
  ASSERT_EQ(fds.size(), 2u);
  EXPECT_NE(::fcntl(fds[0], F_GETFL) & O_NONBLOCK, 0);
  EXPECT_NE(::fcntl(fds[0], F_GETFD) & FD_CLOEXEC, 0);
  EXPECT_EQ(acceptor.open_connections(), 2u);

  // A third is closed at once and counted; nothing is handed over.
  const int third = connect_to(acceptor.port());
  EXPECT_TRUE(closed_by_peer(third));
  EXPECT_EQ(acceptor.refused(), 1u);
  EXPECT_EQ(taken.count(), 2u);

  // The taker closes one: once counted (within a second), the next
  // connection takes its place.
  ::close(fds[0]);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (acceptor.open_connections() != 1 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(acceptor.open_connections(), 1u);
  const int fourth = connect_to(acceptor.port());
  EXPECT_EQ(taken.wait_for(3).size(), 3u);
  EXPECT_EQ(acceptor.refused(), 1u);
  EXPECT_EQ(acceptor.accept_failures(), 0u);
  EXPECT_FALSE(acceptor.failing().has_value());

  // A raised bound applies to the next connection.
  acceptor.set_max_connections(3);
  const int fifth = connect_to(acceptor.port());
  EXPECT_EQ(taken.wait_for(4).size(), 4u);
  acceptor.stop();
  for (int fd : taken.wait_for(4)) {
    if (fd != fds[0]) ::close(fd);
  }
  for (int fd : {first, second, third, fourth, fifth}) ::close(fd);
}

TEST(GrpcAcceptor, APortTakenOrAnAddressThatDoesNotResolveIsAnError) {
  Result<std::unique_ptr<GrpcAcceptor>> first =
      GrpcAcceptor::listen(config::HostPort{"127.0.0.1", 0}, 1);
  ASSERT_TRUE(first.ok());
  const uint16_t port = static_cast<uint16_t>((*first)->port());
  Result<std::unique_ptr<GrpcAcceptor>> second =
      GrpcAcceptor::listen(config::HostPort{"127.0.0.1", port}, 1);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.error().message, "cannot bind grpc address 127.0.0.1:" + std::to_string(port) +
                                        ": Address already in use");
  Result<std::unique_ptr<GrpcAcceptor>> nowhere =
      GrpcAcceptor::listen(config::HostPort{"no-such-host.invalid", 0}, 1);
  ASSERT_FALSE(nowhere.ok());
  EXPECT_EQ(
      nowhere.error().message.rfind("cannot resolve grpc address no-such-host.invalid:0: ", 0), 0u)
      << nowhere.error().message;
}

}  // namespace
}  // namespace sluice::rls
