#include "http/upstream_tls.h"

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <stdexcept>

#include <boost/asio/ip/address.hpp>

#include "config/values/tls_files.h"

namespace sluice::http {

std::shared_ptr<boost::asio::ssl::context> make_upstream_tls_context(
    const policy::UpstreamTls& tls) {
  namespace ssl = boost::asio::ssl;
  auto context = std::make_shared<ssl::context>(ssl::context::tls_client);
  SSL_CTX* ctx = context->native_handle();
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  if (auto e = config::load_tls_files(ctx, {tls.ca_file, tls.cert_file, tls.key_file})) {
    throw std::runtime_error("upstream tls: " + e->message);
  }
  return context;
}

void set_upstream_peer_name(SSL* ssl, const policy::UpstreamTls& tls, const std::string& host) {
  const std::string& name = tls.server_name.empty() ? host : tls.server_name;
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  boost::system::error_code ec;
  boost::asio::ip::make_address(name, ec);
  if (!ec) {
    X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str());
    return;
  }
  SSL_set_tlsext_host_name(ssl, name.c_str());
  X509_VERIFY_PARAM_set1_host(param, name.c_str(), name.size());
}

}  // namespace sluice::http
