// When a failed upstream request may go to another server of its upstream
// (`retries`): only when the upstream's application cannot have acted on it.
//
// - Never after a byte of a response: the upstream took the request in.
// - Never after upstream.timeout: the upstream may still be working on it,
//   and the time the client was promised is spent.
// - After a failed connect (TCP or TLS handshake, connect_timeout
//   included): nothing was sent, any method, with or without a body (the
//   body's first bytes are still held, none has gone anywhere).
// - After a reset or close before any response byte: only a request
//   without a body (its body is streamed, not kept, so it cannot be sent
//   again), and only when nothing of it was written or its method is
//   idempotent (RFC 9110 §9.2.2): a POST the upstream may have applied
//   gets 502 rather than a second application.
//
// The retry on a fresh connection after a pooled one turned out stale
// (proxy_failure.cc, retry_allowed()) is another rule: same server, once,
// and not counted against `retries`.
//
// Thread-safety: pure functions.
#pragma once

#include <ostream>  // boost/beast/http/verb.hpp uses it without including it

#include <boost/beast/http/verb.hpp>

namespace sluice::http {

struct RetryFacts {
  bool connecting = false;        // the failure was connecting (TCP or TLS)
  bool response_started = false;  // a byte of a response arrived
  bool timed_out = false;         // upstream.timeout passed (not connect_timeout)
  bool has_body = false;          // the request has a body
  bool request_written = false;   // some bytes of the request reached the socket
  bool idempotent = false;        // the method is (is_idempotent)
};

bool may_retry_elsewhere(const RetryFacts& facts);

// RFC 9110 §9.2.2: requests whose repetition has the same effect as one.
bool is_idempotent(boost::beast::http::verb method);

}  // namespace sluice::http
