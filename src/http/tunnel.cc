#include "http/tunnel.h"

#include <boost/asio/buffer.hpp>
#include <boost/asio/write.hpp>

namespace sluice::http {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using SteadyClock = std::chrono::steady_clock;

Tunnel::Tunnel(ClientStream& client, tcp::socket upstream, std::chrono::milliseconds idle,
               Done done)
    : upstream_(std::move(upstream)),
      idle_timer_(upstream_.get_executor()),
      idle_(idle),
      done_(std::move(done)) {
  up_.from = &client;
  up_.to = &upstream_;
  down_.from = &upstream_;
  down_.to = &client;
}

void Tunnel::start(std::string to_upstream, std::string to_client) {
  last_activity_ = SteadyClock::now();
  arm_idle();
  for (auto [d, bytes] : {std::pair{&up_, &to_upstream}, std::pair{&down_, &to_client}}) {
    d->pending = std::move(*bytes);
    if (d->pending.empty()) {
      read(*d);
    } else {
      write(*d, d->pending.data(), d->pending.size());
    }
  }
}

void Tunnel::read(Direction& d) {
  if (closed_) return settle();
  ++pending_;
  d.from->async_read_some(asio::buffer(d.buffer.get(), kBufferBytes),
                          [self = shared_from_this(), &d](boost::system::error_code ec, size_t n) {
                            --self->pending_;
                            if (ec || self->closed_) {
                              self->close();
                              return self->settle();
                            }
                            self->last_activity_ = SteadyClock::now();
                            self->write(d, d.buffer.get(), n);
                          });
}

void Tunnel::write(Direction& d, const char* data, size_t size) {
  ++pending_;
  asio::async_write(*d.to, asio::buffer(data, size),
                    [self = shared_from_this(), &d](boost::system::error_code ec, size_t n) {
                      --self->pending_;
                      d.bytes += n;
                      d.pending.clear();
                      if (ec || self->closed_) {
                        self->close();
                        return self->settle();
                      }
                      self->last_activity_ = SteadyClock::now();
                      self->read(d);
                    });
}

// One timer for both directions: it wakes at the end of the idle time counted
// from the last activity, and waits again if something moved meanwhile.
void Tunnel::arm_idle() {
  ++pending_;
  idle_timer_.expires_at(last_activity_ + idle_);
  idle_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
    --self->pending_;
    if (ec || self->closed_) return self->settle();
    if (SteadyClock::now() - self->last_activity_ < self->idle_) return self->arm_idle();
    self->close();
    self->settle();
  });
}

void Tunnel::close() {
  if (closed_) return;
  closed_ = true;
  boost::system::error_code ignored;
  upstream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
  upstream_.socket().close(ignored);
  // The client socket is the session's: cancel what waits on it; the session
  // closes it once `done` has run.
  up_.from->socket().cancel(ignored);
  idle_timer_.cancel();
}

void Tunnel::settle() {
  if (pending_ > 0 || !done_) return;
  Done done = std::move(done_);
  done_ = nullptr;
  done(down_.bytes, up_.bytes);
}

}  // namespace sluice::http
