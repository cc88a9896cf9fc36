#include "store/redis/connection.h"

#include <boost/asio/post.hpp>
#include <charconv>
#include <cstring>

#include "store/redis/script_reply.h"

namespace sluice::redis {

void append_array_header(std::string& out, size_t count) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, count);
  (void)ec;
  out.push_back('*');
  out.append(buf, end);
  out.append("\r\n", 2);
}

void append_bulk(std::string& out, std::string_view arg) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, arg.size());
  (void)ec;
  out.push_back('$');
  out.append(buf, end);
  out.append("\r\n", 2);
  out.append(arg);
  out.append("\r\n", 2);
}

void append_bulk(std::string& out, int64_t value) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  (void)ec;
  append_bulk(out, std::string_view(buf, static_cast<size_t>(end - buf)));
}

std::string command(std::initializer_list<std::string_view> args) {
  std::string out;
  append_array_header(out, args.size());
  for (std::string_view a : args) append_bulk(out, a);
  return out;
}

std::string command(std::span<const std::string> args) {
  std::string out;
  append_array_header(out, args.size());
  for (const std::string& a : args) append_bulk(out, a);
  return out;
}

Connection::Connection(boost::asio::io_context& io, Endpoint endpoint, Shared& shared,
                       Listener& listener)
    : io_(io),
      endpoint_(std::move(endpoint)),
      name_(endpoint_.name()),
      shared_(shared),
      listener_(listener),
      clock_(shared.clock_of(name_)),
      resolver_(io),
      timer_(io),
      backoff_(shared.options.reconnect_min) {}

Connection::~Connection() {
  destroying_ = true;
  alive_.reset();
  resolver_.cancel();
  timer_.cancel();
  // Every command still waiting hears of the loss (reply nullptr).
  std::deque<Pending> waiting = close_transport();
  set_state(State::kIdle);
  fail_waiting(waiting);
}

void Connection::set_state(State state) {
  ConnectionGauge& gauge = endpoint_.sentinel ? shared_.sentinel_connections : shared_.connections;
  const auto counter = [&](State s) -> std::atomic<int64_t>* {
    if (s == State::kIdle) return nullptr;
    return s == State::kUp ? &gauge.up : &gauge.down;
  };
  std::atomic<int64_t>* before = counter(state_);
  std::atomic<int64_t>* after = counter(state);
  state_ = state;
  if (before == after) return;
  if (before != nullptr) before->fetch_sub(1, std::memory_order_relaxed);
  if (after != nullptr) after->fetch_add(1, std::memory_order_relaxed);
}

void Connection::ensure_connecting() {
  if (state_ == State::kIdle) connect();
}

void Connection::shut() {
  if (state_ == State::kIdle) return;
  const bool was_up = state_ == State::kUp;
  resolver_.cancel();
  timer_.cancel();
  std::deque<Pending> waiting = close_transport();
  set_state(State::kIdle);
  backoff_ = shared_.options.reconnect_min;
  fail_waiting(waiting);
  if (was_up) listener_.on_state(*this, false);
}

void Connection::connect() {
  addresses_.clear();
  next_address_ = 0;
  boost::system::error_code not_ip;
  boost::asio::ip::make_address(endpoint_.host, not_ip);
  if (!not_ip) {
    connect_to(endpoint_.host);
    return;
  }
  set_state(State::kResolving);
  const auto alive = std::weak_ptr<bool>(alive_);
  timer_.expires_after(shared_.options.connect_timeout);
  timer_.async_wait([this, alive](const boost::system::error_code& ec) {
    if (ec || alive.expired() || state_ != State::kResolving) return;
    resolver_.cancel();  // its handler sees operation_aborted and ignores it
    lost("resolving " + name_ + " timed out", true);
  });
  resolver_.async_resolve(
      endpoint_.host, std::to_string(endpoint_.port),
      [this, alive](const boost::system::error_code& ec,
                    const boost::asio::ip::tcp::resolver::results_type& results) {
        if (alive.expired() || state_ != State::kResolving) return;
        if (ec || results.empty()) {
          lost("cannot resolve " + name_ + ": " + (ec ? ec.message() : "no address"), true);
          return;
        }
        timer_.cancel();
        for (const auto& entry : results)
          addresses_.push_back(entry.endpoint().address().to_string());
        next_address_ = 1;
        connect_to(addresses_.front());
      });
}

void Connection::connect_to(const std::string& ip) {
  set_state(State::kConnecting);
  boost::system::error_code bad_ip;
  const boost::asio::ip::address address = boost::asio::ip::make_address(ip, bad_ip);
  if (bad_ip) {
    lost("cannot connect to " + name_ + ": bad address " + ip, true);
    return;
  }
  auto transport = std::make_shared<Transport>(io_, shared_.tls.get());
  transport_ = transport;
  reader_ = redisReaderCreate();
  // A reply header may not make hiredis allocate gigabytes (script_reply.h).
  bound_reply_arrays(reader_);

  // The handshake goes first in the pipeline; calls may queue behind it and
  // leave with it once the transport is up.
  handshake_pending_ = 0;
  if (!endpoint_.password.empty()) {
    const std::string auth = endpoint_.username.empty()
                                 ? command({"AUTH", endpoint_.password})
                                 : command({"AUTH", endpoint_.username, endpoint_.password});
    append(auth, nullptr, Pending::Kind::kHandshake);
    ++handshake_pending_;
  }
  if (endpoint_.database > 0 && !endpoint_.sentinel) {
    append(command({"SELECT", std::to_string(endpoint_.database)}), nullptr,
           Pending::Kind::kHandshake);
    ++handshake_pending_;
  }
  // The last handshake command is answered by the node itself, so that up
  // means it answered (TCP and TLS alone may end at a proxy or a dying
  // process); a node's TIME also bounds its clock offset before the first
  // call, so that every call sent on an up connection carries its deadline.
  if (endpoint_.sentinel) {
    append(command({"PING"}), nullptr, Pending::Kind::kHandshake);
  } else {
    append(command({"TIME"}), nullptr, Pending::Kind::kClock);
  }
  ++handshake_pending_;

  const auto alive = std::weak_ptr<bool>(alive_);
  // Covers TCP connect, TLS handshake and AUTH/SELECT alike.
  timer_.expires_after(shared_.options.connect_timeout);
  timer_.async_wait([this, alive, transport](const boost::system::error_code& ec) {
    if (ec || alive.expired() || transport_ != transport || state_ != State::kConnecting) return;
    lost("connecting to " + name_ + " timed out", true);
  });
  transport->socket().async_connect(
      boost::asio::ip::tcp::endpoint(address, static_cast<uint16_t>(endpoint_.port)),
      [this, alive, transport](const boost::system::error_code& ec) {
        if (alive.expired() || transport_ != transport) return;
        if (ec) {
          // An error counts once every address of the name has failed.
          lost("cannot connect to " + name_ + ": " + ec.message(),
               next_address_ >= addresses_.size());
          return;
        }
        connected(transport);
      });
}

void Connection::connected(const std::shared_ptr<Transport>& transport) {
  boost::system::error_code ignored;
  // Commands are small and pipelined: no waiting for more to fill a segment.
  transport->socket().set_option(boost::asio::ip::tcp::no_delay(true), ignored);
  TlsStream* tls = transport->tls();
  if (tls == nullptr) {
    transport_up();
    return;
  }
  const std::string& server_name =
      shared_.options.tls.server_name.empty() ? endpoint_.host : shared_.options.tls.server_name;
  if (!expect_server_name(*tls, server_name)) {
    lost("TLS to " + name_ + ": cannot check the server's certificate for " + server_name, true);
    return;
  }
  tls->async_handshake(
      boost::asio::ssl::stream_base::client,
      [this, alive = std::weak_ptr<bool>(alive_), transport](const boost::system::error_code& ec) {
        if (alive.expired() || transport_ != transport) return;
        if (ec) {
          lost("TLS handshake with " + name_ + " failed: " + tls_failure(*transport->tls(), ec),
               true);
          return;
        }
        transport_up();
      });
}

void Connection::transport_up() {
  transport_up_ = true;
  handshake_sent_ = std::chrono::steady_clock::now();
  read();
  flush();
}

void Connection::became_up() {
  set_state(State::kUp);
  timer_.cancel();
  backoff_ = shared_.options.reconnect_min;
  Counters::add(shared_.counters.reconnects);
  listener_.on_state(*this, true);
}

void Connection::append(std::string_view cmd, void* privdata, Pending::Kind kind) {
  out_.append(cmd);
  waiting_.push_back({privdata, kind});
  schedule_flush();
}

void Connection::schedule_flush() {
  if (!transport_up_ || writing_ || flush_scheduled_) return;
  flush_scheduled_ = true;
  // After every handler of this turn: what they send leaves together.
  boost::asio::post(io_, [this, alive = std::weak_ptr<bool>(alive_), transport = transport_] {
    if (alive.expired() || transport_ != transport) return;
    flush_scheduled_ = false;
    flush();
  });
}

void Connection::flush() {
  if (writing_ || out_.empty()) return;
  writing_ = true;
  // Swapped, not copied: both strings keep their capacity for the next turns.
  transport_->writing.swap(out_);
  out_.clear();
  transport_->write([this, alive = std::weak_ptr<bool>(alive_), transport = transport_](
                        const boost::system::error_code& ec, size_t /*bytes*/) {
    if (alive.expired() || transport_ != transport) return;
    writing_ = false;
    if (ec) {
      lost("writing to " + name_ + " failed: " + ec.message(), true);
      return;
    }
    flush();
  });
}

void Connection::read() {
  transport_->read_some([this, alive = std::weak_ptr<bool>(alive_), transport = transport_](
                            const boost::system::error_code& ec, size_t bytes) {
    if (alive.expired() || transport_ != transport) return;
    if (ec) {
      std::string why = "connection to " + name_ + " closed";
      if (ec != boost::asio::error::eof) {
        why += ": ";
        why += transport->tls() != nullptr ? tls_failure(*transport->tls(), ec) : ec.message();
      }
      lost(std::move(why), true);
      return;
    }
    on_read(bytes);
  });
}

void Connection::on_read(size_t bytes) {
  const std::shared_ptr<Transport> transport = transport_;
  const std::weak_ptr<bool> alive = alive_;
  if (redisReaderFeed(reader_, transport->read_buffer.data(), bytes) != REDIS_OK) {
    lost("protocol error from " + name_ + ": " + reader_->errstr, true);
    return;
  }
  for (;;) {
    void* reply = nullptr;
    if (redisReaderGetReply(reader_, &reply) != REDIS_OK) {
      lost("protocol error from " + name_ + ": " + reader_->errstr, true);
      return;
    }
    if (reply == nullptr) break;
    dispatch(static_cast<redisReply*>(reply));
    freeReplyObject(reply);
    // A listener may have ended this connection (or this transport).
    if (alive.expired() || transport_ != transport) return;
    if (closing_ && waiting_.empty()) {
      lost("connection to " + name_ + " closed", true);
      return;
    }
  }
  read();
}

void Connection::dispatch(redisReply* reply) {
  if (waiting_.empty()) {
    // Nothing was asked: a subscribed connection's message, or else the
    // stream is out of step.
    if (!listener_.on_push(*this, reply)) closing_ = true;
    return;
  }
  const Pending p = waiting_.front();
  waiting_.pop_front();
  switch (p.kind) {
    case Pending::Kind::kDropped:
      return;
    case Pending::Kind::kHandshake:
    case Pending::Kind::kClock:
      on_handshake_reply(reply, p.kind);
      return;
    case Pending::Kind::kReply:
      --in_flight_;
      progress_at_ = std::chrono::steady_clock::now();
      listener_.on_reply(*this, reply, p.privdata);
      return;
  }
}

void Connection::on_handshake_reply(const redisReply* reply, Pending::Kind kind) {
  int64_t redis_us = 0;
  if (kind == Pending::Kind::kClock && reply->type != REDIS_REPLY_ERROR) {
    if (!read_time_reply(reply, &redis_us)) {
      lost("unexpected reply to TIME from " + name_, true);
      return;
    }
    clock_.observe(redis_us, ClockOffset::floor_us(handshake_sent_),
                   ClockOffset::ceil_us(std::chrono::steady_clock::now()));
  }
  if (reply->type == REDIS_REPLY_ERROR) {
    if (closing_) return;  // after a failed AUTH the rest fail too: one error is enough
    std::string why = "handshake with " + name_ + " failed: " + std::string(reply->str, reply->len);
    Counters::add(shared_.counters.connection_errors);
    shared_.log.log(ErrorKind::kConnection, why);
    // Closes once the replies already queued have come (they fail with NOAUTH).
    closing_ = true;
    return;
  }
  if (--handshake_pending_ == 0 && state_ == State::kConnecting) became_up();
}

bool Connection::send(std::string_view cmd, void* privdata) {
  if (!usable() || transport_ == nullptr || closing_) return false;
  append(cmd, privdata, Pending::Kind::kReply);
  if (in_flight_++ == 0) progress_at_ = std::chrono::steady_clock::now();
  return true;
}

bool Connection::send_no_reply(std::string_view cmd) {
  if (!usable() || transport_ == nullptr || closing_) return false;
  append(cmd, nullptr, Pending::Kind::kDropped);
  return true;
}

void Connection::check_stall(std::chrono::steady_clock::time_point now) {
  if (in_flight_ == 0 || transport_ == nullptr) return;
  if (now - progress_at_ > shared_.options.stall_timeout)
    lost("no reply from " + name_ + " for " +
             std::to_string(shared_.options.stall_timeout.count()) + " ms; reconnecting",
         true);
}

std::deque<Connection::Pending> Connection::close_transport() {
  if (transport_ != nullptr) transport_->close();
  transport_.reset();
  if (reader_ != nullptr) redisReaderFree(reader_);
  reader_ = nullptr;
  transport_up_ = false;
  writing_ = false;
  flush_scheduled_ = false;
  closing_ = false;
  out_.clear();
  std::deque<Pending> waiting;
  waiting.swap(waiting_);
  return waiting;
}

void Connection::fail_waiting(std::deque<Pending>& waiting) {
  for (const Pending& p : waiting) {
    if (p.kind != Pending::Kind::kReply) continue;
    --in_flight_;
    listener_.on_reply(*this, nullptr, p.privdata);
  }
}

void Connection::lost(std::string why, bool count_error) {
  const bool was_up = state_ == State::kUp;
  const bool was_connecting = state_ == State::kConnecting;
  std::deque<Pending> waiting = close_transport();
  if (destroying_) {
    fail_waiting(waiting);
    return;
  }
  if (count_error) {
    Counters::add(shared_.counters.connection_errors);
    shared_.log.log(ErrorKind::kConnection, why);
  }
  // Not usable from here on: a listener that sends again while hearing of
  // the loss is refused at once.
  set_state(State::kBackoff);
  schedule_reconnect(was_connecting);
  fail_waiting(waiting);
  if (was_up) listener_.on_state(*this, false);
}

void Connection::schedule_reconnect(bool was_connecting) {
  timer_.cancel();
  // Not connect_to() right here: this may run inside a listener's callback.
  const bool next_address = was_connecting && next_address_ < addresses_.size();
  if (next_address) {
    timer_.expires_after(std::chrono::milliseconds(0));
  } else {
    timer_.expires_after(backoff_);
    backoff_ = std::min(backoff_ * 2, shared_.options.reconnect_max);
  }
  timer_.async_wait([this, next_address,
                     alive = std::weak_ptr<bool>(alive_)](const boost::system::error_code& ec) {
    if (ec || alive.expired() || state_ != State::kBackoff) return;
    if (next_address) {
      connect_to(addresses_[next_address_++]);
    } else {
      connect();
    }
  });
}

}  // namespace sluice::redis
