// GrpcServer: a gRPC server on one address, serving callback-API services (no
// thread per call: gRPC runs the handlers on its own small pool). The port is
// a GrpcAcceptor's, which accepts the connections and hands them to gRPC: it
// survives running out of descriptors and bounds the connections open.
//
// Thread-safety: start() and stop() from one thread; the services are called
// from gRPC's threads and must be thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "rls/grpc_acceptor.h"
#include "sluice/result.h"

namespace grpc {
class Server;
class Service;
namespace experimental {
class ExternalConnectionAcceptor;
}
}  // namespace grpc

namespace sluice::rls {

class GrpcTlsIdentity;

struct GrpcServerOptions {
  // Largest request accepted; RLS requests are a few hundred bytes.
  int max_receive_message_bytes = 64 * 1024;
  // TLS with this certificate (swappable while serving); null: plaintext.
  std::shared_ptr<GrpcTlsIdentity> tls;
  // Connections open at once; above it a new one is closed at once.
  size_t max_connections = 1024;
  // A connection with no call for this long is closed (a GOAWAY first).
  std::chrono::milliseconds idle_timeout{60000};
  // A connection that has not completed its TLS handshake and HTTP/2
  // preface this long after its accept is closed.
  std::chrono::milliseconds handshake_timeout{10000};
};

class GrpcServer {
 public:
  // Listens on `address` ("127.0.0.1:8081", "[::1]:8081"; port 0 picks a
  // free port) and serves `services`, which must outlive the server.
  // Errors: the address cannot be parsed, resolved or bound.
  static Result<std::unique_ptr<GrpcServer>> start(const std::string& address,
                                                   std::span<grpc::Service* const> services,
                                                   const GrpcServerOptions& options = {});
  ~GrpcServer();
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  // The port listened on (the one picked when asked for port 0).
  int port() const { return acceptor_->port(); }
  // Its connections: the bound, how many are open, refused, failed accepts.
  GrpcAcceptor& acceptor() { return *acceptor_; }
  const GrpcAcceptor& acceptor() const { return *acceptor_; }

  // Stops accepting calls and waits for calls in flight, at most `grace`,
  // then cancels the rest. Idempotent; the destructor calls it.
  //
  // gRPC's own shutdown also waits for every client connection to close,
  // so a client that keeps an idle connection open holds it for the whole
  // grace. With `idle` (true when no call is being served, e.g.
  // RlsService::calls_in_flight() == 0), the connections left are cut as
  // soon as the calls in flight are done.
  void stop(std::chrono::milliseconds grace = std::chrono::seconds(5),
            const std::function<bool()>& idle = {});

 private:
  GrpcServer(std::shared_ptr<GrpcTlsIdentity> tls, std::unique_ptr<GrpcAcceptor> acceptor,
             std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> external,
             std::unique_ptr<grpc::Server> server);
  // Declared before the server, so destroyed after it: gRPC asks it for the
  // certificate on every handshake.
  std::shared_ptr<GrpcTlsIdentity> tls_;
  std::unique_ptr<GrpcAcceptor> acceptor_;
  // Where the acceptor hands connections to the server.
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> external_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace sluice::rls
