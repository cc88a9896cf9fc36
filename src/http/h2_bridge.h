// The HTTP/1.1 side of a bridged HTTP/2 stream (http/h2_connection.h): the
// request head written to the stream's Session, and the parser of the
// response read back from it.
//
// Thread-safety: none; one per stream, on its connection's thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/beast/http/basic_parser.hpp>

namespace sluice::http {

// A stream's request as HTTP/1.1 text, built field by field as nghttp2
// decodes them. `bytes()` is the size of the head so far: what
// server.max_header_bytes bounds.
class BridgedRequest {
 public:
  // One decoded field, pseudo-header or not (names are lowercase, values
  // checked by nghttp2). Cookies split by HPACK are joined with "; ".
  void add(std::string_view name, std::string_view value);
  size_t bytes() const { return bytes_; }
  bool is_connect() const { return method_ == "CONNECT"; }
  bool is_head() const { return method_ == "HEAD"; }
  // The head to write: request line, Host (from :authority), the fields,
  // Connection: close, and Transfer-Encoding: chunked when a body follows
  // (`body_follows`) without a Content-Length. Call once.
  std::string head(bool body_follows);
  // Whether the body is sent chunked (head() decided it).
  bool chunked() const { return chunked_; }

 private:
  std::string method_;
  std::string path_;
  std::string authority_;
  std::string host_;
  std::string cookie_;
  std::string fields_;
  bool has_length_ = false;
  bool chunked_ = false;
  size_t bytes_ = 0;
};

// Parses the HTTP/1.1 response of a bridge: status and fields kept for the
// HTTP/2 HEADERS (lowercase, hop-by-hop fields left out), body bytes
// appended to `body` as they come (chunked framing removed).
class BridgedResponseParser : public boost::beast::http::basic_parser<false> {
 public:
  explicit BridgedResponseParser(std::string& body) : body_(body) {}
  unsigned status() const { return status_; }
  const std::vector<std::pair<std::string, std::string>>& fields() const { return fields_; }

 private:
  void on_request_impl(boost::beast::http::verb, boost::beast::string_view,
                       boost::beast::string_view, int, boost::beast::error_code&) override {}
  void on_response_impl(int code, boost::beast::string_view, int,
                        boost::beast::error_code&) override {
    status_ = static_cast<unsigned>(code);
  }
  void on_field_impl(boost::beast::http::field, boost::beast::string_view name,
                     boost::beast::string_view value, boost::beast::error_code&) override;
  void on_header_impl(boost::beast::error_code&) override {}
  void on_body_init_impl(const boost::optional<std::uint64_t>&,
                         boost::beast::error_code&) override {}
  size_t on_body_impl(boost::beast::string_view body, boost::beast::error_code&) override {
    body_.append(body.data(), body.size());
    return body.size();
  }
  void on_chunk_header_impl(std::uint64_t, boost::beast::string_view,
                            boost::beast::error_code&) override {}
  size_t on_chunk_body_impl(std::uint64_t, boost::beast::string_view body,
                            boost::beast::error_code&) override {
    body_.append(body.data(), body.size());
    return body.size();
  }
  void on_finish_impl(boost::beast::error_code&) override {}

  std::string& body_;
  unsigned status_ = 0;
  std::vector<std::pair<std::string, std::string>> fields_;
};

}  // namespace sluice::http
