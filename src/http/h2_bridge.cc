#include "http/h2_bridge.h"

#include <boost/beast/core/string.hpp>

namespace sluice::http {

namespace beast = boost::beast;

namespace {

// Each field costs what its HTTP/1.1 line does: "name: value\r\n".
constexpr size_t kLineOverhead = 4;

// Connection-specific fields (RFC 9113 8.2.2): not sent in HTTP/2.
bool is_hop_by_hop(std::string_view name) {
  return beast::iequals(name, "connection") || beast::iequals(name, "keep-alive") ||
         beast::iequals(name, "proxy-connection") || beast::iequals(name, "transfer-encoding") ||
         beast::iequals(name, "upgrade") || beast::iequals(name, "te");
}

}  // namespace

void BridgedRequest::add(std::string_view name, std::string_view value) {
  bytes_ += name.size() + value.size() + kLineOverhead;
  if (!name.empty() && name.front() == ':') {
    if (name == ":method") method_.assign(value);
    if (name == ":path") path_.assign(value);
    if (name == ":authority") authority_.assign(value);
    return;  // :scheme is the connection's; :protocol is refused by nghttp2
  }
  if (name == "host") {
    host_.assign(value);
    return;
  }
  if (name == "cookie") {
    if (!cookie_.empty()) cookie_.append("; ");
    cookie_.append(value);
    return;
  }
  // The bridge sends the body at once: no interim 100 Continue to wait for.
  if (name == "expect" || is_hop_by_hop(name)) return;
  if (name == "content-length") has_length_ = true;
  fields_.append(name).append(": ").append(value).append("\r\n");
}

std::string BridgedRequest::head(bool body_follows) {
  std::string out;
  out.reserve(bytes_ + 64);
  out.append(method_).append(" ").append(path_).append(" HTTP/1.1\r\n");
  const std::string& host = authority_.empty() ? host_ : authority_;
  if (!host.empty()) out.append("Host: ").append(host).append("\r\n");
  out.append(fields_);
  if (!cookie_.empty()) out.append("cookie: ").append(cookie_).append("\r\n");
  chunked_ = body_follows && !has_length_;
  if (chunked_) out.append("Transfer-Encoding: chunked\r\n");
  out.append("Connection: close\r\n\r\n");
  return out;
}

void BridgedResponseParser::on_field_impl(beast::http::field, beast::string_view name,
                                          beast::string_view value, beast::error_code&) {
  const std::string_view n(name.data(), name.size());
  if (is_hop_by_hop(n)) return;
  std::string lower(n);
  for (char& c : lower) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  fields_.emplace_back(std::move(lower), std::string(value.data(), value.size()));
}

}  // namespace sluice::http
