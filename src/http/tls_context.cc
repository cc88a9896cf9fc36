#include "http/tls_context.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <cstring>
#include <stdexcept>
#include <string>

#include <boost/asio/buffer.hpp>

#include "config/tls_suites.h"

namespace sluice::http {

namespace asio = boost::asio;

namespace {

// ALPN: the server's choice among what the client offers, h2 first when
// `http2` is on (`arg` non-null); no ALPN in the answer when none fits.
int select_protocol(SSL*, const unsigned char** out, unsigned char* out_length,
                    const unsigned char* offered, unsigned int offered_length, void* arg) {
  static constexpr unsigned char kHttp11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  static constexpr unsigned char kH2Http11[] = {2,   'h', '2', 8,   'h', 't',
                                                't', 'p', '/', '1', '.', '1'};
  const bool h2 = arg != nullptr;
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, out_length, h2 ? kH2Http11 : kHttp11,
                            h2 ? sizeof kH2Http11 : sizeof kHttp11, offered,
                            offered_length) != OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_NOACK;
  }
  *out = selected;
  return SSL_TLSEXT_ERR_OK;
}

}  // namespace

std::shared_ptr<asio::ssl::context> make_tls_context(const policy::TlsSettings& tls, bool http2) {
  auto context = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_server);
  SSL_CTX* native = context->native_handle();
  SSL_CTX_set_min_proto_version(native, tls.min_tls13 ? TLS1_3_VERSION : TLS1_2_VERSION);
  // TLS 1.2: ECDHE with AEAD only (config/tls_suites.h), in the server's
  // order; no renegotiation (a client-driven CPU sink).
  SSL_CTX_set_cipher_list(native, config::kTls12CipherSuites);
  SSL_CTX_set_options(native, SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_RENEGOTIATION);
  // Buffers are given back while a connection is idle: keep-alive
  // connections waiting for their next request hold no read buffer. (A
  // handshake holds them until it ends: server.max_tls_handshakes bounds those.)
  SSL_CTX_set_mode(native, SSL_MODE_RELEASE_BUFFERS);
  // Any non-null pointer says "h2 too"; the callback reads nothing through it.
  static int offer_h2;
  SSL_CTX_set_alpn_select_cb(native, select_protocol, http2 ? &offer_h2 : nullptr);
  // Resumption is by session tickets (stateless; TLS 1.2 and 1.3): no
  // server-side session cache to fill, lock and sweep on every handshake.
  SSL_CTX_set_session_cache_mode(native, SSL_SESS_CACHE_OFF);
  boost::system::error_code ec;
  context->use_certificate_chain(asio::buffer(tls.cert_pem), ec);
  if (!ec) context->use_private_key(asio::buffer(tls.key_pem), asio::ssl::context::pem, ec);
  if (!ec && SSL_CTX_check_private_key(native) != 1) {
    ec = boost::system::error_code(static_cast<int>(ERR_get_error()),
                                   asio::error::get_ssl_category());
  }
  if (ec) {
    ERR_clear_error();
    std::string message = "TLS: ";
    message.append(tls.cert_file).append(" / ").append(tls.key_file).append(": ");
    message.append(ec.message());
    throw std::runtime_error(message);
  }
  return context;
}

}  // namespace sluice::http
