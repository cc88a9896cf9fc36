// Request framing rules Beast's parser leaves to the server: the Host and
// Transfer-Encoding rules of RFC 9112 that request smuggling and routing
// confusion exploit, checked once a request's header is read and before
// anything is decided or forwarded.
//
//   Host              exactly one on HTTP/1.1 (two could route differently
//                     here and upstream; none leaves the upstream guessing)
//   Transfer-Encoding the final coding is exactly "chunked", named once, or
//                     the field is "identity" alone; never on HTTP/1.0, never
//                     beside Content-Length. Beast reads "chunked, identity"
//                     or "xchunked" as "no body", so the body would be parsed
//                     as the next request: a desync building block.
//   CONNECT           refused: Sluice is not a forward proxy.
//   the method        an upper-case token: "post" or "PoSt" would match no
//                     POST route while an upstream that folds case ran its
//                     POST handler (policy::is_request_method).
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/status.hpp>

namespace sluice::http {

struct RequestProblem {
  boost::beast::http::status status;
  std::string_view code;  // the JSON error code
  std::string message;
};

// What is wrong with `req`, if anything. A problem closes the connection:
// where one request ends can no longer be trusted.
std::optional<RequestProblem> check_request_header(const boost::beast::http::request_header<>& req);

// The transfer codings a chunked request applies before "chunked", as the
// upstream must be told them: "gzip, " for "gzip, chunked", "" for
// "chunked". Only for a request that passed check_request_header.
std::string codings_before_chunked(const boost::beast::http::request_header<>& req);

}  // namespace sluice::http
