// One connection to one Redis node (or Sentinel), on one io_context:
// connects in the background (TLS handshake, then AUTH and SELECT pipelined
// with a last handshake command: TIME to a Redis node, whose reply bounds the
// node's clock offset, PING to a sentinel), reconnects with exponential
// backoff, bounds the commands in flight, and drops a connection that stopped
// answering (stall_timeout). It is up once every handshake command has been
// answered: the node answered.
//
// The socket is Asio's (transport.h), plain TCP or TLS (Shared::tls); the
// replies are parsed by hiredis's RESP reader, which this file feeds.
// Commands are complete RESP frames; send() appends them to an output buffer
// and everything appended in one loop turn leaves in one write at the end of
// the turn (pipelining). Every reply, or the loss of the connection (reply ==
// nullptr), goes to the Listener with the command's privdata, exactly once
// per sent command, in the order the commands were sent. A reply that comes
// when no command waits (a message on a subscribed connection) goes to
// Listener::on_push.
//
// A failed TLS handshake (unknown CA, certificate not for this host) is a
// failed connect: counted, logged with OpenSSL's reason, retried after the
// backoff.
//
// Every connection counts itself in its Shared's gauge (up, or down while
// connecting or waiting to reconnect) until shut() or destroyed.
//
// Thread-safety: none; use from the thread that runs the io_context.
#pragma once

#include <hiredis/hiredis.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "store/redis/address.h"
#include "store/redis/shared.h"
#include "store/redis/transport.h"

namespace sluice::redis {

class Connection {
 public:
  class Listener {
   public:
    virtual ~Listener() = default;
    // reply is nullptr when the connection was lost before the reply came.
    virtual void on_reply(Connection& connection, redisReply* reply, void* privdata) = 0;
    virtual void on_state(Connection& /*connection*/, bool /*up*/) {}
    // A reply no command waited for (a subscribed connection's message).
    // False: the stream is out of step, and the connection is dropped.
    virtual bool on_push(Connection& /*connection*/, const redisReply* /*reply*/) { return false; }
  };

  Connection(boost::asio::io_context& io, Endpoint endpoint, Shared& shared, Listener& listener);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Starts connecting if idle. Cheap when already connecting or up.
  void ensure_connecting();
  // Closes the connection and stops reconnecting until ensure_connecting():
  // commands waiting hear of the loss (reply nullptr).
  void shut();

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
  bool to_sentinel() const { return endpoint_.sentinel; }
  // The node's clock offset (shared by every connection to the node).
  ClockOffset& clock() { return clock_; }

 private:
  // kResolving: a host name is being looked up (asynchronously:
  // getaddrinfo would block the whole event loop); not usable yet.
  enum class State { kIdle, kResolving, kConnecting, kUp, kBackoff };

  // What a sent command's reply is for, in send order.
  struct Pending {
    // kClock: the handshake's TIME, which the node's clock offset observes.
    enum class Kind : uint8_t { kReply, kHandshake, kClock, kDropped };
    void* privdata;
    Kind kind;
  };

  // Resolves the host if it is a name, then connect_to() its first address;
  // a failed connect tries the next one before backing off.
  void connect();
  void connect_to(const std::string& ip);
  // TCP is connected: the TLS handshake, if any, then transport_up().
  void connected(const std::shared_ptr<Transport>& transport);
  // Bytes can flow: reading starts and what was queued is written.
  void transport_up();
  void became_up();
  // Every change of state_ goes through here: it keeps the gauge.
  void set_state(State state);
  void append(std::string_view cmd, void* privdata, Pending::Kind kind);
  // Writes the output buffer at the end of this turn (once per turn).
  void schedule_flush();
  void flush();
  void read();
  void on_read(size_t bytes);
  // One reply, to the oldest command waiting.
  void dispatch(redisReply* reply);
  void on_handshake_reply(const redisReply* reply, Pending::Kind kind);
  // The connection is gone: close the transport, fail every command waiting
  // (reply nullptr), and reconnect after a backoff.
  void lost(std::string why, bool count_error);
  // Closes the transport; returns the commands that were waiting.
  std::deque<Pending> close_transport();
  void fail_waiting(std::deque<Pending>& waiting);
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
  std::shared_ptr<Transport> transport_;  // null when not connected
  redisReader* reader_ = nullptr;         // of transport_
  bool transport_up_ = false;             // connected (and TLS handshake done)
  bool writing_ = false;
  bool flush_scheduled_ = false;
  // A handshake command failed: nothing more is sent, and the connection
  // closes once the commands already sent have their (error) replies.
  bool closing_ = false;
  std::string out_;              // appended, not yet being written
  std::deque<Pending> waiting_;  // sent or appended, reply not yet read
  boost::asio::ip::tcp::resolver resolver_;
  std::vector<std::string> addresses_;  // of the last lookup, in resolver order
  size_t next_address_ = 0;
  boost::asio::steady_timer timer_;  // connect timeout, then backoff
  std::chrono::milliseconds backoff_;
  size_t in_flight_ = 0;
  size_t handshake_pending_ = 0;
  std::chrono::steady_clock::time_point handshake_sent_;  // when the transport came up
  std::chrono::steady_clock::time_point progress_at_;     // last reply, or first send when idle
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
std::string command(std::span<const std::string> args);

}  // namespace sluice::redis
