// The TLS context of the `listen` port, made from a loaded config's `tls:`.
//
// One context per State: a reload builds a new one from the files it read,
// new connections handshake with it, and open connections keep the one they
// started with (each SSL object holds its context). ALPN answers h2 (when
// `http2` is on; preferred) or http/1.1; a client that offers neither gets
// no ALPN answer rather than a protocol Sluice cannot speak.
#pragma once

#include <memory>

#include <boost/asio/ssl/context.hpp>

#include "policy/config.h"

namespace sluice::http {

// Throws std::runtime_error (with OpenSSL's reason) if OpenSSL refuses the
// certificate or key; the loader has checked them (config/values/tls_files.h), so
// that is a config that changed under it, not a user's mistake.
std::shared_ptr<boost::asio::ssl::context> make_tls_context(const policy::TlsSettings& tls,
                                                            bool http2);

}  // namespace sluice::http
