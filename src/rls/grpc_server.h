// GrpcServer: a gRPC server on one address, serving callback-API services (no
// thread per call: gRPC runs the handlers on its own small pool).
//
// Thread-safety: start() and stop() from one thread; the services are called
// from gRPC's threads and must be thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "sluice/result.h"

namespace grpc {
class Server;
class Service;
}  // namespace grpc

namespace sluice::rls {

class GrpcTlsIdentity;

struct GrpcServerOptions {
  // Largest request accepted; RLS requests are a few hundred bytes.
  int max_receive_message_bytes = 64 * 1024;
  // TLS with this certificate (swappable while serving); null: plaintext.
  std::shared_ptr<GrpcTlsIdentity> tls;
};

class GrpcServer {
 public:
  // Listens on `address` ("127.0.0.1:8081"; port 0 picks a free port) and
  // serves `services`, which must outlive the server. Errors: the address
  // cannot be bound or parsed.
  static Result<std::unique_ptr<GrpcServer>> start(const std::string& address,
                                                   std::span<grpc::Service* const> services,
                                                   const GrpcServerOptions& options = {});
  ~GrpcServer();
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  // The port listened on (the one picked when asked for port 0).
  int port() const { return port_; }

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
  GrpcServer(std::unique_ptr<grpc::Server> server, int port, std::shared_ptr<GrpcTlsIdentity> tls);
  // Declared before the server, so destroyed after it: gRPC asks it for the
  // certificate on every handshake.
  std::shared_ptr<GrpcTlsIdentity> tls_;
  std::unique_ptr<grpc::Server> server_;
  int port_;
};

}  // namespace sluice::rls
