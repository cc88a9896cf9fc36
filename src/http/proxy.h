// UpstreamProxy: the gateway's Forwarder (forwarder.h). It sends each allowed
// request to the configured `upstream` and relays the answer, in the shape of
// Beast's relay example: read a header, rewrite it, write it, then stream the
// body through a fixed buffer — neither body is ever held whole, whatever its
// size, and either may be chunked.
//
// One exchange:
//   take a pooled keep-alive connection (proxy_pool.h) or connect a new one
//   (Upstream::connect_timeout) -> ["100 Continue" to the client if it asked]
//   -> request header (proxy_headers.h rewriting, base path prefixed) -> request
//   body relayed from the client -> response header (1xx skipped) -> response
//   relayed to the client with the rate headers added -> connection back to
//   the pool -> session->resume().
//
// Failures, and what the client gets:
// - cannot connect (refused, unreachable, connect_timeout), upstream closes or
//   resets before a response, malformed response:
//     502 {"error":{"code":"UPSTREAM_UNAVAILABLE","message":...}}
// - no complete response within Upstream::timeout (counted from the start of
//   the exchange: connecting, sending the request and receiving the whole
//   response): 504 {"error":{"code":"UPSTREAM_TIMEOUT",...}}
// - either failure after the response header went to the client: the status
//   cannot change any more, so the client connection is closed mid-body (the
//   client sees a short body or a missing last chunk, never a complete-looking one).
// - the client goes away, or is too slow (server.header_timeout per read or
//   write): the upstream connection is closed, nothing is answered.
// - a malformed request body (bad chunking): 400, both connections closed.
// Error responses carry the rate headers too, and close the client connection
// whenever the request body was not read to its end.
//
// Servers: the route's upstream (State::upstream_for, upstream_group.h) picks
// one per attempt; each server has its own pool, and https:// servers get a
// TLS handshake after the connect (upstream_tls.h).
//
// Retries: once on a fresh connection to the same server when the failed
// connection came from the pool (see retry_allowed() in proxy_failure.cc);
// and up to the upstream's `retries` on other servers, as retry_rule.h allows.
//
// Upgrades (WebSocket; any HTTP/1.1 Upgrade but h2c, on a request without a
// body): the request goes on a new connection with Connection: Upgrade; a 101
// from the upstream goes to the client and the two connections become a
// Tunnel (tunnel.h) until either closes or server.idle_timeout passes idle.
//
// Draining (session->draining()): the response says Connection: close.
//
// Thread-safety: one UpstreamProxy per worker io_context; forward() and every
// exchange run on that io_context's thread only.
#pragma once

#include <memory>

#include <boost/asio/io_context.hpp>

#include "http/forwarder.h"

namespace sluice::http {

struct ProxyShared;

class UpstreamProxy final : public Forwarder {
 public:
  explicit UpstreamProxy(boost::asio::io_context& io_context);
  ~UpstreamProxy() override;

  void forward(std::shared_ptr<GatewayExchange> exchange) override;

 private:
  // Shared with the exchanges in flight, so that one completing while the
  // worker is torn down never reaches a destroyed pool.
  std::shared_ptr<ProxyShared> shared_;
};

// The ForwarderFactory for ServerOptions::make_forwarder.
ForwarderFactory upstream_proxy_factory();

}  // namespace sluice::http
