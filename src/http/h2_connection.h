// HTTP/2 to clients (`http2: true`), spoken with nghttp2.
//
// A connection becomes HTTP/2 when its first bytes are the connection
// preface (h2c with prior knowledge on a plain port; h2 chosen by ALPN on
// `tls:` sends the same preface): the Session hands its stream over to an
// H2Connection, which runs the HTTP/2 framing and nothing else.
//
// Each stream is bridged into the HTTP/1.1 request path: it gets a
// connection of its own inside the process (a socketpair) with a Session on
// the far end, the same one a TCP client gets, handled by the same
// FrontDoor. The stream's request is written to it as HTTP/1.1
// ("Connection: close"; a body of unknown length chunked) and the HTTP/1.1
// response read back is sent as the stream's HEADERS and DATA. So routing,
// limits, the rate-limit headers, 429 bodies, the access log, metrics and
// proxying through the upstream pools are the HTTP/1.1 ones; a stream can
// only ever be answered with what its own bridge returned.
//
// Bounds: 100 concurrent streams (SETTINGS_MAX_CONCURRENT_STREAMS); a
// header list larger than server.max_header_bytes (counted as its HTTP/1.1
// text) is answered 431 on its stream and never stored whole; HPACK tables
// of 4096 bytes; request bodies are read from the client only as fast as
// the bridge takes them (the stream's window is given back when written);
// at most 32 KiB of response body is buffered per stream (the bridge is
// read again once nghttp2 has sent it, within the client's window). A
// client that resets streams before their answer faster than a budget of
// 100 (refilled at 10 per second) has its connection ended with GOAWAY
// (ENHANCE_YOUR_CALM), counted in sluice_http2_rapid_resets_total
// (CVE-2023-44487). Each bridged stream counts as an open connection
// (server.max_connections): past it new streams are refused.
//
// Not served: CONNECT, and so WebSocket over HTTP/2 (RFC 8441), which needs
// SETTINGS_ENABLE_CONNECT_PROTOCOL that is never sent: 501 on its stream.
//
// Thread-safety: an H2Connection lives on its Session's thread.
#pragma once

#include <memory>
#include <string_view>

#include "http/session.h"

namespace sluice::http {

// Whether a connection's first bytes are the HTTP/2 connection preface
// ("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"): all of it, the start of it (more
// bytes decide), or not it.
enum class H2Preface { kWhole, kPart, kNo };
H2Preface match_h2_preface(std::string_view bytes);

class H2Connection {
 public:
  // Takes `session`'s connection over (its first bytes, the preface, in
  // session->buffer()) and serves it as HTTP/2; streams are
  // handled by `handler`, their sessions registered in `registry` (drained
  // with the others). Gives the connection back with resume(false) at the end.
  static void start(const std::shared_ptr<Session>& session, RequestHandler& handler,
                    SessionRegistry& registry);
};

}  // namespace sluice::http
