// Session: one HTTP/1.1 connection, in the shape of Beast's async examples.
//
//   wait for bytes (idle_timeout) -> read header (header_timeout, max_header_bytes)
//     -> handler.on_header() -> [read body (max_body_bytes)] -> respond -> write
//     -> next request (keep-alive) or close
//
// A Session runs on the one thread of its io_context (one per worker), so its
// members need no lock. The handler decides what to do with a request once its
// header is read: answer at once, read a bounded body first, or take the
// connection over (the gateway proxy streams the body itself and gives the
// connection back with resume()). A handler may finish later, from another
// thread: respond() and resume() post themselves onto the session's thread.
//
// Responses are written as text into one buffer the connection reuses, in one
// write (head_writer.h): a Reply (the hot paths) without building a Beast
// message, a Response (admin, rare errors) as Beast would serialize it.
// Bytes already read are parsed before asking the socket for more, so a
// request that arrived whole is handled without another read.
//
// Timeouts: one timer per connection, armed lazily. Each wait (idle, reading,
// writing, lingering) sets a deadline; the timer is re-armed only when the
// new deadline is earlier than the one it is armed for, and on expiry it
// re-arms itself for the current deadline if that has not passed. So a busy
// keep-alive connection re-arms its timer about once per timeout period, not
// once per request.
//
// Protocol errors are answered, then the connection closes: malformed HTTP 400,
// header too large 431, body too large 413, header or body too slow 408 (an
// idle keep-alive connection is simply closed). Closing is "lingering": the
// write side is shut down and unread input is drained for a moment, so the
// client reads the error instead of a reset.
//
// TLS (a connection on `listen` when `tls:` is set): the handshake comes
// first, within the first header's header_timeout; a connection that closes
// sends close_notify, then lingers as a plain one does. The TLS session is
// made when the client's first bytes arrive; at most
// server.max_tls_handshakes are in their handshake at once, a new one
// closing the oldest of its worker's unfinished ones (each holds ~70 KB of
// buffers until it finishes or fails).
//
// Holding (below) is bounded by the caller: server.max_held requests at
// once (HeldPlace), each at most the route's `delay`, which the config
// keeps within server.idle_timeout.
//
// Draining (graceful shutdown): an idle connection closes at once; a request
// whose header has been read is finished and answered with Connection: close.
// A held request (hold()) is such a request: it keeps its turn, within
// server.shutdown_grace.
//
// Holding (a route's `delay`): the request waits for its turn on the
// connection's timer, with no thread and no buffer beyond the session's own.
// Meanwhile the socket is watched for the client leaving.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "http/client_stream.h"
#include "http/context.h"
#include "http/responses.h"
#include "observe/metrics.h"
#include "policy/ip.h"

namespace sluice::http {

class Session;
using HeaderParser = boost::beast::http::request_parser<boost::beast::http::empty_body>;
using BodyParser = boost::beast::http::request_parser<boost::beast::http::string_body>;
using RequestHeader = boost::beast::http::request_header<>;

// The code that answers the requests of a connection. Called on the session's thread.
class RequestHandler {
 public:
  virtual ~RequestHandler() = default;
  // The header of a request has been read; its body (if any) has not. The
  // handler must eventually call exactly one of session->respond(),
  // session->read_body() (whose callback then responds) or take the connection
  // over and call session->resume().
  virtual void on_header(const std::shared_ptr<Session>& session) = 0;
};

// Limits and timeouts for reading requests.
struct SessionLimits {
  size_t max_header_bytes = 16 * 1024;
  size_t max_body_bytes = 1024 * 1024;
  std::chrono::milliseconds header_timeout{10000};  // also bounds reading a body and writing
  std::chrono::milliseconds idle_timeout{60000};
  size_t max_tls_handshakes = 512;  // in progress at once, on every worker
};

// The sessions of one io_context, for draining, and those of them in a TLS
// handshake, oldest first (server.max_tls_handshakes). Touched only on its thread.
struct SessionRegistry {
  std::unordered_set<Session*> sessions;
  std::list<Session*> handshakes;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  // `admin`: the admin port (fixed limits, no access log); otherwise limits
  // come from the current State's `server` section. `tls`: the connection
  // speaks TLS with this context (the handshake is the session's first step).
  Session(boost::asio::ip::tcp::socket socket, ConnectionTicket ticket, ServerContext& context,
          RequestHandler& handler, SessionRegistry& registry, bool admin,
          std::shared_ptr<boost::asio::ssl::context> tls = nullptr);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  void start();
  // A connection that carries one HTTP/2 stream's request (http/h2_connection.h):
  // its peer and local address are the HTTP/2 connection's, and so is
  // whether the client spoke TLS. Call before start().
  void bridge(const policy::IpAddress& peer, const std::string& local, bool tls);
  // Whether the client's connection is TLS (a bridged stream: its HTTP/2
  // connection's), for X-Forwarded-Proto.
  bool secure() const { return stream_.is_tls() || bridged_tls_; }
  // Called instead of draining this connection while HTTP/2 holds it.
  void on_drain(std::function<void()> hook) { drain_hook_ = std::move(hook); }
  // Graceful shutdown: close when idle, else finish the current request and close.
  void drain();

  // --- For handlers, valid from on_header() until the response is written ---
  const RequestHeader& header() const;
  // True when the request has a body that has not been read.
  bool body_pending() const;
  // True when the request says it has a body (a Content-Length above 0, or
  // chunked), whether or not it was read.
  bool has_body() const;
  const policy::IpAddress& peer() const { return peer_; }
  // The address the connection arrived on, as text ("127.0.0.1", "::1").
  const std::string& local_address() const { return local_text_; }
  // The State this request is decided with (front door only; null on admin).
  const std::shared_ptr<const State>& state() const { return state_; }
  ServerContext& context() { return context_; }
  bool draining() const { return draining_; }
  std::chrono::steady_clock::time_point started() const { return started_; }

  // Reads the whole body (at most max_body_bytes, else 413 and close; "100
  // Continue" is sent first if the client asked for it), then calls `then`.
  void read_body(std::function<void(std::string body)> then);
  // Sends `response`. A request body that was not read is read and dropped
  // first when it is small (Content-Length <= max_body_bytes); otherwise the
  // connection closes after the response. Callable from any thread.
  void respond(Response response);
  // The same for a Reply, copied before this returns (its views may then go).
  // On the session's thread it is formatted straight into the connection's
  // buffer; from another thread it goes through respond(Response).
  void respond(const Reply& reply);

  // --- Queueing (a route's `delay`) ---
  // Holds the request until `until`, then calls then(true) on the session's
  // thread and the handler carries on as from on_header(). A client that
  // closes the connection meanwhile (end of stream or reset, seen by
  // watching the idle socket) ends the hold at once: the connection closes
  // and then(false) runs, to give the charge back. A client that has sent
  // more bytes (a body, a pipelined request, TLS records) cannot be told
  // from one still there: it is held to its turn. Call on the session's
  // thread, from on_header() or a decision's callback.
  void hold(std::chrono::steady_clock::time_point until, std::function<void(bool present)> then);

  // --- For a handler that takes the connection over (the gateway proxy) ---
  ClientStream& stream() { return stream_; }
  boost::beast::flat_buffer& buffer() { return buffer_; }
  HeaderParser& header_parser() { return *header_parser_; }
  // The exchange is over; `keep_alive` reads the next request, else the
  // connection closes. Callable from any thread.
  void resume(bool keep_alive);
  // Records an access log line for a response the handler wrote itself.
  void log_access(unsigned status, size_t body_bytes);
  // Times this request into `duration` (null: not timed), from its header
  // read until its response's last byte is written or the handler gives the
  // connection back (resume()). Call on the session's thread.
  void time_request(observe::Histogram* duration) { duration_ = duration; }

  // What the access log line says beyond the request and the response. The
  // front door fills it, only when the access log is on (access_log_on()).
  struct AccessNote {
    // The client as the policy resolved it (client_ip); none: the peer.
    std::optional<policy::IpAddress> client;
    std::string route;                // the route (or policy) name
    std::string key;                  // the client key, redacted per logging.redact_keys
    std::string_view decision = "-";  // allowed, denied, error, none (no limit), - (not decided)
    std::string limit;                // on a denial: the name of the limit that denied
    std::optional<std::chrono::microseconds> upstream;  // proxied: until the response header
  };
  AccessNote& access_note() { return access_note_; }
  bool access_log_on() const;

 private:
  enum class Phase { kIdle, kReadingHeader, kInRequest, kWriting, kClosing, kClosed };
  // What the connection's deadline applies to.
  enum class Wait { kNone, kIdle, kRead, kWrite, kLinger };
  // What do_write() sends.
  enum class Pending { kNone, kText, kBeast };
  // Where hold() is: not holding; waiting for the request's turn; or
  // waiting, and the client closed meanwhile (the turn ends the hold at once).
  enum class Hold { kNone, kWaiting, kClientLeft };
  using SteadyClock = std::chrono::steady_clock;

  void do_handshake();
  void start_handshake();
  void on_handshake(boost::beast::error_code ec);
  // Out of the registry's handshakes (and their count), if in them.
  void leave_handshakes();
  // Closes a handshake that has not finished, to make room for a newer one.
  void drop_handshake();
  void do_wait();
  void on_first_bytes(boost::beast::error_code ec, size_t n);
  void do_read_header();
  void continue_header();
  void on_header_bytes(boost::beast::error_code ec, size_t n);
  void on_header(boost::beast::error_code ec);
  void do_read_body(std::function<void(std::string body)> then);
  void on_body(boost::beast::error_code ec, std::function<void(std::string body)> then);
  bool should_discard_body() const;
  bool on_own_thread();
  void write_when_body_handled();
  void do_write();
  void on_write(boost::beast::error_code ec);
  void finish_request(bool keep_alive);
  void set_deadline(Wait wait, SteadyClock::time_point deadline);
  void arm_timer(SteadyClock::time_point expiry);
  void on_timer(boost::beast::error_code ec, uint64_t seq);
  // Answers a protocol error and closes.
  void reject(HttpStatus status, std::string_view code, std::string_view message);
  void linger_close();
  void linger_tcp();
  void do_linger();
  void close_now();
  void set_limits();
  void watch_while_held();
  void on_watched(boost::beast::error_code ec);

  ClientStream stream_;
  boost::beast::flat_buffer buffer_;
  boost::asio::steady_timer timer_;
  ServerContext& context_;
  RequestHandler& handler_;
  SessionRegistry& registry_;
  const bool admin_;

  ConnectionTicket ticket_;
  Phase phase_ = Phase::kIdle;
  policy::IpAddress peer_;
  std::string peer_text_;
  AccessNote access_note_;
  std::string local_text_;
  // The first header of a connection must be complete within header_timeout
  // of the accept; later ones within header_timeout of their first byte.
  SteadyClock::time_point accepted_;
  SteadyClock::time_point header_deadline_;
  uint64_t requests_ = 0;    // requests whose header was read on this connection
  size_t header_bytes_ = 0;  // of the header being read, parsed so far
  SessionLimits limits_;
  std::shared_ptr<const State> state_;
  std::optional<HeaderParser> header_parser_;
  std::optional<BodyParser> body_parser_;

  // The response being sent: a Reply's status line and fields already in
  // out_ and its body in reply_body_ (kText), or a Beast message (kBeast).
  // out_ and reply_body_ keep their capacity from one request to the next.
  Pending pending_ = Pending::kNone;
  std::optional<Response> response_;
  std::string out_;
  std::string reply_body_;
  unsigned reply_status_ = 0;
  unsigned written_status_ = 0;
  size_t written_body_bytes_ = 0;
  bool written_keep_alive_ = false;

  // The deadline and the one timer (see the top of this file).
  Wait wait_ = Wait::kNone;
  SteadyClock::time_point deadline_;
  SteadyClock::time_point timer_expiry_;
  bool timer_armed_ = false;
  uint64_t timer_seq_ = 0;

  std::list<Session*>::iterator handshake_entry_;  // in registry_.handshakes
  bool in_handshake_ = false;
  bool dropped_ = false;  // drop_handshake() closed it
  Hold hold_ = Hold::kNone;
  bool timed_out_ = false;
  bool draining_ = false;
  bool body_read_ = false;
  bool close_after_ = false;
  SteadyClock::time_point started_;
  SteadyClock::time_point header_read_;     // of the request in progress
  observe::Histogram* duration_ = nullptr;  // time_request()
  std::unique_ptr<char[]> linger_buffer_;
  size_t lingered_bytes_ = 0;
  bool bridged_tls_ = false;
  std::function<void()> drain_hook_;
};

}  // namespace sluice::http
