#include "store/redis/connection.h"

#include "store/redis/script_reply.h"

#include <charconv>
#include <cstring>

namespace sluice::redis {
namespace {

Connection* owner(const redisAsyncContext* ac) {
  return static_cast<Connection*>(ac->data);
}

}  // namespace

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
  if (ac_ != nullptr) {
    redisAsyncContext* ac = ac_;
    ac_ = nullptr;
    // Runs every pending callback with a NULL reply, then the cleanup hook.
    redisAsyncFree(ac);
  }
}

void Connection::ensure_connecting() {
  if (state_ == State::kIdle) connect();
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
  state_ = State::kResolving;
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
  state_ = State::kConnecting;
  redisAsyncContext* ac = redisAsyncConnect(ip.c_str(), endpoint_.port);
  if (ac == nullptr) {
    lost("cannot allocate a connection to " + name_, true);
    return;
  }
  if (ac->err != 0) {
    std::string why = "cannot connect to " + name_ + ": " + ac->errstr;
    redisAsyncFree(ac);
    lost(std::move(why), true);
    return;
  }
  ac_ = ac;
  ac->data = this;
  // A reply header may not make hiredis allocate gigabytes (script_reply.h).
  bound_reply_arrays(ac->c.reader);
  adapter_ = HiredisAsio::attach(io_, ac);
  redisAsyncSetDisconnectCallback(ac, &Connection::on_disconnect_cb);
  // Must follow attach(): it asks the adapter for the first write event.
  redisAsyncSetConnectCallback(ac, &Connection::on_connect_cb);

  // The handshake goes first in the pipeline; calls may queue behind it.
  handshake_pending_ = 0;
  if (!endpoint_.password.empty()) {
    const std::string auth = endpoint_.username.empty()
                                 ? command({"AUTH", endpoint_.password})
                                 : command({"AUTH", endpoint_.username, endpoint_.password});
    redisAsyncFormattedCommand(ac, &Connection::on_handshake_cb, nullptr, auth.data(), auth.size());
    ++handshake_pending_;
  }
  if (endpoint_.database > 0) {
    const std::string select = command({"SELECT", std::to_string(endpoint_.database)});
    redisAsyncFormattedCommand(ac, &Connection::on_handshake_cb, nullptr, select.data(),
                               select.size());
    ++handshake_pending_;
  }

  timer_.expires_after(shared_.options.connect_timeout);
  timer_.async_wait(
      [this, ac, alive = std::weak_ptr<bool>(alive_)](const boost::system::error_code& ec) {
        if (ec || alive.expired() || ac_ != ac || state_ != State::kConnecting) return;
        drop("connecting to " + name_ + " timed out");
      });
}

void Connection::on_connect_cb(const redisAsyncContext* ac, int status) {
  Connection* self = owner(ac);
  if (self == nullptr || self->ac_ != ac) return;
  if (status != REDIS_OK) {
    // hiredis frees the context right after this callback. An error counts
    // once every address of the name has failed.
    self->lost("cannot connect to " + self->name_ + ": " + (ac->errstr ? ac->errstr : "error"),
               self->next_address_ >= self->addresses_.size());
    return;
  }
  if (self->handshake_pending_ == 0) {
    self->state_ = State::kUp;
    self->timer_.cancel();
    self->backoff_ = self->shared_.options.reconnect_min;
    Counters::add(self->shared_.counters.reconnects);
    self->listener_.on_state(*self, true);
  }
}

void Connection::on_handshake_cb(redisAsyncContext* ac, void* r, void* /*privdata*/) {
  Connection* self = owner(ac);
  if (self == nullptr || self->ac_ != ac) return;
  auto* reply = static_cast<redisReply*>(r);
  if (reply == nullptr) return;  // lost: on_disconnect handles it
  if (reply->type == REDIS_REPLY_ERROR) {
    std::string why =
        "handshake with " + self->name_ + " failed: " + std::string(reply->str, reply->len);
    Counters::add(self->shared_.counters.connection_errors);
    self->shared_.log.log(ErrorKind::kConnection, why);
    // Closes once the replies already queued have come (they fail with NOAUTH).
    redisAsyncDisconnect(ac);
    return;
  }
  if (--self->handshake_pending_ == 0 && self->state_ == State::kConnecting) {
    self->state_ = State::kUp;
    self->timer_.cancel();
    self->backoff_ = self->shared_.options.reconnect_min;
    Counters::add(self->shared_.counters.reconnects);
    self->listener_.on_state(*self, true);
  }
}

void Connection::on_disconnect_cb(const redisAsyncContext* ac, int status) {
  Connection* self = owner(ac);
  if (self == nullptr || self->ac_ != ac) return;
  std::string why = "connection to " + self->name_ + " closed";
  if (status != REDIS_OK && ac->errstr != nullptr) why += std::string(": ") + ac->errstr;
  self->lost(std::move(why), true);
}

void Connection::on_reply_cb(redisAsyncContext* ac, void* reply, void* privdata) {
  Connection* self = owner(ac);
  --self->in_flight_;
  self->progress_at_ = std::chrono::steady_clock::now();
  self->listener_.on_reply(*self, static_cast<redisReply*>(reply), privdata);
}

bool Connection::send(std::string_view cmd, void* privdata) {
  if (!usable() || ac_ == nullptr) return false;
  if (redisAsyncFormattedCommand(ac_, &Connection::on_reply_cb, privdata, cmd.data(), cmd.size()) !=
      REDIS_OK) {
    return false;
  }
  if (in_flight_++ == 0) progress_at_ = std::chrono::steady_clock::now();
  return true;
}

bool Connection::send_no_reply(std::string_view cmd) {
  if (!usable() || ac_ == nullptr) return false;
  return redisAsyncFormattedCommand(ac_, nullptr, nullptr, cmd.data(), cmd.size()) == REDIS_OK;
}

void Connection::check_stall(std::chrono::steady_clock::time_point now) {
  if (in_flight_ == 0 || ac_ == nullptr) return;
  if (now - progress_at_ > shared_.options.stall_timeout)
    drop("no reply from " + name_ + " for " +
         std::to_string(shared_.options.stall_timeout.count()) + " ms; reconnecting");
}

void Connection::drop(std::string why) {
  redisAsyncContext* ac = ac_;
  lost(std::move(why), true);
  // Not inside a hiredis callback here: the free is immediate, and every
  // pending command's callback runs now with a NULL reply.
  if (ac != nullptr) redisAsyncFree(ac);
}

void Connection::lost(std::string why, bool count_error) {
  const bool was_up = state_ == State::kUp;
  const bool was_connecting = state_ == State::kConnecting;
  // adapter_ stays: hiredis may still call its cleanup hook while it frees
  // the context; the next connect() replaces it.
  ac_ = nullptr;
  if (destroying_) return;
  if (count_error) {
    Counters::add(shared_.counters.connection_errors);
    shared_.log.log(ErrorKind::kConnection, why);
  }
  state_ = State::kBackoff;
  schedule_reconnect(was_connecting);
  if (was_up) listener_.on_state(*this, false);
}

void Connection::schedule_reconnect(bool was_connecting) {
  timer_.cancel();
  // Not connect_to() right here: this may run inside a hiredis callback,
  // and the context being freed still needs its adapter.
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
