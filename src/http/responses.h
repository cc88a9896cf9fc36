// Building the server's own responses: JSON bodies and JSON errors of the
// shape {"error":{"code":"...","message":"..."}} (DESIGN.md §6).
//
// Thread-safety: pure functions.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/status.hpp>
#include <boost/beast/http/string_body.hpp>

namespace sluice::http {

using Response = boost::beast::http::response<boost::beast::http::string_body>;
using HttpStatus = boost::beast::http::status;

// The concatenation of `parts`, sized once. (Also sidesteps GCC 12's false
// -Wrestrict on `"literal" + std::string&&` in optimised builds.)
std::string cat(std::initializer_list<std::string_view> parts);

// `text` as the inside of a JSON string (quotes, backslashes, control
// characters escaped; bytes >= 0x80 passed through).
std::string json_escape(std::string_view text);

// A response with `body` as application/json. Keep-alive and the HTTP version
// are set by the connection when it writes the response.
Response json_response(HttpStatus status, std::string body);

// {"error":{"code":code,"message":message}}
std::string error_body(std::string_view code, std::string_view message);
Response error_response(HttpStatus status, std::string_view code, std::string_view message);

}  // namespace sluice::http
