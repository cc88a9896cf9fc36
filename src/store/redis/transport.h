// One connection attempt's socket, plain TCP or TLS over it, with the buffers
// its operations read into and write from.
//
// Held by a shared_ptr: by the Connection while it uses it, and by the
// handler of every operation pending on it. A Connection that gives up the
// transport (connection lost, or itself destroyed) closes it; the aborted
// operations' handlers then still find their socket and buffers alive.
//
// Thread-safety: none; use from the thread that runs the io_context.
#pragma once

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/write.hpp>
#include <optional>
#include <string>
#include <utility>

#include "store/redis/tls.h"

namespace sluice::redis {

class Transport {
 public:
  // `tls`: null for plain TCP.
  Transport(boost::asio::io_context& io, boost::asio::ssl::context* tls) : socket_(io) {
    if (tls != nullptr) tls_.emplace(socket_, *tls);
  }
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  boost::asio::ip::tcp::socket& socket() { return socket_; }
  // Null for plain TCP.
  TlsStream* tls() { return tls_ ? &*tls_ : nullptr; }

  // Reads what has come, up to read_buffer's size, into read_buffer.
  template <class Handler>
  void read_some(Handler&& handler) {
    const auto into = boost::asio::buffer(read_buffer);
    if (tls_) {
      tls_->async_read_some(into, std::forward<Handler>(handler));
    } else {
      socket_.async_read_some(into, std::forward<Handler>(handler));
    }
  }

  // Writes all of `writing`.
  template <class Handler>
  void write(Handler&& handler) {
    const auto from = boost::asio::buffer(writing);
    if (tls_) {
      boost::asio::async_write(*tls_, from, std::forward<Handler>(handler));
    } else {
      boost::asio::async_write(socket_, from, std::forward<Handler>(handler));
    }
  }

  // Cancels every pending operation (their handlers see operation_aborted).
  // No TLS close_notify: the connection is being given up, not ended politely.
  void close() {
    boost::system::error_code ignored;
    socket_.close(ignored);
  }

  std::string writing;  // the bytes of the write in progress
  std::array<char, 16 * 1024> read_buffer;

 private:
  boost::asio::ip::tcp::socket socket_;
  std::optional<TlsStream> tls_;  // over socket_
};

}  // namespace sluice::redis
