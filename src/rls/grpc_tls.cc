#include "rls/grpc_tls.h"

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpcpp/security/server_credentials.h>

#include <utility>

namespace sluice::rls {

namespace {

// ServerCredentials that add their port with C credentials built on the
// certificate fetcher. AddPortToServer is the one hook gRPC's Server calls
// to bind a port with credentials (a private virtual: overridable).
class FetchingCredentials final : public grpc::ServerCredentials {
 public:
  explicit FetchingCredentials(GrpcTlsIdentity* identity) : identity_(identity) {}

  void SetAuthMetadataProcessor(const std::shared_ptr<grpc::AuthMetadataProcessor>&) override {}

 private:
  // Called by gRPC before each handshake on the port (and once when the
  // port is added, which must give a pair).
  static grpc_ssl_certificate_config_reload_status fetch(
      void* user_data, grpc_ssl_server_certificate_config** config) {
    auto* port = static_cast<GrpcTlsIdentity::Port*>(user_data);
    GrpcTlsIdentity::Pair pair;
    if (!port->identity->take_if_newer(*port, &pair)) {
      return GRPC_SSL_CERTIFICATE_CONFIG_RELOAD_UNCHANGED;
    }
    const grpc_ssl_pem_key_cert_pair key_cert{pair.key_pem.c_str(), pair.cert_pem.c_str()};
    // No client certificates are asked for, so the roots are never used; but
    // gRPC 1.51 asserts they are set when it swaps a certificate (a crash),
    // so the server's own chain stands in for them.
    *config = grpc_ssl_server_certificate_config_create(pair.cert_pem.c_str(), &key_cert, 1);
    return *config != nullptr ? GRPC_SSL_CERTIFICATE_CONFIG_RELOAD_NEW
                              : GRPC_SSL_CERTIFICATE_CONFIG_RELOAD_FAIL;
  }

  int AddPortToServer(const std::string& address, grpc_server* server) override {
    grpc_ssl_server_credentials_options* options =
        grpc_ssl_server_credentials_create_options_using_config_fetcher(
            GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE, &fetch, identity_->add_port());
    grpc_server_credentials* credentials = grpc_ssl_server_credentials_create_with_options(options);
    if (credentials == nullptr) return 0;
    const int port = grpc_server_add_http2_port(server, address.c_str(), credentials);
    grpc_server_credentials_release(credentials);
    return port;
  }

  GrpcTlsIdentity* identity_;
};

}  // namespace

GrpcTlsIdentity::GrpcTlsIdentity(std::string cert_pem, std::string key_pem) {
  set(std::move(cert_pem), std::move(key_pem));
}

void GrpcTlsIdentity::set(std::string cert_pem, std::string key_pem) {
  std::lock_guard lock(mutex_);
  if (cert_pem == pair_.cert_pem && key_pem == pair_.key_pem) return;
  pair_.cert_pem = std::move(cert_pem);
  pair_.key_pem = std::move(key_pem);
  ++pair_.version;
}

bool GrpcTlsIdentity::take_if_newer(Port& port, Pair* out) {
  std::lock_guard lock(mutex_);
  if (pair_.version == port.seen_version) return false;
  *out = pair_;
  port.seen_version = pair_.version;
  return true;
}

GrpcTlsIdentity::Port* GrpcTlsIdentity::add_port() {
  std::lock_guard lock(mutex_);
  ports_.push_back(std::make_unique<Port>());
  ports_.back()->identity = this;
  return ports_.back().get();
}

std::shared_ptr<grpc::ServerCredentials> GrpcTlsIdentity::credentials() {
  return std::make_shared<FetchingCredentials>(this);
}

}  // namespace sluice::rls
