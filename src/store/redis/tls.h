// TLS for the Redis store's connections: the one context a store's options
// make (CA, client certificate), the per-connection settings (the name the
// server's certificate must carry, SNI), and why a handshake failed.
//
// Thread-safety: make_tls_context() is pure; a context is only read after
// it is made (OpenSSL makes sessions from it on any thread).
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <memory>
#include <string>

#include "sluice/redis_store.h"
#include "sluice/result.h"

namespace sluice::redis {

using TlsStream = boost::asio::ssl::stream<boost::asio::ip::tcp::socket&>;

// A client context that verifies the server (against tls.ca_file, or the
// system's CAs) and presents tls.cert_file / key_file if given.
// kInvalidArgument naming the file and OpenSSL's reason when one cannot be
// loaded, or when only one of cert_file and key_file is given.
Result<std::shared_ptr<boost::asio::ssl::context>> make_tls_context(const RedisTlsOptions& tls);

// Before the handshake: the server's certificate must name `name` (an IP
// address or a DNS name), which is also sent as SNI when it is a DNS name.
// False if OpenSSL refuses the name.
bool expect_server_name(TlsStream& stream, const std::string& name);

// Why the handshake (or a later read) failed: the error's text and, when the
// server's certificate was refused, the verification's reason
// ("certificate verify failed: hostname mismatch").
std::string tls_failure(TlsStream& stream, const boost::system::error_code& ec);

}  // namespace sluice::redis
