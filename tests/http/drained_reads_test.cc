// The read op of drained_reads.h on real loopback TCP sockets: what one
// perform() reports (not_done / done / done_and_exhausted) for each state of
// the receive queue, and, through an io_context, that reads queued after a
// drained one are still woken by the bytes and the end of stream that follow.
#include "http/drained_reads.h"

#include <poll.h>
#include <sys/socket.h>

#include <string>

#include <gtest/gtest.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/write.hpp>

#include "http/client_stream.h"

namespace sluice::http {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using Op = asio::detail::reactive_socket_recv_op_base<DrainReportingBuffer>;
using Status = asio::detail::reactor_op::status;

void never_completed(void*, asio::detail::scheduler_operation*, const boost::system::error_code&,
                     std::size_t) {}

// The op alone, performed by hand as the reactor would.
class ReceiveOnce : public Op {
 public:
  ReceiveOnce(tcp::socket& socket, char* data, std::size_t size)
      : Op(boost::system::error_code(), socket.native_handle(),
           asio::detail::socket_ops::stream_oriented,
           DrainReportingBuffer(asio::buffer(data, size)), 0, &never_completed) {}
  const boost::system::error_code& ec() const { return ec_; }
  std::size_t bytes() const { return bytes_transferred_; }
};

class DrainedReadsTest : public ::testing::Test {
 protected:
  // A connected pair: `client_` and `server_`, accepted from a listener that
  // reports its receive queue when `report` is set.
  void connect(bool report) {
    tcp::acceptor listener(io_, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    if (report) listener.set_option(ReportReceiveQueue(true));
    client_.connect(listener.local_endpoint());
    listener.accept(server_);
    server_.non_blocking(true);
  }

  // Blocks until the server side is readable (with `events`).
  void wait_for(short events) {
    pollfd p{server_.native_handle(), events, 0};
    ASSERT_EQ(::poll(&p, 1, 10'000), 1);
    ASSERT_TRUE(p.revents & events);
  }

  // Sends `bytes` in one segment and waits until they are in the server's queue.
  void send(const std::string& bytes) {
    asio::write(client_, asio::buffer(bytes));
    wait_for(POLLIN);
  }

  asio::io_context io_;
  tcp::socket client_{io_};
  tcp::socket server_{io_};
  char buffer_[8] = {};
};

TEST_F(DrainedReadsTest, AcceptedSocketsInheritTheOption) {
  connect(true);
  ReportReceiveQueue option;
  server_.get_option(option);
  EXPECT_TRUE(option.value());
}

TEST_F(DrainedReadsTest, NothingQueuedIsNotDone) {
  connect(true);
  ReceiveOnce op(server_, buffer_, sizeof buffer_);
  EXPECT_EQ(op.perform(), Status::not_done);
  EXPECT_EQ(op.ec(), asio::error::would_block);
}

TEST_F(DrainedReadsTest, PartOfTheQueueIsDoneTheRestExhausts) {
  connect(true);
  send("abcdefgh");
  ReceiveOnce first(server_, buffer_, 3);
  EXPECT_EQ(first.perform(), Status::done);
  EXPECT_EQ(first.bytes(), 3u);
  EXPECT_FALSE(first.ec());
  ReceiveOnce rest(server_, buffer_, sizeof buffer_);
  EXPECT_EQ(rest.perform(), Status::done_and_exhausted);
  EXPECT_EQ(rest.bytes(), 5u);
  EXPECT_FALSE(rest.ec());
  EXPECT_EQ(std::string(buffer_, 5), "defgh");
}

TEST_F(DrainedReadsTest, AFullBufferThatDrainsExhausts) {
  connect(true);
  send("abcdefgh");
  ReceiveOnce op(server_, buffer_, sizeof buffer_);
  EXPECT_EQ(op.perform(), Status::done_and_exhausted);
  EXPECT_EQ(op.bytes(), 8u);
}

// A short read is not a drain when the FIN came with the bytes: the next
// read must be tried, and finds the end of stream.
TEST_F(DrainedReadsTest, BytesBeforeAFinAreDoneThenEndOfStreamExhausts) {
  connect(true);
  asio::write(client_, asio::buffer(std::string("abc")));
  client_.shutdown(tcp::socket::shutdown_send);
  wait_for(POLLRDHUP);
  ReceiveOnce bytes(server_, buffer_, sizeof buffer_);
  EXPECT_EQ(bytes.perform(), Status::done);
  EXPECT_EQ(bytes.bytes(), 3u);
  ReceiveOnce end(server_, buffer_, sizeof buffer_);
  EXPECT_EQ(end.perform(), Status::done_and_exhausted);
  EXPECT_EQ(end.ec(), asio::error::eof);
  EXPECT_EQ(end.bytes(), 0u);
}

// Without the option there is no hint: a short read is done, as in Asio.
TEST_F(DrainedReadsTest, WithoutTheOptionAShortReadIsDone) {
  connect(false);
  send("abc");
  ReceiveOnce op(server_, buffer_, sizeof buffer_);
  EXPECT_EQ(op.perform(), Status::done);
  EXPECT_EQ(op.bytes(), 3u);
}

// Through the reactor: after a read that drained the socket (so the next one
// waits for epoll), the bytes sent later, then the FIN, still complete the
// reads that follow.
TEST_F(DrainedReadsTest, ReadsAfterADrainAreWokenByLaterBytesAndTheEnd) {
  connect(true);
  server_.non_blocking(false);  // Asio's own mode for a socket it reads
  ClientStream stream(std::move(server_));
  std::string got;
  boost::system::error_code last;
  auto read = [&] {
    last = {};
    stream.async_read_some(asio::buffer(buffer_), [&](boost::system::error_code ec, std::size_t n) {
      last = ec;
      got.append(buffer_, n);
    });
    io_.restart();
    io_.run();  // returns once the read has completed
  };
  asio::write(client_, asio::buffer(std::string("one")));
  read();
  EXPECT_EQ(got, "one");
  asio::write(client_, asio::buffer(std::string("two")));
  read();
  EXPECT_EQ(got, "onetwo");
  client_.shutdown(tcp::socket::shutdown_send);
  read();
  EXPECT_EQ(last, asio::error::eof);
  EXPECT_EQ(got, "onetwo");
}

}  // namespace
}  // namespace sluice::http
