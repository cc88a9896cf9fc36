// The floor of bench/rls/run.sh: ShouldRateLimit on the same gRPC server
// setup as `sluice serve` (rls::GrpcServer: same options, same threads, same
// proto), answering every call OK at once without deciding anything. What a
// call costs here is what gRPC, the kernel and malloc cost; Sluice's RLS
// service is measured against it.
//
//   empty_rls_server [--address 127.0.0.1:0]
//
// Prints "grpc on 127.0.0.1:PORT" once listening (the line run.sh waits for,
// as `sluice serve` prints it), then serves until SIGTERM or SIGINT.
#include <signal.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "rls/grpc_server.h"

namespace {

namespace rlspb = ::envoy::service::ratelimit::v3;

class EmptyRateLimitService final : public rlspb::RateLimitService::CallbackService {
 public:
  grpc::ServerUnaryReactor* ShouldRateLimit(grpc::CallbackServerContext* context,
                                            const rlspb::RateLimitRequest* /*request*/,
                                            rlspb::RateLimitResponse* response) override {
    response->set_overall_code(rlspb::RateLimitResponse::OK);
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::string address = "127.0.0.1:0";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--address") == 0 && i + 1 < argc) {
      address = argv[++i];
    } else {
      std::fprintf(stderr, "usage: empty_rls_server [--address HOST:PORT]\n");
      return 2;
    }
  }
  // Blocked here, taken by sigwait below: gRPC's threads inherit the mask.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  EmptyRateLimitService service;
  grpc::Service* services[] = {&service};
  auto server = sluice::rls::GrpcServer::start(address, services);
  if (!server.ok()) {
    std::fprintf(stderr, "empty_rls_server: %s\n", server.error().message.c_str());
    return 1;
  }
  const std::string host = address.substr(0, address.rfind(':'));
  std::printf("grpc on %s:%d\n", host.c_str(), (*server)->port());
  std::fflush(stdout);
  int signal = 0;
  sigwait(&stop, &signal);
  (*server)->stop(std::chrono::milliseconds(500));
  return 0;
}
