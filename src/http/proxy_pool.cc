#include "http/proxy_pool.h"

#include <sys/socket.h>

#include <cerrno>

#include <boost/system/error_code.hpp>

namespace sluice::http {

namespace {

void close_connection(UpstreamConnection& c) {
  boost::system::error_code ec;
  c.socket.shutdown(boost::asio::ip::tcp::socket::shutdown_both, ec);
  c.socket.close(ec);
}

}  // namespace

bool UpstreamPool::looks_open(UpstreamConnection& connection) {
  if (!connection.socket.is_open() || connection.buffer.size() != 0) return false;
  char byte;
  const ssize_t n = ::recv(connection.socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;  // open, nothing sent
  // 0: the upstream closed it. > 0: bytes nobody asked for (a late or extra
  // response); the connection is out of step. < 0: an error (reset).
  return false;
}

std::unique_ptr<UpstreamConnection> UpstreamPool::take(std::string_view endpoint,
                                                       std::chrono::steady_clock::time_point now) {
  expire(now);
  while (!idle_.empty()) {
    std::unique_ptr<UpstreamConnection> c = std::move(idle_.back());
    idle_.pop_back();
    if (c->endpoint == endpoint && looks_open(*c)) return c;
    close_connection(*c);
  }
  return nullptr;
}

void UpstreamPool::put(std::unique_ptr<UpstreamConnection> connection, size_t max_idle,
                       std::chrono::steady_clock::time_point now) {
  if (max_idle == 0) {
    close_connection(*connection);
    return;
  }
  expire(now);
  connection->idle_since = now;
  idle_.push_back(std::move(connection));
  if (idle_.size() > max_idle) {
    const size_t excess = idle_.size() - max_idle;
    for (size_t i = 0; i < excess; ++i) close_connection(*idle_[i]);
    idle_.erase(idle_.begin(), idle_.begin() + static_cast<std::ptrdiff_t>(excess));
  }
}

void UpstreamPool::expire(std::chrono::steady_clock::time_point now) {
  size_t old = 0;
  while (old < idle_.size() && now - idle_[old]->idle_since > kMaxIdleTime) {
    close_connection(*idle_[old]);
    ++old;
  }
  if (old > 0) idle_.erase(idle_.begin(), idle_.begin() + static_cast<std::ptrdiff_t>(old));
}

}  // namespace sluice::http
