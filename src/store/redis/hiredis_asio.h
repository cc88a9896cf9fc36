// Drives a hiredis async context from an Asio io_context.
//
// hiredis asks its event library, through five hooks, to watch its socket for
// reads and writes; this adapter answers each with an async_wait on a
// posix::stream_descriptor and calls redisAsyncHandleRead/Write when the
// socket is ready. Commands appended in one loop turn only ask for a write
// wait, so they leave together in the next turn, in one write (pipelining).
//
// The fd belongs to hiredis: the adapter releases it on cleanup, never closes
// it. hiredis may free the context inside redisAsyncHandleRead/Write; the
// cleanup hook marks the adapter closed, and pending waits (which hold a
// shared_ptr to the adapter) then do nothing.
//
// Thread-safety: none; use from the thread that runs the io_context.
#pragma once

#include <hiredis/async.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <memory>

namespace sluice::redis {

class HiredisAsio : public std::enable_shared_from_this<HiredisAsio> {
 public:
  // Installs the hooks on `ac` (whose socket must exist: ac->c.fd >= 0).
  static std::shared_ptr<HiredisAsio> attach(boost::asio::io_context& io, redisAsyncContext* ac);

  HiredisAsio(boost::asio::io_context& io, redisAsyncContext* ac);
  ~HiredisAsio();
  HiredisAsio(const HiredisAsio&) = delete;
  HiredisAsio& operator=(const HiredisAsio&) = delete;

 private:
  static void add_read(void* self);
  static void del_read(void* self);
  static void add_write(void* self);
  static void del_write(void* self);
  static void cleanup(void* self);

  void arm_read();
  void arm_write();

  boost::asio::posix::stream_descriptor socket_;
  redisAsyncContext* ac_;
  bool want_read_ = false;
  bool want_write_ = false;
  bool read_pending_ = false;
  bool write_pending_ = false;
  bool closed_ = false;
};

}  // namespace sluice::redis
