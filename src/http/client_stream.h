// ClientStream: one client connection, plain TCP or TLS, chosen at accept.
//
// It is an Asio AsyncStream (get_executor, async_read_some, async_write_some),
// so Asio's and Beast's composed operations (async_write, http::async_read,
// the serializer) run on it unchanged. Which of the two it is is decided by a
// branch in each operation rather than by a template parameter, so that the
// session, the proxy and the tunnel exist once; a plain connection pays that
// branch and nothing else (no timer or wrapper of its own, unlike Beast's
// tcp_stream), a TLS one pays for its ssl::stream. A plain connection's reads
// report when they drained the socket, so that the next read waits for epoll
// without an empty recv first (drained_reads.h).
//
// The ssl::stream refers to the socket member, so a ClientStream never moves.
//
// Thread-safety: none; use from the thread that runs the socket's io_context.
#pragma once

#include <memory>
#include <utility>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>

#include "http/drained_reads.h"

namespace sluice::http {

class ClientStream {
 public:
  using executor_type = boost::asio::any_io_executor;
  using Socket = boost::asio::ip::tcp::socket;
  using Tls = boost::asio::ssl::stream<Socket&>;

  // A plain connection.
  explicit ClientStream(Socket socket) : socket_(std::move(socket)) {}
  // A TLS connection when `tls` is set (its handshake is the caller's:
  // start_tls() then async_handshake()), else a plain one.
  ClientStream(Socket socket, std::shared_ptr<boost::asio::ssl::context> tls)
      : socket_(std::move(socket)), context_(std::move(tls)) {}
  ClientStream(const ClientStream&) = delete;
  ClientStream& operator=(const ClientStream&) = delete;

  executor_type get_executor() { return socket_.get_executor(); }
  // The TCP socket underneath: options, addresses, cancel, shutdown, close.
  Socket& socket() { return socket_; }
  bool is_tls() const { return context_ != nullptr; }
  // TLS only: makes the TLS session. Its buffers and OpenSSL's come to ~70 KB,
  // so the caller makes it once the client has sent something to handshake
  // with, not at the accept.
  void start_tls() {
    if (!tls_) tls_ = std::make_unique<Tls>(socket_, *context_);
  }
  // The TLS session (ALPN, protocol); null on a plain connection, and
  // before start_tls().
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

  // TLS only: the server side of the handshake.
  template <class Handler>
  void async_handshake(Handler&& handler) {
    tls_->async_handshake(boost::asio::ssl::stream_base::server, std::forward<Handler>(handler));
  }

  // TLS only: sends close_notify, and completes once it is written. The
  // peer's close_notify is not waited for (nginx does not either): the
  // connection is closing, and the caller drains what is left on the socket.
  template <class Handler>
  void async_shutdown(Handler&& handler) {
    SSL_set_shutdown(tls_->native_handle(), SSL_RECEIVED_SHUTDOWN);
    tls_->async_shutdown(std::forward<Handler>(handler));
  }

 private:
  Socket socket_;
  // Held so that the context outlives the connection's SSL object whatever a
  // reload does to the State that held it.
  std::shared_ptr<boost::asio::ssl::context> context_;
  std::unique_ptr<Tls> tls_;
};

}  // namespace sluice::http
