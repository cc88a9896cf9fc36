#include "http/proxy_pool.h"

#include <sys/socket.h>

#include <algorithm>
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
                                                       std::chrono::steady_clock::time_point now,
                                                       bool verify) {
  expire(now);
  auto& idle = idle_->connections;
  while (!idle.empty()) {
    std::unique_ptr<UpstreamConnection> c = std::move(idle.back());
    idle.pop_back();
    c->idle_ticket = 0;
    // The idle wait goes (its handler sees operation_aborted); what the
    // exchange reads next is the response.
    boost::system::error_code ignored;
    c->socket.cancel(ignored);
    const bool usable = c->endpoint == endpoint && c->socket.is_open() && c->buffer.size() == 0 &&
                        (!verify || looks_open(*c));
    if (usable) return c;
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
  connection->idle_ticket = ++idle_->last_ticket;
  watch(idle_, *connection);
  auto& idle = idle_->connections;
  idle.push_back(std::move(connection));
  if (idle.size() > max_idle) {
    const size_t excess = idle.size() - max_idle;
    for (size_t i = 0; i < excess; ++i) close_connection(*idle[i]);
    idle.erase(idle.begin(), idle.begin() + static_cast<std::ptrdiff_t>(excess));
  }
}

// Readable while idle: the upstream closed the connection (EOF or reset) or
// sent bytes nobody asked for. Either way it cannot carry a request: closed
// now. The ticket tells a wait of this stay in the pool from one that
// completed while the connection was being taken.
void UpstreamPool::watch(const std::shared_ptr<Idle>& idle, UpstreamConnection& connection) {
  connection.socket.async_wait(
      boost::asio::ip::tcp::socket::wait_read,
      [weak = std::weak_ptr<Idle>(idle),
       ticket = connection.idle_ticket](const boost::system::error_code& ec) {
        if (ec) return;  // taken (cancelled) or closed
        const std::shared_ptr<Idle> pool = weak.lock();
        if (!pool) return;
        auto& connections = pool->connections;
        const auto it = std::find_if(connections.begin(), connections.end(),
                                     [ticket](const auto& c) { return c->idle_ticket == ticket; });
        if (it == connections.end()) return;
        close_connection(**it);
        connections.erase(it);
      });
}

void UpstreamPool::expire(std::chrono::steady_clock::time_point now) {
  auto& idle = idle_->connections;
  size_t old = 0;
  while (old < idle.size() && now - idle[old]->idle_since > kMaxIdleTime) {
    close_connection(*idle[old]);
    ++old;
  }
  if (old > 0) idle.erase(idle.begin(), idle.begin() + static_cast<std::ptrdiff_t>(old));
}

}  // namespace sluice::http
