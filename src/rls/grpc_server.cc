#include "rls/grpc_server.h"

#include <grpcpp/grpcpp.h>

namespace sluice::rls {

GrpcServer::GrpcServer(std::unique_ptr<grpc::Server> server, int port)
    : server_(std::move(server)), port_(port) {}

GrpcServer::~GrpcServer() {
  stop();
}

Result<std::unique_ptr<GrpcServer>> GrpcServer::start(const std::string& address,
                                                      std::span<grpc::Service* const> services,
                                                      const GrpcServerOptions& options) {
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  for (grpc::Service* service : services) builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    if (server != nullptr) server->Shutdown();
    return Error{ErrorCode::kInvalidArgument, "gRPC: cannot listen on " + address};
  }
  return std::unique_ptr<GrpcServer>(new GrpcServer(std::move(server), port));
}

void GrpcServer::stop(std::chrono::milliseconds grace) {
  if (server_ == nullptr) return;
  server_->Shutdown(std::chrono::system_clock::now() + grace);
  server_->Wait();
  server_.reset();
}

}  // namespace sluice::rls
