// One connection to one Redis node, on one io_context: connects in the
// background (AUTH and SELECT pipelined ahead of the first command),
// reconnects with exponential backoff, bounds the commands in flight, and
// drops a connection that stopped answering (stall_timeout).
//
// Commands are complete RESP frames; send() appends them to hiredis's output
// buffer and the adapter writes everything appended in one loop turn at once.
// Every reply, or the loss of the connection (reply == nullptr), goes to the
// Listener with the command's privdata, exactly once per sent command.
//
// Thread-safety: none; use from the thread that runs the io_context.
#pragma once

#include <hiredis/async.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "store/redis/address.h"
#include "store/redis/hiredis_asio.h"
#include "store/redis/shared.h"

namespace sluice::redis {

class Connection {
 public:
  class Listener {
   public:
    virtual ~Listener() = default;
    // reply is nullptr when the connection was lost before the reply came.
    virtual void on_reply(Connection& connection, redisReply* reply, void* privdata) = 0;
    virtual void on_state(Connection& /*connection*/, bool /*up*/) {}
  };

  Connection(boost::asio::io_context& io, Endpoint endpoint, Shared& shared, Listener& listener);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Starts connecting if idle. Cheap when already connecting or up.
  void ensure_connecting();

  // Whether send() can take a command now: connecting or up (not in backoff).
  bool usable() const { return state_ == State::kConnecting || state_ == State::kUp; }
  bool up() const { return state_ == State::kUp; }
  size_t in_flight() const { return in_flight_; }

  // Appends a command whose reply goes to the listener. False if the
  // connection is not usable (nothing is sent then).
  bool send(std::string_view command, void* privdata);
  // Appends a command whose reply is dropped (ASKING).
  bool send_no_reply(std::string_view command);

  // Drops the connection if its oldest command waited longer than
  // stall_timeout without any reply; it then reconnects after a backoff.
  void check_stall(std::chrono::steady_clock::time_point now);

  const std::string& name() const { return name_; }
  // The node's clock offset (shared by every connection to the node).
  ClockOffset& clock() { return clock_; }

 private:
  // kResolving: a host name is being looked up (asynchronously: getaddrinfo
  // inside hiredis would block the whole event loop); not usable yet.
  enum class State { kIdle, kResolving, kConnecting, kUp, kBackoff };

  static void on_connect_cb(const redisAsyncContext* ac, int status);
  static void on_disconnect_cb(const redisAsyncContext* ac, int status);
  static void on_reply_cb(redisAsyncContext* ac, void* reply, void* privdata);
  static void on_handshake_cb(redisAsyncContext* ac, void* reply, void* privdata);

  // Resolves the host if it is a name, then connect_to() its first address;
  // a failed connect tries the next one before backing off.
  void connect();
  void connect_to(const std::string& ip);
  // The context is gone (or going): forget it and reconnect after a backoff.
  void lost(std::string why, bool count_error);
  // Frees the context from outside hiredis callbacks.
  void drop(std::string why);
  // After a backoff: connect() again. With addresses of this lookup still
  // untried (and the failure was in connecting): the next one, at once.
  void schedule_reconnect(bool was_connecting);

  boost::asio::io_context& io_;
  Endpoint endpoint_;
  std::string name_;
  Shared& shared_;
  Listener& listener_;
  ClockOffset& clock_;
  State state_ = State::kIdle;
  redisAsyncContext* ac_ = nullptr;
  std::shared_ptr<HiredisAsio> adapter_;
  boost::asio::ip::tcp::resolver resolver_;
  std::vector<std::string> addresses_;  // of the last lookup, in resolver order
  size_t next_address_ = 0;
  boost::asio::steady_timer timer_;  // connect timeout, then backoff
  std::chrono::milliseconds backoff_;
  size_t in_flight_ = 0;
  size_t handshake_pending_ = 0;
  std::chrono::steady_clock::time_point progress_at_;  // last reply, or first send when idle
  bool destroying_ = false;
  // Timer handlers may already be queued when the connection goes away
  // (cancel() cannot recall them): they hold this token and check it first.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

// RESP encoding of commands.
void append_array_header(std::string& out, size_t count);
void append_bulk(std::string& out, std::string_view arg);
void append_bulk(std::string& out, int64_t value);
std::string command(std::initializer_list<std::string_view> args);

}  // namespace sluice::redis
