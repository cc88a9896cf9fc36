#include "http/responses.h"

#include <cstdio>

#include <boost/beast/http/field.hpp>

namespace sluice::http {

std::string cat(std::initializer_list<std::string_view> parts) {
  size_t size = 0;
  for (std::string_view p : parts) size += p.size();
  std::string out;
  out.reserve(size);
  for (std::string_view p : parts) out.append(p);
  return out;
}

std::string json_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

Response json_response(HttpStatus status, std::string body) {
  Response res{status, 11};
  res.set(boost::beast::http::field::content_type, "application/json");
  res.body() = std::move(body);
  return res;
}

std::string error_body(std::string_view code, std::string_view message) {
  return cat({"{\"error\":{\"code\":\"", json_escape(code), "\",\"message\":\"",
              json_escape(message), "\"}}"});
}

Response error_response(HttpStatus status, std::string_view code, std::string_view message) {
  return json_response(status, error_body(code, message));
}

}  // namespace sluice::http
