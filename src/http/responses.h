// Building the server's own responses: JSON bodies and JSON errors of the
// shape {"error":{"code":"...","message":"..."}} (docs/DESIGN.md §6), either as a
// Beast message (Response: admin, rare errors) or as a Reply, the
// allocation-free form the hot paths (429, /v1/check, /v1/auth) hand to the
// session, which writes it as text (head_writer.h) in one write.
//
// Thread-safety: pure functions.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/status.hpp>
#include <boost/beast/http/string_body.hpp>

#include "util/json_escape.h"

namespace sluice::render {
class RateHeaders;
}  // namespace sluice::render

namespace sluice::http {

using render::RateHeaders;

using Response = boost::beast::http::response<boost::beast::http::string_body>;
using HttpStatus = boost::beast::http::status;

// A response of the server's own, by reference: every view (and the rate
// headers) must stay valid until Session::respond() returns, which copies
// what it needs. Written as: status line, Content-Type (when not empty), the
// rate headers (when given), the extra field (when named), then Connection and
// Content-Length as the connection needs them — the bytes Beast would write
// for the same message (head_writer.h).
struct Reply {
  HttpStatus status = HttpStatus::ok;
  std::string_view content_type;
  const RateHeaders* rate_headers = nullptr;
  std::string_view extra_name;  // one more field, e.g. the Allow of a 405
  std::string_view extra_value;
  std::string_view body;
};

// The same response as a Beast message (for a caller off the session's thread).
Response to_response(const Reply& reply);

// The concatenation of `parts`, sized once. (Also sidesteps GCC 12's false
// -Wrestrict on `"literal" + std::string&&` in optimised builds.)
std::string cat(std::initializer_list<std::string_view> parts);

// A response with `body` as application/json. Keep-alive and the HTTP version
// are set by the connection when it writes the response.
Response json_response(HttpStatus status, std::string body);

// {"error":{"code":code,"message":message}}
std::string error_body(std::string_view code, std::string_view message);
Response error_response(HttpStatus status, std::string_view code, std::string_view message);

}  // namespace sluice::http
