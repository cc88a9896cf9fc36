// Reads that know when they have drained the socket, so that the next read
// waits for epoll instead of first trying a recv that returns EAGAIN.
//
// Why: Asio's epoll reactor tries every read at once while the socket's
// "try speculative" flag is set, and clears that flag only when a read op
// reports `done_and_exhausted`, which its stream recv does only at end of
// stream. So after each read that returned data, the next async_read_some
// costs one recv returning EAGAIN before it is queued: one syscall per
// request that nginx does not make (bench/results/2026-gateway.md, "The empty
// read removed").
//
// How: a read whose buffer is a DrainReportingBuffer runs our op below (an
// explicit specialization of Asio's receive op base for that buffer type). It
// receives with recvmsg on a socket with TCP_INQ set, and the kernel tells it
// in a control message how much is left to read: 0 means the receive queue is
// empty and no FIN is pending (the kernel reports a pending FIN as 1), so the
// op reports `done_and_exhausted` and the reactor queues the next read without
// a recv. No wake-up is lost: epoll is edge-triggered there, bytes (or a FIN)
// arriving after the recv raise a new edge, and every edge sets the flag again.
// A short read alone would not do (nginx relies on EPOLLRDHUP for that, which
// Asio does not ask for): a request and its FIN that arrive together give one
// edge and a short read, and the end of stream would go unnoticed.
//
// Without TCP_INQ on the socket (no control message), the op behaves as
// Asio's own: a read that got data is `done`, the next one tries at once.
// Accepted sockets inherit TCP_INQ from their listener (Linux).
//
// Known difference from Asio's op: a connection reset (RST, which the kernel
// does not count in the hint) arriving together with the bytes before it is
// seen at the next write, or when the read's timer fires, not by the next read.
#pragma once

#include <netinet/in.h>
#include <netinet/tcp.h>

#include <cstddef>
#include <type_traits>
#include <utility>

#include <boost/asio/buffer.hpp>
#include <boost/asio/detail/socket_option.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/version.hpp>
// After the socket types, which it needs declared.
#include <boost/asio/detail/reactive_socket_recv_op.hpp>

// The specialization below replaces part of Asio's internals (same interface
// as reactive_socket_recv_op_base in Boost 1.81); a Boost upgrade must check
// that interface again before changing this version.
static_assert(BOOST_VERSION == 108100,
              "drained_reads.h specializes Asio's reactive_socket_recv_op_base as of "
              "Boost 1.81: check its interface and the epoll reactor's use of "
              "done_and_exhausted in the new Boost, then update BOOST_VERSION here");
#if !defined(BOOST_ASIO_HAS_EPOLL) || defined(BOOST_ASIO_HAS_IO_URING_AS_DEFAULT)
#error "drained_reads.h relies on Asio's edge-triggered epoll reactor"
#endif

namespace sluice::http {

// Sockets opened with this option (listeners: their accepted sockets inherit
// it) give the drain hint described above.
using ReportReceiveQueue = boost::asio::detail::socket_option::boolean<IPPROTO_TCP, TCP_INQ>;

// One receive buffer, as a MutableBufferSequence of one element: its type
// selects the op below.
class DrainReportingBuffer {
 public:
  explicit DrainReportingBuffer(const boost::asio::mutable_buffer& buffer) : buffer_(buffer) {}
  const boost::asio::mutable_buffer* begin() const { return &buffer_; }
  const boost::asio::mutable_buffer* end() const { return &buffer_ + 1; }
  const boost::asio::mutable_buffer& buffer() const { return buffer_; }

 private:
  boost::asio::mutable_buffer buffer_;
};

// What one receive did, in the terms of Asio's reactor.
using ReceiveStatus = boost::asio::detail::reactor_op::status;

// One non-blocking recvmsg into `buffer` on `socket`: `not_done` when nothing
// is there yet (EAGAIN), `done_and_exhausted` at end of stream or when the
// kernel says nothing is left to read, else `done`; `ec` and `bytes` as Asio's
// receive sets them.
ReceiveStatus receive_reporting_drain(int socket, const boost::asio::mutable_buffer& buffer,
                                      int flags, bool is_stream, boost::system::error_code& ec,
                                      std::size_t& bytes);

// socket.async_read_some, through the op below when `buffers` is one buffer
// (as Beast's flat_buffer gives); any other sequence goes to Asio's own op.
template <class MutableBuffers, class Handler>
void async_read_some_reporting_drain(boost::asio::ip::tcp::socket& socket,
                                     const MutableBuffers& buffers, Handler&& handler) {
  if constexpr (std::is_convertible_v<const MutableBuffers&, boost::asio::mutable_buffer>) {
    socket.async_read_some(DrainReportingBuffer(buffers), std::forward<Handler>(handler));
  } else {
    socket.async_read_some(buffers, std::forward<Handler>(handler));
  }
}

// A TCP socket seen as an AsyncReadStream whose reads report the drain: what
// Beast's parsers read an upstream's response from.
class DrainReportingStream {
 public:
  using executor_type = boost::asio::ip::tcp::socket::executor_type;

  explicit DrainReportingStream(boost::asio::ip::tcp::socket& socket) : socket_(socket) {}
  executor_type get_executor() { return socket_.get_executor(); }

  template <class MutableBuffers, class Handler>
  void async_read_some(const MutableBuffers& buffers, Handler&& handler) {
    async_read_some_reporting_drain(socket_, buffers, std::forward<Handler>(handler));
  }

 private:
  boost::asio::ip::tcp::socket& socket_;
};

}  // namespace sluice::http

namespace boost::asio::detail {

// Asio's receive op base for a DrainReportingBuffer: the same constructor and
// members as the primary template (reactive_socket_recv_op derives from it and
// uses only those), with a perform that reports the drain.
template <>
class reactive_socket_recv_op_base<sluice::http::DrainReportingBuffer> : public reactor_op {
 public:
  reactive_socket_recv_op_base(const boost::system::error_code& success_ec, socket_type socket,
                               socket_ops::state_type state,
                               const sluice::http::DrainReportingBuffer& buffers,
                               socket_base::message_flags flags, func_type complete_func)
      : reactor_op(success_ec, &reactive_socket_recv_op_base::do_perform, complete_func),
        socket_(socket),
        state_(state),
        buffer_(buffers.buffer()),
        flags_(flags) {}

  static status do_perform(reactor_op* base) {
    auto* op = static_cast<reactive_socket_recv_op_base*>(base);
    return sluice::http::receive_reporting_drain(op->socket_, op->buffer_, op->flags_,
                                                 (op->state_ & socket_ops::stream_oriented) != 0,
                                                 op->ec_, op->bytes_transferred_);
  }

 private:
  socket_type socket_;
  socket_ops::state_type state_;
  boost::asio::mutable_buffer buffer_;
  socket_base::message_flags flags_;
};

}  // namespace boost::asio::detail
