// GrpcAcceptor: accepts the gRPC port's connections itself and hands each to
// gRPC, so that the port survives running out of file descriptors and holds
// a bounded number of connections.
//
// gRPC 1.51's own listener stops for good at the first accept() that fails
// with anything but EAGAIN or ECONNABORTED: after one EMFILE ("too many open
// files") the port takes TCP connections into its backlog and never serves
// them again, though the process recovers. Here a failed accept is retried
// every 100 ms until a descriptor is free; meanwhile failing() says why the
// port cannot accept (/readyz). gRPC gets each connection through its
// ExternalConnectionAcceptor, which handshakes with the port's credentials
// (TLS included), unlike grpc::AddInsecureChannelFromFd.
//
// At most max_connections accepted connections are open at once (counted by
// HandedSockets, since gRPC closes them itself); a connection above it is
// closed at once, counted in refused() and logged at most once a second.
//
// Thread-safety: listen(), start() and stop() from one thread; the accept
// loop runs on a thread of its own and calls the handoff there; the
// accessors may be read from any thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "config/values/values.h"
#include "observe/denial_log.h"
#include "rls/handed_sockets.h"
#include "sluice/result.h"

namespace sluice::rls {

class GrpcAcceptor {
 public:
  // Takes a connection (non-blocking, close-on-exec): from then on the
  // descriptor is the callee's. `listener_fd` is the listening socket.
  using Handoff = std::function<void(int listener_fd, int fd)>;

  // Binds and listens on `where` (port 0 picks a free port). A wildcard host
  // ("0.0.0.0" or "::") takes IPv6 and IPv4 connections alike, as gRPC's own
  // listener did. Errors: the host does not resolve, the port is taken.
  static Result<std::unique_ptr<GrpcAcceptor>> listen(const config::HostPort& where,
                                                      size_t max_connections);
  ~GrpcAcceptor();
  GrpcAcceptor(const GrpcAcceptor&) = delete;
  GrpcAcceptor& operator=(const GrpcAcceptor&) = delete;

  int port() const { return port_; }

  // Accepts on a thread of its own, handing each connection to `handoff`.
  void start(Handoff handoff);
  // Stops accepting and closes the port; no handoff runs once this returns.
  // Idempotent; the destructor calls it.
  void stop();

  void set_max_connections(size_t max) { max_.store(max, std::memory_order_relaxed); }
  size_t max_connections() const { return max_.load(std::memory_order_relaxed); }
  // Accepted connections still open, as of the last count (at most a
  // second old).
  size_t open_connections() const { return open_.load(std::memory_order_relaxed); }
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }
  uint64_t accept_failures() const { return failures_.load(std::memory_order_relaxed); }
  // While the port cannot accept (the last accept failed and no descriptor
  // has been free since): why, e.g. "Too many open files". Else nothing.
  std::optional<std::string> failing() const;

 private:
  GrpcAcceptor(int fd, int port, std::string name, size_t max_connections);
  void run();
  // Accepts what the backlog holds; false when an accept failed.
  bool drain();
  void admit(int fd);
  void refuse(int fd);
  void note_failure(int error);
  void note_recovery();
  void count();

  int fd_;
  int port_;
  std::string name_;  // the address, for logs
  std::atomic<size_t> max_;
  Handoff handoff_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  HandedSockets handed_;  // accept thread only
  int64_t counted_at_ns_ = 0;
  std::atomic<size_t> open_{0};
  std::atomic<uint64_t> refused_{0};
  std::atomic<uint64_t> failures_{0};
  uint64_t failures_in_row_ = 0;       // accept thread only
  std::atomic<int> failing_errno_{0};  // 0: accepting
  observe::DenialLogGate failure_log_{1.0};
  observe::DenialLogGate refusal_log_{1.0};
};

}  // namespace sluice::rls
