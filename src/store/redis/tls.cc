#include "store/redis/tls.h"

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "config/values/tls_files.h"

namespace sluice::redis {

Result<std::shared_ptr<boost::asio::ssl::context>> make_tls_context(const RedisTlsOptions& tls) {
  if (tls.cert_file.empty() != tls.key_file.empty())
    return Error{ErrorCode::kInvalidArgument,
                 "redis store: tls cert_file and key_file go together (both or neither)"};
  auto ctx = std::make_shared<boost::asio::ssl::context>(boost::asio::ssl::context::tls_client);
  // The server is always verified; an unverified TLS connection would only
  // look safe.
  ctx->set_verify_mode(boost::asio::ssl::verify_peer);
  if (auto e = config::load_tls_files(ctx->native_handle(),
                                      {tls.ca_file, tls.cert_file, tls.key_file})) {
    using Key = config::TlsFilesError::Key;
    const char* key = e->key == Key::kCaFile     ? "ca_file"
                      : e->key == Key::kCertFile ? "cert_file"
                                                 : "key_file";
    std::string message = "redis store: tls ";
    message.append(key).append(": ").append(e->message);
    return Error{ErrorCode::kInvalidArgument, std::move(message)};
  }
  return ctx;
}

bool expect_server_name(TlsStream& stream, const std::string& name) {
  SSL* ssl = stream.native_handle();
  boost::system::error_code not_ip;
  boost::asio::ip::make_address(name, not_ip);
  if (!not_ip) return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name.c_str()) == 1;
  return SSL_set_tlsext_host_name(ssl, name.c_str()) == 1 && SSL_set1_host(ssl, name.c_str()) == 1;
}

std::string tls_failure(TlsStream& stream, const boost::system::error_code& ec) {
  const long verified = SSL_get_verify_result(stream.native_handle());
  if (verified == X509_V_OK) return ec.message();
  // OpenSSL's own text is only "certificate verify failed": say what failed.
  std::string why = "certificate verify failed: ";
  return why.append(X509_verify_cert_error_string(verified));
}

}  // namespace sluice::redis
