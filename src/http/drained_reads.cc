#include "http/drained_reads.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>

#include <boost/asio/error.hpp>

namespace sluice::http {

namespace {

// The bytes (plus one for a pending FIN) left in the receive queue after the
// receive that filled `message`, or -1 when the kernel sent no hint.
int left_to_read(msghdr& message) {
  for (cmsghdr* c = CMSG_FIRSTHDR(&message); c != nullptr; c = CMSG_NXTHDR(&message, c)) {
    if (c->cmsg_level == SOL_TCP && c->cmsg_type == TCP_CM_INQ &&
        c->cmsg_len >= CMSG_LEN(sizeof(int))) {
      int left;
      std::memcpy(&left, CMSG_DATA(c), sizeof left);
      return left;
    }
  }
  return -1;
}

}  // namespace

ReceiveStatus receive_reporting_drain(int socket, const boost::asio::mutable_buffer& buffer,
                                      int flags, bool is_stream, boost::system::error_code& ec,
                                      std::size_t& bytes) {
  for (;;) {
    iovec part{buffer.data(), buffer.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
    msghdr message{};
    message.msg_iov = &part;
    message.msg_iovlen = 1;
    message.msg_control = control;
    message.msg_controllen = sizeof control;
    const ssize_t got = ::recvmsg(socket, &message, flags);
    if (got > 0) {
      ec = {};
      bytes = static_cast<std::size_t>(got);
      return left_to_read(message) == 0 ? ReceiveStatus::done_and_exhausted : ReceiveStatus::done;
    }
    if (got == 0 && is_stream) {
      ec = boost::asio::error::eof;
      bytes = 0;
      return ReceiveStatus::done_and_exhausted;
    }
    if (got == 0) {  // an empty datagram
      ec = {};
      bytes = 0;
      return ReceiveStatus::done;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      ec = boost::asio::error::would_block;
      return ReceiveStatus::not_done;
    }
    ec = boost::system::error_code(errno, boost::asio::error::get_system_category());
    bytes = 0;
    return ReceiveStatus::done;
  }
}

}  // namespace sluice::http
