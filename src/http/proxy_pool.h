// The keep-alive connections of one worker's gateway proxy to its upstream.
//
// A connection goes back to the pool after an exchange that left it clean
// (request and response complete, the upstream did not ask to close) and is
// taken again, most recently used first, by the next request of the same
// worker. At most `max_idle` (Upstream::max_idle_connections) connections wait
// in the pool; beyond that the oldest are closed, as are connections idle for
// longer than kMaxIdleTime.
//
// An idle connection waits for readability (no system call: the socket is
// already in the worker's epoll set), so an upstream that closes it, or sends
// bytes nobody asked for, has it dropped from the pool as soon as the event
// loop sees that, as nginx's keepalive cache does. Taking a connection costs
// no system call then. A close the wait cannot have seen (one that came with
// the response itself, or one racing with the request) is left to the
// proxy's retry rule (proxy.cc), which sends a request without a body and of
// an idempotent method again on a new connection. A request the rule would
// not send again asks take() to `verify`: one non-blocking peek at the socket
// that drops connections at EOF, in error or holding unexpected bytes.
//
// Connections to another upstream than the one asked for (the config was
// reloaded with a new `upstream`) are closed when met.
//
// Thread-safety: none; one pool per worker io_context, used on its thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>

namespace sluice::http {

// One connection to the upstream, with what the proxy keeps per connection.
struct UpstreamConnection {
  explicit UpstreamConnection(boost::asio::io_context& io_context) : socket(io_context) {}

  boost::asio::ip::tcp::socket socket;
  boost::beast::flat_buffer buffer;  // bytes read from the upstream, not yet parsed
  std::string endpoint;              // "host:port" of the upstream (the pool key)
  uint64_t exchanges = 0;            // requests answered on it (> 0: reused from the pool)
  std::chrono::steady_clock::time_point idle_since;
  uint64_t idle_ticket = 0;  // names its current stay in the pool (0: not pooled)
};

class UpstreamPool {
 public:
  // Idle connections older than this are closed rather than reused: most
  // servers close idle keep-alive connections sooner, and holding
  // descriptors for nothing is not worth it.
  static constexpr std::chrono::seconds kMaxIdleTime{60};

  UpstreamPool() : idle_(std::make_shared<Idle>()) {}
  UpstreamPool(const UpstreamPool&) = delete;
  UpstreamPool& operator=(const UpstreamPool&) = delete;

  // The most recently used idle connection to `endpoint`, or null (then
  // connect a new one). `verify`: also peek at it (see the top of this file).
  std::unique_ptr<UpstreamConnection> take(std::string_view endpoint,
                                           std::chrono::steady_clock::time_point now, bool verify);
  // Keeps `connection` for reuse (it must be clean: no pending operation, no
  // unread response bytes), closing the oldest idle ones above `max_idle`.
  void put(std::unique_ptr<UpstreamConnection> connection, size_t max_idle,
           std::chrono::steady_clock::time_point now);

  size_t idle() const { return idle_->connections.size(); }

  // True when the socket of an idle connection is still open with nothing to
  // read (the peek described above).
  static bool looks_open(UpstreamConnection& connection);

 private:
  // Shared with the waits of the idle connections, which may complete after
  // the pool is gone (they hold it weakly).
  struct Idle {
    std::vector<std::unique_ptr<UpstreamConnection>> connections;  // oldest first
    uint64_t last_ticket = 0;
  };

  void expire(std::chrono::steady_clock::time_point now);
  static void watch(const std::shared_ptr<Idle>& idle, UpstreamConnection& connection);

  std::shared_ptr<Idle> idle_;
};

}  // namespace sluice::http
