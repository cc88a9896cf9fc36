// A small blocking HTTP/1.1 client on raw sockets for the integration tests:
// it can send well-formed requests and deliberately malformed bytes, keep a
// connection alive across requests, and tell when the server closed it.
// Every read is bounded by a timeout; nothing here waits forever.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace sluice::test {

struct HttpResponse {
  int status = 0;  // 0: no (complete) response
  std::string reason;
  std::vector<std::pair<std::string, std::string>> headers;  // in order, names as sent
  std::string body;

  // The first value of `name` (case-insensitive), if present.
  std::optional<std::string> header(const std::string& name) const;
  bool has_header(const std::string& name) const { return header(name).has_value(); }
  // The names of all headers, lower-cased, in order.
  std::vector<std::string> header_names() const;
};

class HttpConnection {
 public:
  // Connects to host ("127.0.0.1" or "::1") and port; throws std::runtime_error on failure.
  HttpConnection(const std::string& host, uint16_t port);
  ~HttpConnection();
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  // Tries to connect; nullopt-like failure as false.
  static bool can_connect(const std::string& host, uint16_t port);

  void send_raw(const std::string& bytes);
  // Sends a request. `headers` are added as given; Host and (with a body)
  // Content-Length are added unless present.
  void send_request(const std::string& method, const std::string& target,
                    const std::vector<std::pair<std::string, std::string>>& headers = {},
                    const std::string& body = "");
  // Reads one response (Content-Length or no body; no body at all for the
  // response to a HEAD: `to_head`). status 0 if the connection closed or the
  // timeout passed first.
  HttpResponse read_response(std::chrono::milliseconds timeout = std::chrono::seconds(10),
                             bool to_head = false);
  // True if the server closed the connection (EOF or reset) within `timeout`,
  // discarding anything it sent first.
  bool closed_by_peer(std::chrono::milliseconds timeout = std::chrono::seconds(10));

  HttpResponse request(const std::string& method, const std::string& target,
                       const std::vector<std::pair<std::string, std::string>>& headers = {},
                       const std::string& body = "");

 private:
  // Reads more bytes into buffer_; false on EOF, error or timeout.
  enum class Received { kData, kClosed, kTimeout };
  // Waits until `deadline` for bytes and appends what one recv() gives to `into`.
  Received receive(std::chrono::steady_clock::time_point deadline, std::string& into);
  bool fill(std::chrono::steady_clock::time_point deadline);

  int fd_ = -1;
  std::string host_;
  std::string buffer_;
};

// One request on a fresh connection.
HttpResponse http_request(const std::string& host, uint16_t port, const std::string& method,
                          const std::string& target,
                          const std::vector<std::pair<std::string, std::string>>& headers = {},
                          const std::string& body = "");

}  // namespace sluice::test
