#include "slow_start_proxy.h"

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <thread>

namespace sluice::testing {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;

// One client connection and its connection to the target.
class Relay : public std::enable_shared_from_this<Relay> {
 public:
  Relay(tcp::socket client, asio::io_context& io)
      : client_(std::move(client)), target_(io), timer_(io) {}

  void start(int target_port, std::chrono::milliseconds delay) {
    auto self = shared_from_this();
    target_.async_connect(
        tcp::endpoint(asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(target_port)),
        [self, delay](const boost::system::error_code& ec) {
          if (ec) return self->close();
          self->timer_.expires_after(delay);
          self->timer_.async_wait([self](const boost::system::error_code& wait_ec) {
            if (wait_ec) return self->close();
            self->pump(self->client_, self->target_, self->up_);
            self->pump(self->target_, self->client_, self->down_);
          });
        });
  }

 private:
  using Buffer = std::array<char, 16 * 1024>;

  void pump(tcp::socket& from, tcp::socket& to, Buffer& buffer) {
    auto self = shared_from_this();
    from.async_read_some(asio::buffer(buffer), [self, &from, &to, &buffer](
                                                   const boost::system::error_code& ec, size_t n) {
      if (ec) return self->close();
      asio::async_write(
          to, asio::buffer(buffer.data(), n),
          [self, &from, &to, &buffer](const boost::system::error_code& write_ec, size_t) {
            if (write_ec) return self->close();
            self->pump(from, to, buffer);
          });
    });
  }

  void close() {
    boost::system::error_code ignored;
    client_.close(ignored);
    target_.close(ignored);
    timer_.cancel();
  }

  tcp::socket client_;
  tcp::socket target_;
  asio::steady_timer timer_;
  Buffer up_{};
  Buffer down_{};
};

}  // namespace

struct SlowStartProxy::State {
  State(int target, std::chrono::milliseconds wait)
      : acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)),
        target_port(target),
        delay(wait) {}

  void accept() {
    acceptor.async_accept([this](const boost::system::error_code& ec, tcp::socket socket) {
      if (ec) return;
      std::make_shared<Relay>(std::move(socket), io)->start(target_port, delay);
      accept();
    });
  }

  asio::io_context io;
  tcp::acceptor acceptor;
  const int target_port;
  const std::chrono::milliseconds delay;
  std::thread thread;
};

SlowStartProxy::SlowStartProxy(int target_port, std::chrono::milliseconds delay)
    : state_(std::make_unique<State>(target_port, delay)) {
  state_->accept();
  state_->thread = std::thread([s = state_.get()] { s->io.run(); });
}

SlowStartProxy::~SlowStartProxy() {
  state_->io.stop();
  state_->thread.join();
}

int SlowStartProxy::port() const {
  return state_->acceptor.local_endpoint().port();
}

}  // namespace sluice::testing
