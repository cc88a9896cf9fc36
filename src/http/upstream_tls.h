// TLS from the gateway to its https:// upstream servers: the client context
// of an upstream (`upstreams.NAME.tls`: the CAs its servers are verified
// against, or the system's; an optional client certificate) and the name a
// connection sends as SNI and checks the certificate for.
//
// Thread-safety: a context is made once per State and then only read (its
// SSL objects are per connection).
#pragma once

#include <memory>
#include <string>

#include <boost/asio/ssl/context.hpp>

#include "policy/upstreams.h"

namespace sluice::http {

// Verifies the peer (TLS 1.2 or later). Throws std::runtime_error with
// OpenSSL's reason if a file is refused (the loader checked them already).
std::shared_ptr<boost::asio::ssl::context> make_upstream_tls_context(
    const policy::UpstreamTls& tls);

// Sets on `ssl` the name of the server: `server_name` when the upstream's tls
// gives one, else the server's host. A host name is sent as SNI and must be
// in the certificate; an IP address (never sent as SNI, RFC 6066 §3) must
// be in its IP addresses.
void set_upstream_peer_name(SSL* ssl, const policy::UpstreamTls& tls, const std::string& host);

}  // namespace sluice::http
