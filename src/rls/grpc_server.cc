#include "rls/grpc_server.h"

#include <absl/synchronization/mutex.h>
#include <grpc/grpc.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <mutex>
#include <thread>

#include "rls/grpc_log.h"
#include "rls/grpc_tls.h"

namespace sluice::rls {

GrpcServer::GrpcServer(std::shared_ptr<GrpcTlsIdentity> tls, std::unique_ptr<GrpcAcceptor> acceptor,
                       std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> external,
                       std::unique_ptr<grpc::Server> server)
    : tls_(std::move(tls)),
      acceptor_(std::move(acceptor)),
      external_(std::move(external)),
      server_(std::move(server)) {}

GrpcServer::~GrpcServer() {
  stop();
}

Result<std::unique_ptr<GrpcServer>> GrpcServer::start(const std::string& address,
                                                      std::span<grpc::Service* const> services,
                                                      const GrpcServerOptions& options) {
  // Debian builds Abseil without NDEBUG, so every absl::Mutex lock taken in
  // gRPC also records the lock order in a graph for deadlock detection (the
  // GraphCycles functions were about 4% of the server's samples under load).
  // Off for the process: 6-8% less server CPU per ShouldRateLimit call.
  static std::once_flag no_deadlock_graph;
  std::call_once(no_deadlock_graph,
                 [] { absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore); });
  // Health and reflection let grpcurl, grpc_health_probe and Kubernetes
  // gRPC probes talk to the port without Envoy or our proto files. Both are
  // process-wide switches that the builder reads when constructed.
  // gRPC's own log lines through ours, failed TLS handshakes gated.
  GrpcLog::install();
  static std::once_flag plugins;
  std::call_once(plugins, [] {
    grpc::EnableDefaultHealthCheckService(true);
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  });
  Result<config::HostPort> where = config::parse_host_port(address, true);
  if (!where.ok()) {
    return Error{ErrorCode::kInvalidArgument,
                 "gRPC: cannot listen on " + address + ": " + where.error().message};
  }
  Result<std::unique_ptr<GrpcAcceptor>> acceptor =
      GrpcAcceptor::listen(*where, options.max_connections);
  if (!acceptor.ok()) return acceptor.error();
  grpc::ServerBuilder builder;
  // No listening port of gRPC's own: the acceptor's connections come in
  // here, with the port's credentials.
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> external =
      builder.experimental().AddExternalConnectionAcceptor(
          grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD,
          options.tls ? options.tls->credentials() : grpc::InsecureServerCredentials());
  auto milliseconds = [](std::chrono::milliseconds ms) {
    return static_cast<int>(std::min<int64_t>(ms.count(), std::numeric_limits<int>::max()));
  };
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, milliseconds(options.idle_timeout));
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
                             milliseconds(options.handshake_timeout));
  builder.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  for (grpc::Service* service : services) builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) {
    return Error{ErrorCode::kInvalidArgument, "gRPC: cannot start a server on " + address};
  }
  (*acceptor)->start([handler = external.get()](int listener_fd, int fd) {
    grpc::experimental::ExternalConnectionAcceptor::NewConnectionParameters p;
    p.listener_fd = listener_fd;
    p.fd = fd;
    handler->HandleNewConnection(&p);
  });
  return std::unique_ptr<GrpcServer>(new GrpcServer(options.tls, std::move(acceptor).value(),
                                                    std::move(external), std::move(server)));
}

void GrpcServer::stop(std::chrono::milliseconds grace, const std::function<bool()>& idle) {
  if (server_ == nullptr) return;
  // No connection is handed over once gRPC shuts down (it would neither
  // serve nor close it).
  acceptor_->stop();
  const auto deadline = std::chrono::system_clock::now() + grace;
  // Probes that still get through (on a connection opened before the GOAWAY)
  // learn that this instance is going away.
  if (grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService()) {
    health->Shutdown();
  }
  if (!idle) {
    server_->Shutdown(deadline);
  } else {
    // Shutdown() refuses new calls (GOAWAY), then waits for the calls in
    // flight and for every connection to go. Once no call is served, the
    // connections clients keep open are cut (what Shutdown itself does at the
    // deadline). Repeated while Shutdown waits: a cut made just before it
    // began would let a client reconnect.
    std::atomic<bool> finished{false};
    std::thread shutdown([&] {
      server_->Shutdown(deadline);
      finished.store(true, std::memory_order_release);
    });
    while (!finished.load(std::memory_order_acquire)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      if (!finished.load(std::memory_order_acquire) && idle()) {
        grpc_server_cancel_all_calls(server_->c_server());
      }
    }
    shutdown.join();
  }
  server_->Wait();
  server_.reset();
}

}  // namespace sluice::rls
