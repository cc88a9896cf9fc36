#include "rls/grpc_acceptor.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include <spdlog/spdlog.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>

#include "sluice/clock.h"

namespace sluice::rls {

namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

// How often a failed accept is tried again, and how often the open
// connections are counted (for the gauge, and to free slots that gRPC's
// closed connections held).
constexpr int kRetryMs = 100;
constexpr int64_t kCountEveryNs = 1'000'000'000;
// At the bound, connections are counted again before one is refused, at most
// this often (an attacker at the bound makes each count cost nothing more).
constexpr int64_t kRecountAtBoundNs = 100'000'000;

Nanos now() {
  return std::chrono::duration_cast<Nanos>(std::chrono::steady_clock::now().time_since_epoch());
}

int64_t now_ns() {
  return now().count();
}

std::string address_text(const tcp::endpoint& e) {
  const std::string host = e.address().to_string();
  return e.address().is_v6() ? "[" + host + "]:" + std::to_string(e.port())
                             : host + ":" + std::to_string(e.port());
}

}  // namespace

Result<std::unique_ptr<GrpcAcceptor>> GrpcAcceptor::listen(const config::HostPort& where,
                                                           size_t max_connections) {
  asio::io_context io;
  boost::system::error_code ec;
  asio::ip::address address = asio::ip::make_address(where.host, ec);
  if (ec) {
    tcp::resolver resolver(io);
    auto results =
        resolver.resolve(where.host, std::to_string(where.port), tcp::resolver::passive, ec);
    if (ec || results.empty()) {
      return Error{ErrorCode::kInvalidArgument,
                   "cannot resolve grpc address " + where.text() + ": " +
                       (ec ? ec.message() : std::string("no address"))};
    }
    address = results.begin()->endpoint().address();
  }
  auto fail = [&](const char* what) {
    return Error{ErrorCode::kInvalidArgument, std::string("cannot ") + what + " grpc address " +
                                                  where.text() + ": " + ec.message()};
  };
  tcp::acceptor acceptor(io);
  tcp::endpoint endpoint(address, where.port);
  if (address.is_unspecified()) {
    // One IPv6 socket that takes IPv4 too; IPv4 alone where IPv6 is off.
    endpoint = tcp::endpoint(asio::ip::address_v6::any(), where.port);
    if (acceptor.open(tcp::v6(), ec) || acceptor.set_option(asio::ip::v6_only(false), ec)) {
      boost::system::error_code ignored;
      acceptor.close(ignored);
      endpoint = tcp::endpoint(asio::ip::address_v4::any(), where.port);
    }
  }
  if (!acceptor.is_open() && acceptor.open(endpoint.protocol(), ec)) return fail("open");
  if (acceptor.set_option(tcp::acceptor::reuse_address(true), ec)) return fail("configure");
  if (acceptor.bind(endpoint, ec)) return fail("bind");
  if (acceptor.listen(asio::socket_base::max_listen_connections, ec)) return fail("listen on");
  if (acceptor.native_non_blocking(true, ec)) return fail("configure");
  const tcp::endpoint bound = acceptor.local_endpoint(ec);
  if (ec) return fail("read the port of");
  const int fd = acceptor.release(ec);
  if (ec) return fail("configure");
  return std::unique_ptr<GrpcAcceptor>(
      new GrpcAcceptor(fd, bound.port(), address_text(bound), max_connections));
}

GrpcAcceptor::GrpcAcceptor(int fd, int port, std::string name, size_t max_connections)
    : fd_(fd), port_(port), name_(std::move(name)), max_(max_connections) {}

GrpcAcceptor::~GrpcAcceptor() {
  stop();
}

void GrpcAcceptor::start(Handoff handoff) {
  handoff_ = std::move(handoff);
  thread_ = std::thread([this] { run(); });
}

void GrpcAcceptor::stop() {
  if (fd_ < 0) return;
  stopping_.store(true, std::memory_order_release);
  // Wakes the loop's poll() (the socket reports a hang-up) and refuses new
  // connections from now on.
  ::shutdown(fd_, SHUT_RDWR);
  if (thread_.joinable()) thread_.join();
  ::close(fd_);
  fd_ = -1;
}

std::optional<std::string> GrpcAcceptor::failing() const {
  const int error = failing_errno_.load(std::memory_order_relaxed);
  if (error == 0) return std::nullopt;
  return std::string(std::strerror(error));
}

void GrpcAcceptor::run() {
  pollfd listener{fd_, POLLIN, 0};
  while (!stopping_.load(std::memory_order_acquire)) {
    const bool failing = failing_errno_.load(std::memory_order_relaxed) != 0;
    // While accepts fail, the backlog stays readable: wait out the retry
    // instead of polling it.
    listener.events = failing ? 0 : POLLIN;
    listener.revents = 0;
    const int ready = ::poll(&listener, 1, failing ? kRetryMs : 1000);
    if (stopping_.load(std::memory_order_acquire)) break;
    if (failing || (ready > 0 && (listener.revents & POLLIN) != 0)) drain();
    if (now_ns() - counted_at_ns_ >= kCountEveryNs) count();
  }
}

bool GrpcAcceptor::drain() {
  while (!stopping_.load(std::memory_order_relaxed)) {
    const int fd = ::accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      note_recovery();
      admit(fd);
      continue;
    }
    const int error = errno;
    // A connection reset while in the backlog, or a signal: take the next.
    if (error == EINTR || error == ECONNABORTED || error == EPROTO) continue;
    if (error == EAGAIN || error == EWOULDBLOCK) {
      // The backlog is empty. After failures, the port can accept again
      // once a descriptor is free: dup() takes one if there is.
      if (failing_errno_.load(std::memory_order_relaxed) != 0) {
        const int probe = ::dup(fd_);
        if (probe < 0) return false;
        ::close(probe);
        note_recovery();
      }
      return true;
    }
    // EMFILE, ENFILE, ENOBUFS, ENOMEM: the connections wait in the backlog
    // until the next try.
    note_failure(error);
    return false;
  }
  return true;
}

void GrpcAcceptor::admit(int fd) {
  if (handed_.recorded() >= max_connections()) {
    // At the bound by the last count: count again (gRPC may have closed
    // some since), but not more often than kRecountAtBoundNs.
    if (now_ns() - counted_at_ns_ >= kRecountAtBoundNs) count();
    if (handed_.recorded() >= max_connections()) return refuse(fd);
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  handed_.add(fd);
  open_.store(handed_.recorded(), std::memory_order_relaxed);
  handoff_(fd_, fd);
}

void GrpcAcceptor::refuse(int fd) {
  refused_.fetch_add(1, std::memory_order_relaxed);
  ::close(fd);
  const observe::DenialLogGate::Admission a = refusal_log_.admit(now());
  if (!a.log) return;
  spdlog::warn("grpc: connection refused, {} connections open (rls.max_connections){}",
               handed_.recorded(), observe::suppressed_note(a, "refusals"));
}

void GrpcAcceptor::note_failure(int error) {
  failures_.fetch_add(1, std::memory_order_relaxed);
  ++failures_in_row_;
  failing_errno_.store(error, std::memory_order_relaxed);
  const observe::DenialLogGate::Admission a = failure_log_.admit(now());
  if (!a.log) return;
  spdlog::error("grpc: accept on {} failed: {}; trying again every {} ms{}", name_,
                std::strerror(error), kRetryMs, observe::suppressed_note(a, "failed accepts"));
}

void GrpcAcceptor::note_recovery() {
  if (failing_errno_.load(std::memory_order_relaxed) == 0) return;
  failing_errno_.store(0, std::memory_order_relaxed);
  spdlog::info("grpc: accepting on {} again after {} failed accept(s)", name_, failures_in_row_);
  failures_in_row_ = 0;
}

void GrpcAcceptor::count() {
  open_.store(handed_.count_open(), std::memory_order_relaxed);
  counted_at_ns_ = now_ns();
}

}  // namespace sluice::rls
