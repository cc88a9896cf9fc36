// The keep-alive connections of one worker's gateway proxy to its upstream.
//
// A connection goes back to the pool after an exchange that left it clean
// (request and response complete, the upstream did not ask to close) and is
// taken again, most recently used first, by the next request of the same
// worker. At most `max_idle` (Upstream::max_idle_connections) connections wait
// in the pool; beyond that the oldest are closed, as are connections idle for
// longer than kMaxIdleTime.
//
// Idle connections have no read pending, so an upstream that closes one while
// it waits is noticed only when it is taken: take() peeks at the socket
// (non-blocking, one system call) and drops connections that reached EOF, got
// an error, or hold unexpected bytes. A close that races with the request
// being sent is left to the proxy's retry rule (proxy.cc).
//
// Each server of each upstream has a pool of its own (ProxyShared::pool_for);
// a connection to another endpoint than the one asked for is closed when met.
//
// Thread-safety: none; one pool per worker io_context, used on its thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>

#include "http/drained_reads.h"

namespace sluice::http {

// A connection to an upstream server as an Asio AsyncStream: TLS once
// start_tls() made its session (an https:// server), else the TCP socket,
// whose reads report the drain (drained_reads.h; the option is set at
// connect). Beast's parsers read the response from it and the request is
// written to it. It refers to the socket, so it never moves.
class UpstreamStream {
 public:
  using executor_type = boost::asio::ip::tcp::socket::executor_type;
  using Tls = boost::asio::ssl::stream<boost::asio::ip::tcp::socket&>;

  explicit UpstreamStream(boost::asio::ip::tcp::socket& socket) : socket_(socket) {}
  executor_type get_executor() { return socket_.get_executor(); }

  void start_tls(boost::asio::ssl::context& context) {
    tls_ = std::make_unique<Tls>(socket_, context);
  }
  Tls* tls() { return tls_.get(); }

  template <class MutableBuffers, class Handler>
  void async_read_some(const MutableBuffers& buffers, Handler&& handler) {
    if (tls_) return tls_->async_read_some(buffers, std::forward<Handler>(handler));
    async_read_some_reporting_drain(socket_, buffers, std::forward<Handler>(handler));
  }
  template <class ConstBuffers, class Handler>
  void async_write_some(const ConstBuffers& buffers, Handler&& handler) {
    if (tls_) return tls_->async_write_some(buffers, std::forward<Handler>(handler));
    socket_.async_write_some(buffers, std::forward<Handler>(handler));
  }

 private:
  boost::asio::ip::tcp::socket& socket_;
  std::unique_ptr<Tls> tls_;
};

// One connection to the upstream, with what the proxy keeps per connection.
struct UpstreamConnection {
  explicit UpstreamConnection(boost::asio::io_context& io_context) : socket(io_context) {}
  UpstreamConnection(const UpstreamConnection&) = delete;  // `reads` refers to `socket`
  UpstreamConnection& operator=(const UpstreamConnection&) = delete;

  boost::asio::ip::tcp::socket socket;
  UpstreamStream stream{socket};     // what requests and responses go through
  boost::beast::flat_buffer buffer;  // bytes read from the upstream, not yet parsed
  std::string endpoint;              // "http[s]://host:port" of the server (the pool key)
  uint64_t exchanges = 0;            // requests answered on it (> 0: reused from the pool)
  std::chrono::steady_clock::time_point idle_since;
};

class UpstreamPool {
 public:
  // Idle connections older than this are closed rather than reused: most
  // servers close idle keep-alive connections sooner, and a closed one costs a
  // failed peek; holding descriptors for nothing is not worth it.
  static constexpr std::chrono::seconds kMaxIdleTime{60};

  // The most recently used idle connection to `endpoint` that still looks
  // open, or null (then connect a new one).
  std::unique_ptr<UpstreamConnection> take(std::string_view endpoint,
                                           std::chrono::steady_clock::time_point now);
  // Keeps `connection` for reuse (it must be clean: no pending operation, no
  // unread response bytes), closing the oldest idle ones above `max_idle`.
  void put(std::unique_ptr<UpstreamConnection> connection, size_t max_idle,
           std::chrono::steady_clock::time_point now);

  size_t idle() const { return idle_.size(); }

  // True when the socket of an idle connection is still open with nothing to
  // read (the peek described above).
  static bool looks_open(UpstreamConnection& connection);

 private:
  void expire(std::chrono::steady_clock::time_point now);

  std::vector<std::unique_ptr<UpstreamConnection>> idle_;  // oldest first
};

}  // namespace sluice::http
