#include "store/redis/hiredis_asio.h"

namespace sluice::redis {

std::shared_ptr<HiredisAsio> HiredisAsio::attach(boost::asio::io_context& io,
                                                 redisAsyncContext* ac) {
  auto adapter = std::make_shared<HiredisAsio>(io, ac);
  ac->ev.data = adapter.get();
  ac->ev.addRead = &HiredisAsio::add_read;
  ac->ev.delRead = &HiredisAsio::del_read;
  ac->ev.addWrite = &HiredisAsio::add_write;
  ac->ev.delWrite = &HiredisAsio::del_write;
  ac->ev.cleanup = &HiredisAsio::cleanup;
  return adapter;
}

HiredisAsio::HiredisAsio(boost::asio::io_context& io, redisAsyncContext* ac)
    : socket_(io, ac->c.fd), ac_(ac) {}

HiredisAsio::~HiredisAsio() {
  // Never close hiredis's fd; release() also deregisters it from the reactor.
  if (socket_.is_open()) socket_.release();
}

void HiredisAsio::add_read(void* self) {
  auto* a = static_cast<HiredisAsio*>(self);
  a->want_read_ = true;
  a->arm_read();
}

void HiredisAsio::del_read(void* self) {
  static_cast<HiredisAsio*>(self)->want_read_ = false;
}

void HiredisAsio::add_write(void* self) {
  auto* a = static_cast<HiredisAsio*>(self);
  a->want_write_ = true;
  a->arm_write();
}

void HiredisAsio::del_write(void* self) {
  static_cast<HiredisAsio*>(self)->want_write_ = false;
}

void HiredisAsio::cleanup(void* self) {
  auto* a = static_cast<HiredisAsio*>(self);
  a->closed_ = true;
  a->want_read_ = a->want_write_ = false;
  a->ac_ = nullptr;
  // Cancels the pending waits (they complete with operation_aborted).
  if (a->socket_.is_open()) a->socket_.release();
}

// A wait whose interest was withdrawn meanwhile (del_read) completes and does
// nothing; one wait per direction is outstanding at most.
void HiredisAsio::arm_read() {
  if (closed_ || !want_read_ || read_pending_) return;
  read_pending_ = true;
  socket_.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                     [self = shared_from_this()](const boost::system::error_code& ec) {
                       self->read_pending_ = false;
                       if (ec || self->closed_ || !self->want_read_) return;
                       redisAsyncHandleRead(self->ac_);  // may free the context
                       self->arm_read();
                     });
}

void HiredisAsio::arm_write() {
  if (closed_ || !want_write_ || write_pending_) return;
  write_pending_ = true;
  socket_.async_wait(boost::asio::posix::stream_descriptor::wait_write,
                     [self = shared_from_this()](const boost::system::error_code& ec) {
                       self->write_pending_ = false;
                       if (ec || self->closed_ || !self->want_write_) return;
                       redisAsyncHandleWrite(self->ac_);  // may free the context
                       self->arm_write();
                     });
}

}  // namespace sluice::redis
