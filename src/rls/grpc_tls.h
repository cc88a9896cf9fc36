// GrpcTlsIdentity: the certificate and key of the gRPC port when it speaks
// TLS (`grpc_tls: true`), swappable while serving.
//
// gRPC reads a server's certificate once, when its port is added, unless the
// credentials are made with a certificate "fetcher" that its handshaker asks
// before each new connection. gRPC's C++ API does not expose that fetcher, so
// credentials() wraps the C one. A reload set()s the new pair: the next
// handshake uses it, connections already open keep theirs (as on `listen`).
//
// Thread-safety: set() from any thread; gRPC calls the fetcher from its own.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace grpc {
class ServerCredentials;
}

namespace sluice::rls {

class GrpcTlsIdentity {
 public:
  // The pair, checked by the config loader (config/values/tls_files.h).
  GrpcTlsIdentity(std::string cert_pem, std::string key_pem);

  void set(std::string cert_pem, std::string key_pem);

  // Credentials for ServerBuilder::AddListeningPort. gRPC asks this object
  // for the pair on every handshake, so it must outlive the server (the
  // builder drops the credentials once the server is built).
  std::shared_ptr<grpc::ServerCredentials> credentials();

  // What the fetcher of one port knows: the version of the pair it gave gRPC.
  // Public for the C callback; not for other callers.
  struct Port {
    GrpcTlsIdentity* identity = nullptr;
    uint64_t seen_version = 0;
  };
  struct Pair {
    std::string cert_pem, key_pem;
    uint64_t version = 0;
  };
  // The pair, if it changed since the port last took it.
  bool take_if_newer(Port& port, Pair* out);
  // A new port's fetcher state, alive as long as this object.
  Port* add_port();

 private:
  std::mutex mutex_;
  Pair pair_;
  std::vector<std::unique_ptr<Port>> ports_;
};

}  // namespace sluice::rls
