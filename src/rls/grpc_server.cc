#include "rls/grpc_server.h"

#include <absl/synchronization/mutex.h>
#include <grpc/grpc.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "rls/grpc_tls.h"

namespace sluice::rls {

GrpcServer::GrpcServer(std::unique_ptr<grpc::Server> server, int port,
                       std::shared_ptr<GrpcTlsIdentity> tls)
    : tls_(std::move(tls)), server_(std::move(server)), port_(port) {}

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
  static std::once_flag plugins;
  std::call_once(plugins, [] {
    grpc::EnableDefaultHealthCheckService(true);
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  });
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(
      address, options.tls ? options.tls->credentials() : grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  for (grpc::Service* service : services) builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    if (server != nullptr) server->Shutdown();
    return Error{ErrorCode::kInvalidArgument, "gRPC: cannot listen on " + address};
  }
  return std::unique_ptr<GrpcServer>(new GrpcServer(std::move(server), port, options.tls));
}

void GrpcServer::stop(std::chrono::milliseconds grace, const std::function<bool()>& idle) {
  if (server_ == nullptr) return;
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
