#include "http/head_writer.h"

#include <charconv>

#include <boost/beast/http/status.hpp>

#include "render/rate_headers.h"

namespace sluice::http {

namespace bhttp = boost::beast::http;

void append_status_line(unsigned version, unsigned status, std::string_view reason,
                        std::string& out) {
  // As Beast writes it: one digit each side of the dot, three status digits.
  const char line[13] = {'H',
                         'T',
                         'T',
                         'P',
                         '/',
                         static_cast<char>('0' + version / 10 % 10),
                         '.',
                         static_cast<char>('0' + version % 10),
                         ' ',
                         static_cast<char>('0' + status / 100 % 10),
                         static_cast<char>('0' + status / 10 % 10),
                         static_cast<char>('0' + status % 10),
                         ' '};
  out.append(line, sizeof line);
  if (reason.empty()) {
    const auto standard = bhttp::obsolete_reason(static_cast<bhttp::status>(status));
    out.append(standard.data(), standard.size());
  } else {
    out.append(reason);
  }
  out.append("\r\n", 2);
}

void append_field(std::string_view name, std::string_view value, std::string& out) {
  out.append(name);
  out.append(": ", 2);
  out.append(value);
  out.append("\r\n", 2);
}

void append_uint(uint64_t value, std::string& out) {
  char digits[20];
  const auto r = std::to_chars(digits, digits + sizeof digits, value);
  out.append(digits, static_cast<size_t>(r.ptr - digits));
}

void append_connection_field(unsigned version, bool keep_alive, std::string& out) {
  if (version >= 11 && !keep_alive) out.append("Connection: close\r\n");
  if (version < 11 && keep_alive) out.append("Connection: keep-alive\r\n");
}

void append_reply_fields(const Reply& reply, std::string& out) {
  if (!reply.content_type.empty()) append_field("Content-Type", reply.content_type, out);
  if (reply.rate_headers != nullptr) {
    for (const RateHeaders::Field& f : *reply.rate_headers) append_field(f.name, f.value, out);
  }
  if (!reply.extra_name.empty()) append_field(reply.extra_name, reply.extra_value, out);
}

void append_framing(unsigned status, unsigned version, bool keep_alive, size_t body_bytes,
                    std::string& out) {
  append_connection_field(version, keep_alive, out);
  if (status >= 200 && status != 204) {
    out.append("Content-Length: ");
    append_uint(body_bytes, out);
    out.append("\r\n", 2);
  }
  out.append("\r\n", 2);
}

void append_beast_response(Response& res, unsigned version, bool keep_alive, bool head_request,
                           std::string& out) {
  res.version(version);
  res.keep_alive(keep_alive);
  res.prepare_payload();
  const auto reason = res.reason();
  append_status_line(version, res.result_int(), std::string_view(reason.data(), reason.size()),
                     out);
  for (const auto& f : res) {
    const auto name = f.name_string();
    const auto value = f.value();
    append_field(std::string_view(name.data(), name.size()),
                 std::string_view(value.data(), value.size()), out);
  }
  out.append("\r\n", 2);
  if (!head_request) out.append(res.body());
}

}  // namespace sluice::http
