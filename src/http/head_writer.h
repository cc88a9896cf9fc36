// HTTP/1.x responses written as text, byte for byte as Beast's serializer
// would write them, for every response Sluice writes itself: the session's own
// (429, /v1/check, /v1/auth, errors, admin) and the gateway proxy's rewritten
// upstream responses. One buffer, one write, no Beast message or serializer.
//
//   std::string out;                                   // reused per connection
//   append_status_line(11, 429, "", out);              // "HTTP/1.1 429 Too Many Requests\r\n"
//   append_reply_fields(reply, out);                   // Content-Type, rate headers, extra
//   append_framing(200, 11, false, body.size(), out);  // Connection, Content-Length, blank line
//   out.append(body);
//
// Field values are written as given: callers pass values without CR, LF or
// NUL (constants, numbers, fields Beast's parser validated).
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "http/responses.h"

namespace sluice::http {

// "HTTP/<version / 10>.<version % 10> <status> <reason>\r\n"; an empty
// `reason` is the standard phrase of `status` (Beast's obsolete_reason).
void append_status_line(unsigned version, unsigned status, std::string_view reason,
                        std::string& out);

// "Name: value\r\n".
void append_field(std::string_view name, std::string_view value, std::string& out);

// The decimal digits of `value`.
void append_uint(uint64_t value, std::string& out);

// The Connection field a response needs to tell a client speaking `version`
// whether the connection stays open: "Connection: close" for HTTP/1.1 when it
// closes, "Connection: keep-alive" for HTTP/1.0 when it stays, else nothing.
void append_connection_field(unsigned version, bool keep_alive, std::string& out);

// The fields of a Reply in order: Content-Type (when set), the rate headers
// (when given), the extra field (when named).
void append_reply_fields(const Reply& reply, std::string& out);

// The end of a header block of a message with a body of `body_bytes` and no
// Connection field: the Connection field (see above),
// "Content-Length: <body_bytes>", the blank line. A 1xx or 204 carries no
// Content-Length (RFC 9110 §8.6; Beast 1.81's prepare_payload() wrote
// "Content-Length: 0" on a 204).
void append_framing(unsigned status, unsigned version, bool keep_alive, size_t body_bytes,
                    std::string& out);

// A Beast response as its serializer writes it, after res.version(version),
// res.keep_alive(keep_alive) and res.prepare_payload() (which this applies to
// `res`); the body is left out when `head_request` (Content-Length stays).
void append_beast_response(Response& res, unsigned version, bool keep_alive, bool head_request,
                           std::string& out);

}  // namespace sluice::http
