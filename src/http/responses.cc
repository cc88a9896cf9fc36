#include "http/responses.h"

#include <boost/beast/http/field.hpp>

#include "render/rate_headers.h"

namespace sluice::http {

std::string cat(std::initializer_list<std::string_view> parts) {
  size_t size = 0;
  for (std::string_view p : parts) size += p.size();
  std::string out;
  out.reserve(size);
  for (std::string_view p : parts) out.append(p);
  return out;
}

Response to_response(const Reply& reply) {
  namespace bhttp = boost::beast::http;
  using boost::beast::string_view;
  Response res{reply.status, 11};
  if (!reply.content_type.empty()) {
    res.set(bhttp::field::content_type,
            string_view(reply.content_type.data(), reply.content_type.size()));
  }
  if (reply.rate_headers != nullptr) {
    for (const RateHeaders::Field& f : *reply.rate_headers) {
      res.set(string_view(f.name.data(), f.name.size()),
              string_view(f.value.data(), f.value.size()));
    }
  }
  if (!reply.extra_name.empty()) {
    res.set(string_view(reply.extra_name.data(), reply.extra_name.size()),
            string_view(reply.extra_value.data(), reply.extra_value.size()));
  }
  res.body() = std::string(reply.body);
  return res;
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
