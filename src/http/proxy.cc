#include "http/proxy.h"

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <spdlog/spdlog.h>
#include <boost/asio/buffer.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/rfc7230.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/write.hpp>

#include "http/proxy_headers.h"
#include "http/proxy_pool.h"
#include "http/responses.h"
#include "observe/denial_log.h"

namespace sluice::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using SteadyClock = std::chrono::steady_clock;

namespace {

// Body bytes relayed per read/write step, in either direction. Large enough
// for one system call to move a useful amount, small enough that a thousand
// exchanges streaming at once cost 64 MiB.
constexpr size_t kRelayBytes = 64 * 1024;
// Relay buffers kept per worker for reuse.
constexpr size_t kSpareRelays = 16;
// The upstream's response header may be larger than what clients may send.
constexpr std::uint32_t kMaxUpstreamHeaderBytes = 64 * 1024;
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

std::string_view sv(beast::string_view s) {
  return {s.data(), s.size()};
}
beast::string_view bsv(std::string_view s) {
  return {s.data(), s.size()};
}

// HTTP/1.1 keeps the connection unless the client says "close"; HTTP/1.0
// closes it unless the client says "keep-alive".
bool client_wants_keep_alive(const RequestHeader& req) {
  const auto it = req.find(bhttp::field::connection);
  if (req.version() >= 11) {
    return it == req.end() || !bhttp::token_list(it->value()).exists("close");
  }
  return it != req.end() && bhttp::token_list(it->value()).exists("keep-alive");
}

// RFC 9110 §9.2.2: requests whose repetition has the same effect as one.
bool is_idempotent(bhttp::verb method) {
  switch (method) {
    case bhttp::verb::get:
    case bhttp::verb::head:
    case bhttp::verb::options:
    case bhttp::verb::trace:
    case bhttp::verb::put:
    case bhttp::verb::delete_:
      return true;
    default:
      return false;
  }
}

bool is_parse_error(const beast::error_code& ec) {
  return ec.category() == bhttp::make_error_code(bhttp::error::bad_target).category() &&
         ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message &&
         ec != bhttp::error::need_buffer;
}

void close_stream(beast::tcp_stream& stream) {
  beast::error_code ec;
  stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  stream.socket().close(ec);
}

}  // namespace

// ---------------------------------------------------------------- shared per worker

struct ProxyShared {
  explicit ProxyShared(asio::io_context& io) : io_context(io), resolver(io) {}

  std::unique_ptr<char[]> take_relay() {
    if (spare_relays.empty()) return std::make_unique<char[]>(kRelayBytes);
    std::unique_ptr<char[]> r = std::move(spare_relays.back());
    spare_relays.pop_back();
    return r;
  }
  void give_relay(std::unique_ptr<char[]> r) {
    if (spare_relays.size() < kSpareRelays) spare_relays.push_back(std::move(r));
  }

  asio::io_context& io_context;
  tcp::resolver resolver;
  UpstreamPool pool;
  // Upstream failures are logged at most once a second per worker (with a
  // count of the rest): an upstream that is down under load must not flood the log.
  observe::DenialLogGate error_log{1.0};
  std::vector<std::unique_ptr<char[]>> spare_relays;
};

// ---------------------------------------------------------------- one exchange

namespace {

class ProxyExchange : public std::enable_shared_from_this<ProxyExchange> {
 public:
  ProxyExchange(std::shared_ptr<GatewayExchange> exchange, std::shared_ptr<ProxyShared> shared)
      : ex_(std::move(exchange)),
        shared_(std::move(shared)),
        upstream_(*ex_->state->policy.config().upstream),
        client_timeout_(ex_->state->policy.config().server.header_timeout) {}

  ~ProxyExchange() {
    if (relay_) shared_->give_relay(std::move(relay_));
  }

  void start();

 private:
  enum class Stage { kConnect, kSend, kReceive };

  Session& session() { return *ex_->session; }
  beast::tcp_stream& client() { return ex_->session->stream(); }

  void build_request();
  void acquire();
  void connect_new();
  void do_connect(std::vector<tcp::endpoint> endpoints);
  void on_connect(beast::error_code ec);
  void on_connected();
  void do_read_request_body();
  void on_read_request_body(beast::error_code ec);
  void do_write_request();
  void on_write_request(beast::error_code ec, size_t n);
  void do_read_response_header();
  void on_response_header(beast::error_code ec);
  void start_response();
  void do_read_response_body();
  void on_read_response_body(beast::error_code ec);
  void do_write_response();
  void on_write_response(beast::error_code ec);
  void finish();

  void upstream_failed(beast::error_code ec, Stage stage);
  bool retry_allowed() const;
  void client_failed(beast::error_code ec);
  void respond_error(HttpStatus status, std::string_view code, const std::string& message);
  void log_failure(const std::string& what);
  void drop_upstream();
  void end(bool keep_alive);
  char* relay();

  std::shared_ptr<GatewayExchange> ex_;
  std::shared_ptr<ProxyShared> shared_;
  const policy::Upstream& upstream_;  // lives in ex_->state
  const std::chrono::milliseconds client_timeout_;
  std::string endpoint_;
  SteadyClock::time_point deadline_;

  unsigned client_version_ = 11;
  bhttp::verb method_ = bhttp::verb::unknown;
  bool client_keep_alive_ = true;
  bool has_body_ = false;         // the request has a body to relay
  bool expect_continue_ = false;  // the client waits for "100 Continue" before its body
  bool conn_reused_ = false;      // conn_ came from the pool
  bool retried_ = false;
  bool response_seen_ = false;     // a byte of an upstream response arrived
  bool response_started_ = false;  // something was written to the client (status fixed)
  uint64_t request_bytes_written_ = 0;
  uint64_t response_body_bytes_ = 0;

  std::unique_ptr<UpstreamConnection> conn_;
  bhttp::request<bhttp::buffer_body> request_;
  std::optional<bhttp::request_serializer<bhttp::buffer_body>> request_sr_;
  std::optional<bhttp::request_parser<bhttp::buffer_body>> body_parser_;
  std::optional<bhttp::response_parser<bhttp::buffer_body>> response_parser_;
  bhttp::response<bhttp::buffer_body> response_;
  std::optional<bhttp::response_serializer<bhttp::buffer_body>> response_sr_;
  std::optional<Response> error_response_;
  std::unique_ptr<char[]> relay_;
};

void ProxyExchange::start() {
  const RequestHeader& in = session().header();
  client_version_ = in.version();
  method_ = in.method();
  client_keep_alive_ = client_wants_keep_alive(in);
  has_body_ = session().body_pending();
  if (has_body_ && client_version_ >= 11) {
    const auto expect = in.find(bhttp::field::expect);
    expect_continue_ = expect != in.end() && beast::iequals(expect->value(), "100-continue");
  }
  endpoint_ = upstream_.address.text();
  build_request();
  if (!has_body_) return acquire();

  // Continue the session's parser with a body type that relays through a
  // buffer. The moved-from parser keeps a copy of the header, which the
  // session still reads (method and target for its access log).
  body_parser_.emplace(std::move(session().header_parser()));
  session().header_parser().get().base() = body_parser_->get().base();
  // The first body bytes are read before a connection is taken, so that a
  // pooled connection is written to right after take() checked it (see
  // retry_allowed()). A client that waits for "100 Continue" gets it first.
  if (!expect_continue_) return do_read_request_body();
  client().expires_after(client_timeout_);
  asio::async_write(client(), asio::buffer(kContinue.data(), kContinue.size()),
                    [self = shared_from_this()](beast::error_code ec, size_t) {
                      self->client().expires_never();
                      if (ec) return self->client_failed(ec);
                      self->do_read_request_body();
                    });
}

void ProxyExchange::build_request() {
  const RequestHeader& in = session().header();
  request_.version(11);  // keep-alive to the upstream whatever the client speaks
  if (in.method() == bhttp::verb::unknown) {
    request_.method_string(in.method_string());
  } else {
    request_.method(in.method());
  }
  request_.target(proxy::upstream_target(upstream_.base_path, sv(in.target())));
  proxy::copy_end_to_end(in, request_);
  // "100 Continue" is Sluice's to send (above), not the upstream's.
  if (expect_continue_) request_.erase(bhttp::field::expect);
  if (request_.find(bhttp::field::host) == request_.end()) {
    request_.set(bhttp::field::host, endpoint_);  // an HTTP/1.0 client sent none
  }
  proxy::add_forwarding_fields(in, session().peer().text(), request_);
  // Framing is re-derived from what the parser knows, never copied.
  const HeaderParser& parser = session().header_parser();
  const boost::optional<std::uint64_t> length = parser.content_length();
  if (has_body_ && parser.chunked()) {
    request_.chunked(true);
  } else if (length) {
    request_.content_length(*length);
  }
  request_.body().data = nullptr;
  request_.body().size = 0;
  request_.body().more = has_body_;
}

// ---------------------------------------------------------------- connecting

void ProxyExchange::acquire() {
  const auto now = SteadyClock::now();
  deadline_ = now + upstream_.timeout;
  conn_ = shared_->pool.take(endpoint_, now);
  if (conn_) {
    conn_reused_ = true;
    return on_connected();
  }
  connect_new();
}

void ProxyExchange::connect_new() {
  conn_reused_ = false;
  conn_ = std::make_unique<UpstreamConnection>(shared_->io_context);
  conn_->endpoint = endpoint_;
  beast::error_code ec;
  const asio::ip::address address = asio::ip::make_address(upstream_.address.host, ec);
  if (!ec) return do_connect({tcp::endpoint(address, upstream_.address.port)});
  shared_->resolver.async_resolve(
      upstream_.address.host, std::to_string(upstream_.address.port),
      [self = shared_from_this()](beast::error_code e, tcp::resolver::results_type results) {
        if (e) return self->upstream_failed(e, Stage::kConnect);
        std::vector<tcp::endpoint> endpoints;
        for (const auto& r : results) endpoints.push_back(r.endpoint());
        self->do_connect(std::move(endpoints));
      });
}

void ProxyExchange::do_connect(std::vector<tcp::endpoint> endpoints) {
  conn_->stream.expires_at(std::min(SteadyClock::now() + upstream_.connect_timeout, deadline_));
  conn_->stream.async_connect(
      endpoints, [self = shared_from_this()](beast::error_code ec, const tcp::endpoint&) {
        self->on_connect(ec);
      });
}

void ProxyExchange::on_connect(beast::error_code ec) {
  if (ec) return upstream_failed(ec, Stage::kConnect);
  beast::error_code ignored;
  conn_->stream.socket().set_option(tcp::no_delay(true), ignored);
  on_connected();
}

void ProxyExchange::on_connected() {
  request_sr_.emplace(request_);
  do_write_request();
}

// ---------------------------------------------------------------- request

void ProxyExchange::do_read_request_body() {
  auto& body = body_parser_->get().body();
  body.data = relay();
  body.size = kRelayBytes;
  client().expires_after(client_timeout_);
  bhttp::async_read_some(client(), session().buffer(), *body_parser_,
                         [self = shared_from_this()](beast::error_code ec, size_t) {
                           self->on_read_request_body(ec);
                         });
}

void ProxyExchange::on_read_request_body(beast::error_code ec) {
  client().expires_never();
  if (ec == bhttp::error::need_buffer) ec = {};
  if (ec) return client_failed(ec);
  const size_t got = kRelayBytes - body_parser_->get().body().size;
  const bool done = body_parser_->is_done();
  if (got == 0 && !done) return do_read_request_body();  // only framing bytes so far
  // A zero-length write would end a chunked body early: pass no data instead.
  request_.body().data = got > 0 ? relay() : nullptr;
  request_.body().size = got;
  request_.body().more = !done;
  if (!conn_) return acquire();  // the first bytes: now take a connection
  do_write_request();
}

void ProxyExchange::do_write_request() {
  conn_->stream.expires_at(deadline_);
  bhttp::async_write(conn_->stream, *request_sr_,
                     [self = shared_from_this()](beast::error_code ec, size_t n) {
                       self->on_write_request(ec, n);
                     });
}

void ProxyExchange::on_write_request(beast::error_code ec, size_t n) {
  request_bytes_written_ += n;
  if (ec == bhttp::error::need_buffer) ec = {};
  if (ec) return upstream_failed(ec, Stage::kSend);
  if (!request_sr_->is_done()) return do_read_request_body();
  do_read_response_header();
}

// ---------------------------------------------------------------- response

void ProxyExchange::do_read_response_header() {
  response_parser_.emplace();
  response_parser_->header_limit(kMaxUpstreamHeaderBytes);
  response_parser_->body_limit(boost::none);  // streamed, never held whole
  if (method_ == bhttp::verb::head) response_parser_->skip(true);
  conn_->stream.expires_at(deadline_);
  bhttp::async_read_header(
      conn_->stream, conn_->buffer, *response_parser_,
      [self = shared_from_this()](beast::error_code ec, size_t) { self->on_response_header(ec); });
}

void ProxyExchange::on_response_header(beast::error_code ec) {
  if (response_parser_->got_some()) response_seen_ = true;
  if (ec) return upstream_failed(ec, Stage::kReceive);
  const unsigned status = response_parser_->get().result_int();
  if (status == 101) {
    drop_upstream();
    return respond_error(HttpStatus::bad_gateway, "UPSTREAM_UNAVAILABLE",
                         "the upstream switched protocols, which the gateway does not relay");
  }
  // An interim response (103 Early Hints; 100 Continue although Sluice never
  // forwards Expect): dropped, the final response follows on the same connection.
  if (status < 200) return do_read_response_header();
  start_response();
}

void ProxyExchange::start_response() {
  auto& parser = *response_parser_;
  const auto& upstream_response = parser.get();
  response_.result(upstream_response.result_int());
  response_.reason(upstream_response.reason());
  response_.version(client_version_);
  proxy::copy_end_to_end(upstream_response, response_);
  for (const RateHeaders::Field& f : ex_->rate_headers) response_.set(bsv(f.name), bsv(f.value));

  bool keep_alive = client_keep_alive_ && !session().draining();
  if (parser.is_done()) {
    // No body (HEAD, 204, 304, or empty). For HEAD and 304, Content-Length
    // describes the representation, so the upstream's value is passed on.
    const auto length = upstream_response.find(bhttp::field::content_length);
    if (length != upstream_response.end()) {
      response_.set(bhttp::field::content_length, length->value());
    }
  } else if (parser.content_length() && !parser.chunked()) {
    response_.content_length(*parser.content_length());
  } else if (client_version_ >= 11) {
    response_.chunked(true);  // chunked or read-until-close upstream: re-chunked
  } else {
    keep_alive = false;  // an HTTP/1.0 client learns the end from the close
  }
  response_.keep_alive(keep_alive);
  client_keep_alive_ = keep_alive;
  response_.body().data = nullptr;
  response_.body().size = 0;
  response_.body().more = !parser.is_done();
  response_sr_.emplace(response_);
  // With a body, its first bytes are read before writing, so that the header
  // and a small body leave in one write.
  if (parser.is_done()) return do_write_response();
  do_read_response_body();
}

void ProxyExchange::do_read_response_body() {
  auto& body = response_parser_->get().body();
  body.data = relay();
  body.size = kRelayBytes;
  conn_->stream.expires_at(deadline_);
  bhttp::async_read_some(conn_->stream, conn_->buffer, *response_parser_,
                         [self = shared_from_this()](beast::error_code ec, size_t) {
                           self->on_read_response_body(ec);
                         });
}

void ProxyExchange::on_read_response_body(beast::error_code ec) {
  if (ec == bhttp::error::need_buffer) ec = {};
  if (ec) return upstream_failed(ec, Stage::kReceive);
  const size_t got = kRelayBytes - response_parser_->get().body().size;
  const bool done = response_parser_->is_done();
  if (got == 0 && !done) return do_read_response_body();
  response_.body().data = got > 0 ? relay() : nullptr;
  response_.body().size = got;
  response_.body().more = !done;
  response_body_bytes_ += got;
  do_write_response();
}

void ProxyExchange::do_write_response() {
  response_started_ = true;
  client().expires_after(client_timeout_);
  bhttp::async_write(
      client(), *response_sr_,
      [self = shared_from_this()](beast::error_code ec, size_t) { self->on_write_response(ec); });
}

void ProxyExchange::on_write_response(beast::error_code ec) {
  client().expires_never();
  if (ec == bhttp::error::need_buffer) ec = {};
  if (ec) return client_failed(ec);
  if (!response_sr_->is_done()) return do_read_response_body();
  finish();
}

void ProxyExchange::finish() {
  session().log_access(response_.result_int(), response_body_bytes_);
  // Clean: both messages complete, the upstream did not ask to close, and no
  // stray bytes after the response (looks_open() checks the buffer too).
  const bool reusable =
      response_parser_->is_done() && response_parser_->keep_alive() && request_sr_->is_done();
  if (reusable) {
    ++conn_->exchanges;
    shared_->pool.put(std::move(conn_), upstream_.max_idle_connections, SteadyClock::now());
  } else {
    drop_upstream();
  }
  end(client_keep_alive_);
}

// ---------------------------------------------------------------- failures

// When may a failed request be sent again? At most once, on a new connection,
// and only if the upstream cannot have acted on it:
//
// - The failed connection came from the pool. A new connection that fails is
//   an upstream that is down or broken: answer 502 at once, never hammer it.
// - No byte of a response arrived (a response, even partial, means the
//   upstream took the request in).
// - The request has no body. Its body was streamed from the client and is not
//   kept, so it could not be sent again (and a pooled connection is checked
//   right before its first write, see start(), so bodies rarely meet a stale one).
// - And either nothing of the request reached the upstream's socket (the very
//   first write failed having written 0 bytes: the upstream had already reset
//   the connection, so it cannot have read the request) — for any method —
//   or the method is idempotent (RFC 9110 §9.2.2). The usual case is an idle
//   keep-alive connection the upstream closed just as Sluice reused it: the
//   write is accepted by the kernel, then the read sees EOF or a reset with
//   nothing received. From here that looks exactly like an upstream that read
//   the request and died before answering, so only a request that may safely
//   run twice (GET, HEAD, PUT, DELETE, OPTIONS, TRACE) is sent again; a POST
//   or PATCH that may have been applied gets 502 rather than a second
//   application.
// - Never after a timeout: the upstream may still be working on it, and the
//   time the client was promised is spent.
bool ProxyExchange::retry_allowed() const {
  if (retried_ || !conn_reused_ || response_seen_ || has_body_) return false;
  if (request_bytes_written_ == 0) return true;
  return is_idempotent(method_);
}

void ProxyExchange::upstream_failed(beast::error_code ec, Stage stage) {
  const bool timed_out = ec == beast::error::timeout;
  const bool connect_timed_out =
      timed_out && stage == Stage::kConnect && SteadyClock::now() < deadline_;
  drop_upstream();
  if (response_started_) {
    // The status and perhaps part of the body are with the client: the only
    // honest signal left is to cut the connection short.
    log_failure("the upstream failed in the middle of a response (" + ec.message() +
                "); client connection closed");
    return end(false);
  }
  if (!timed_out && retry_allowed()) {
    retried_ = true;
    spdlog::debug("gateway: pooled upstream connection failed ({}); retrying once on a new one",
                  ec.message());
    request_bytes_written_ = 0;
    return connect_new();
  }
  if (timed_out && !connect_timed_out) {
    return respond_error(
        HttpStatus::gateway_timeout, "UPSTREAM_TIMEOUT",
        "the upstream did not answer within " + std::to_string(upstream_.timeout.count()) + " ms");
  }
  std::string message;
  switch (stage) {
    case Stage::kConnect:
      message = connect_timed_out ? "the upstream could not be reached within " +
                                        std::to_string(upstream_.connect_timeout.count()) + " ms"
                                  : "the upstream cannot be reached: " + ec.message();
      break;
    case Stage::kSend:
      message = "the upstream closed the connection while the request was sent: " + ec.message();
      break;
    case Stage::kReceive:
      message = is_parse_error(ec)
                    ? "the upstream sent a malformed response: " + ec.message()
                    : "the upstream closed the connection before responding: " + ec.message();
      break;
  }
  respond_error(HttpStatus::bad_gateway, "UPSTREAM_UNAVAILABLE", message);
}

void ProxyExchange::client_failed(beast::error_code ec) {
  drop_upstream();
  if (is_parse_error(ec) && !response_started_) {
    return respond_error(HttpStatus::bad_request, "BAD_REQUEST",
                         "malformed HTTP request body: " + ec.message());
  }
  // The client went away or was too slow: nobody to answer.
  end(false);
}

void ProxyExchange::respond_error(HttpStatus status, std::string_view code,
                                  const std::string& message) {
  log_failure(std::to_string(static_cast<unsigned>(status)) + " " + std::string(code) + ": " +
              message);
  error_response_.emplace(error_response(status, code, message));
  for (const RateHeaders::Field& f : ex_->rate_headers) {
    error_response_->set(bsv(f.name), bsv(f.value));
  }
  // The connection can carry another request only if this one was read to its end.
  const bool body_read = !has_body_ || (body_parser_ && body_parser_->is_done());
  const bool keep_alive = client_keep_alive_ && body_read && !session().draining();
  error_response_->version(client_version_);
  error_response_->keep_alive(keep_alive);
  error_response_->prepare_payload();
  if (method_ == bhttp::verb::head) error_response_->body().clear();  // Content-Length stays
  response_started_ = true;
  client().expires_after(client_timeout_);
  bhttp::async_write(client(), *error_response_,
                     [self = shared_from_this(), keep_alive](beast::error_code ec, size_t) {
                       self->client().expires_never();
                       self->session().log_access(self->error_response_->result_int(),
                                                  self->error_response_->body().size());
                       self->end(!ec && keep_alive);
                     });
}

void ProxyExchange::log_failure(const std::string& what) {
  const observe::DenialLogGate::Admission a =
      shared_->error_log.admit(session().context().clock.now());
  if (!a.log) return;
  const RequestHeader& in = session().header();
  spdlog::warn("gateway: {} {} via upstream {}: {}{}", sv(in.method_string()), sv(in.target()),
               upstream_.url, what,
               a.suppressed_before == 0 ? std::string()
                                        : " (" + std::to_string(a.suppressed_before) +
                                              " upstream errors not logged before this one)");
}

void ProxyExchange::drop_upstream() {
  if (!conn_) return;
  close_stream(conn_->stream);
  conn_.reset();
}

void ProxyExchange::end(bool keep_alive) {
  if (relay_) shared_->give_relay(std::move(relay_));
  ex_->session->resume(keep_alive);
}

char* ProxyExchange::relay() {
  if (!relay_) relay_ = shared_->take_relay();
  return relay_.get();
}

}  // namespace

// ---------------------------------------------------------------- UpstreamProxy

UpstreamProxy::UpstreamProxy(asio::io_context& io_context)
    : shared_(std::make_shared<ProxyShared>(io_context)) {}

UpstreamProxy::~UpstreamProxy() = default;

void UpstreamProxy::forward(std::shared_ptr<GatewayExchange> exchange) {
  std::make_shared<ProxyExchange>(std::move(exchange), shared_)->start();
}

ForwarderFactory upstream_proxy_factory() {
  return [](asio::io_context& io_context) -> std::unique_ptr<Forwarder> {
    return std::make_unique<UpstreamProxy>(io_context);
  };
}

}  // namespace sluice::http
