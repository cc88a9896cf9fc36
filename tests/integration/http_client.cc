#include "http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace sluice::test {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

int connect_to(const std::string& host, uint16_t port) {
  sockaddr_storage addr{};
  socklen_t len = 0;
  int family = AF_INET;
  if (host.find(':') != std::string::npos) {
    family = AF_INET6;
    auto* a6 = reinterpret_cast<sockaddr_in6*>(&addr);
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons(port);
    if (inet_pton(AF_INET6, host.c_str(), &a6->sin6_addr) != 1) return -1;
    len = sizeof(sockaddr_in6);
  } else {
    auto* a4 = reinterpret_cast<sockaddr_in*>(&addr);
    a4->sin_family = AF_INET;
    a4->sin_port = htons(port);
    if (inet_pton(AF_INET, host.c_str(), &a4->sin_addr) != 1) return -1;
    len = sizeof(sockaddr_in);
  }
  const int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    ::close(fd);
    return -1;
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

}  // namespace

std::optional<std::string> HttpResponse::header(const std::string& name) const {
  const std::string wanted = lower(name);
  for (const auto& [n, v] : headers) {
    if (lower(n) == wanted) return v;
  }
  return std::nullopt;
}

std::vector<std::string> HttpResponse::header_names() const {
  std::vector<std::string> out;
  for (const auto& h : headers) out.push_back(lower(h.first));
  return out;
}

HttpConnection::HttpConnection(const std::string& host, uint16_t port) {
  fd_ = connect_to(host, port);
  if (fd_ < 0) {
    throw std::runtime_error("cannot connect to " + host + ":" + std::to_string(port) + ": " +
                             std::strerror(errno));
  }
  // Built with append(): GCC 12 warns falsely (-Wrestrict) on
  // `"literal" + std::string&&` in optimised builds.
  const bool ipv6 = host.find(':') != std::string::npos;
  const std::string port_text = std::to_string(port);
  std::string authority;
  authority.reserve(host.size() + port_text.size() + 3);
  if (ipv6) authority.append(1, '[');
  authority.append(host);
  if (ipv6) authority.append(1, ']');
  authority.append(1, ':');
  authority.append(port_text);
  host_ = std::move(authority);
}

HttpConnection::~HttpConnection() {
  if (fd_ >= 0) ::close(fd_);
}

bool HttpConnection::can_connect(const std::string& host, uint16_t port) {
  const int fd = connect_to(host, port);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

void HttpConnection::send_raw(const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("send failed: ") + std::strerror(errno));
    }
    sent += static_cast<size_t>(n);
  }
}

void HttpConnection::send_request(const std::string& method, const std::string& target,
                                  const std::vector<std::pair<std::string, std::string>>& headers,
                                  const std::string& body) {
  std::string out = method + " " + target + " HTTP/1.1\r\n";
  bool has_host = false, has_length = false;
  for (const auto& [n, v] : headers) {
    if (lower(n) == "host") has_host = true;
    if (lower(n) == "content-length" || lower(n) == "transfer-encoding") has_length = true;
    out += n;
    out += ": ";
    out += v;
    out += "\r\n";
  }
  if (!has_host) {
    out += "Host: ";
    out += host_;
    out += "\r\n";
  }
  if (!body.empty() && !has_length) {
    out += "Content-Length: ";
    out += std::to_string(body.size());
    out += "\r\n";
  }
  out += "\r\n";
  out += body;
  send_raw(out);
}

HttpConnection::Received HttpConnection::receive(std::chrono::steady_clock::time_point deadline,
                                                 std::string& into) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return Received::kTimeout;
    pollfd p{fd_, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return Received::kTimeout;
    char buf[16384];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Received::kClosed;  // EOF or reset
    into.append(buf, static_cast<size_t>(n));
    return Received::kData;
  }
}

bool HttpConnection::fill(std::chrono::steady_clock::time_point deadline) {
  return receive(deadline, buffer_) == Received::kData;
}

HttpResponse HttpConnection::read_response(std::chrono::milliseconds timeout, bool to_head) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  HttpResponse res;
  size_t end;
  while ((end = buffer_.find("\r\n\r\n")) == std::string::npos) {
    if (!fill(deadline)) return res;
  }
  const std::string head = buffer_.substr(0, end);
  buffer_.erase(0, end + 4);
  size_t line_end = head.find("\r\n");
  const std::string status_line = head.substr(0, line_end);
  // "HTTP/1.1 200 OK"
  const size_t sp1 = status_line.find(' ');
  const size_t sp2 = status_line.find(' ', sp1 + 1);
  const int status = std::atoi(status_line.substr(sp1 + 1, sp2 - sp1 - 1).c_str());
  res.reason = sp2 == std::string::npos ? "" : status_line.substr(sp2 + 1);
  size_t pos = line_end == std::string::npos ? head.size() : line_end + 2;
  while (pos < head.size()) {
    size_t next = head.find("\r\n", pos);
    if (next == std::string::npos) next = head.size();
    const std::string line = head.substr(pos, next - pos);
    const size_t colon = line.find(':');
    if (colon != std::string::npos) {
      std::string value = line.substr(colon + 1);
      const size_t first = value.find_first_not_of(' ');
      value = first == std::string::npos ? "" : value.substr(first);
      res.headers.emplace_back(line.substr(0, colon), value);
    }
    pos = next + 2;
  }
  size_t length = 0;
  if (auto cl = res.header("Content-Length"); cl && !to_head) length = std::stoul(*cl);
  while (buffer_.size() < length) {
    if (!fill(deadline)) return res;
  }
  res.body = buffer_.substr(0, length);
  buffer_.erase(0, length);
  res.status = status;
  return res;
}

bool HttpConnection::closed_by_peer(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string ignored;
  for (;;) {
    switch (receive(deadline, ignored)) {
      case Received::kData:
        ignored.clear();
        break;
      case Received::kClosed:
        return true;
      case Received::kTimeout:
        return false;
    }
  }
}

HttpResponse HttpConnection::request(
    const std::string& method, const std::string& target,
    const std::vector<std::pair<std::string, std::string>>& headers, const std::string& body) {
  send_request(method, target, headers, body);
  return read_response(std::chrono::seconds(10), method == "HEAD");
}

HttpResponse http_request(const std::string& host, uint16_t port, const std::string& method,
                          const std::string& target,
                          const std::vector<std::pair<std::string, std::string>>& headers,
                          const std::string& body) {
  HttpConnection c(host, port);
  return c.request(method, target, headers, body);
}

}  // namespace sluice::test
