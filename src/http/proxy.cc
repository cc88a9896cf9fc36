#include "http/proxy.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <spdlog/spdlog.h>
#include <boost/asio/buffer.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/rfc7230.hpp>
#include <boost/beast/http/status.hpp>
#include <boost/beast/http/write.hpp>

#include "http/head_writer.h"
#include "http/proxy_headers.h"
#include "http/proxy_pool.h"
#include "http/request_checks.h"
#include "http/responses.h"
#include "http/tunnel.h"
#include "observe/denial_log.h"
#include "policy/ip.h"
#include "policy/path.h"

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
// Relay buffers kept per worker for reuse (allocating and freeing 64 KiB per
// request costs more than the proxying itself).
constexpr size_t kSpareRelays = 64;
// The upstream's response header may be larger than what clients may send.
constexpr std::uint32_t kMaxUpstreamHeaderBytes = 64 * 1024;
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
constexpr std::string_view kCrlf = "\r\n";
constexpr std::string_view kLastChunk = "0\r\n\r\n";

std::string_view sv(beast::string_view s) {
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

// An HTTP/1.1 request asking to switch protocols (RFC 9110 §7.8): a
// WebSocket handshake, say. h2c is not relayed: a gateway that passed it on
// would hand the client an HTTP/2 connection it never decides requests on.
bool wants_upgrade(const RequestHeader& req) {
  if (req.version() < 11) return false;
  const auto upgrade = req.find(bhttp::field::upgrade);
  const auto connection = req.find(bhttp::field::connection);
  if (upgrade == req.end() || connection == req.end()) return false;
  if (!bhttp::token_list(connection->value()).exists("upgrade")) return false;
  const bhttp::token_list protocols(upgrade->value());
  if (protocols.begin() == protocols.end()) return false;
  for (const auto& protocol : protocols) {
    const std::string_view name(protocol.data(), protocol.size());
    if (beast::iequals(name.substr(0, name.find('/')), "h2c")) return false;
  }
  return true;
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

// How the proxy frames a body it sends.
enum class Framing { kNone, kLength, kChunked, kUntilClose };

// Buffers for one write: the header block (until sent), one body piece
// (chunk-framed when chunked) and the end of a chunked body.
class Gather {
 public:
  std::span<const asio::const_buffer> make(std::string_view head, bool chunked, const char* data,
                                           size_t size, bool last) {
    size_t n = 0;
    if (!head.empty()) buffers_[n++] = asio::buffer(head.data(), head.size());
    if (size > 0) {
      if (chunked) {
        const auto r = std::to_chars(chunk_line_, chunk_line_ + 16, size, 16);
        r.ptr[0] = '\r';
        r.ptr[1] = '\n';
        buffers_[n++] = asio::buffer(chunk_line_, static_cast<size_t>(r.ptr + 2 - chunk_line_));
      }
      buffers_[n++] = asio::buffer(data, size);
      if (chunked) buffers_[n++] = asio::buffer(kCrlf.data(), kCrlf.size());
    }
    if (last && chunked) buffers_[n++] = asio::buffer(kLastChunk.data(), kLastChunk.size());
    return {buffers_.data(), n};
  }

 private:
  std::array<asio::const_buffer, 5> buffers_;
  char chunk_line_[20];
};

}  // namespace

// ---------------------------------------------------------------- shared per worker

struct ProxyShared {
  explicit ProxyShared(asio::io_context& io) : io_context(io) {}

  std::unique_ptr<char[]> take_relay() {
    if (spare_relays.empty()) return std::unique_ptr<char[]>(new char[kRelayBytes]);
    std::unique_ptr<char[]> r = std::move(spare_relays.back());
    spare_relays.pop_back();
    return r;
  }
  void give_relay(std::unique_ptr<char[]> r) {
    if (spare_relays.size() < kSpareRelays) spare_relays.push_back(std::move(r));
  }

  asio::io_context& io_context;
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
        client_timeout_(ex_->state->policy.config().server.header_timeout),
        timer_(shared_->io_context) {}

  ~ProxyExchange() {
    if (relay_) shared_->give_relay(std::move(relay_));
  }

  void start();

 private:
  enum class Stage { kConnect, kSend, kReceive };
  // What the exchange timer guards (one timer per exchange, re-armed per phase).
  enum class Waiting { kNothing, kConnect, kUpstream, kClient };

  Session& session() { return *ex_->session; }
  ClientStream& client() { return ex_->session->stream(); }

  void build_request_head();
  void acquire();
  void connect_new();
  void do_connect(std::vector<tcp::endpoint> endpoints);
  void on_connect(beast::error_code ec);
  void do_read_request_body();
  void on_read_request_body(beast::error_code ec);
  void write_first_piece();
  void write_request(const char* data, size_t size, bool last);
  void on_write_request(beast::error_code ec, size_t n, bool last);
  void do_read_response_header();
  void on_response_header(beast::error_code ec);
  void start_response();
  void append_response_fields(const bhttp::response_header<>& in, std::string& out);
  void do_read_response_body();
  void on_read_response_body(beast::error_code ec);
  void write_response(const char* data, size_t size, bool last);
  void on_write_response(beast::error_code ec, bool last);
  void finish();
  void start_tunnel();
  template <class Then>
  void settle(std::optional<int> status, Then then);

  void arm(Waiting what, SteadyClock::time_point when);
  void on_timer(uint64_t seq);
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
  SteadyClock::time_point deadline_;  // of the upstream exchange (Upstream::timeout)
  SteadyClock::time_point started_;   // for the access log's upstream time

  asio::steady_timer timer_;
  uint64_t timer_seq_ = 0;
  Waiting waiting_ = Waiting::kNothing;
  SteadyClock::time_point armed_for_;
  bool upstream_timed_out_ = false;
  std::optional<tcp::resolver> resolver_;  // only for an upstream given by name

  unsigned client_version_ = 11;
  bhttp::verb method_ = bhttp::verb::unknown;
  bool client_keep_alive_ = true;
  bool has_body_ = false;         // the request has a body to relay
  bool expect_continue_ = false;  // the client waits for "100 Continue" before its body
  bool conn_reused_ = false;      // conn_ came from the pool
  bool retried_ = false;
  bool response_seen_ = false;     // a byte of an upstream response arrived
  bool response_started_ = false;  // something was written to the client (status fixed)
  bool request_done_ = false;
  bool response_done_ = false;
  bool slots_given_back_ = false;  // concurrency: the last answer waited for charge.release()
  bool upgrade_ = false;           // the request asks to switch protocols (wants_upgrade)
  Framing request_framing_ = Framing::kNone;
  Framing response_framing_ = Framing::kNone;
  uint64_t request_bytes_written_ = 0;
  uint64_t response_body_bytes_ = 0;
  size_t first_piece_ = 0;  // body bytes read before the connection was taken

  std::unique_ptr<UpstreamConnection> conn_;
  std::string request_head_;
  std::string response_head_;
  bool request_head_sent_ = false;
  bool response_head_sent_ = false;
  Gather gather_;
  std::optional<bhttp::request_parser<bhttp::buffer_body>> body_parser_;
  std::optional<bhttp::response_parser<bhttp::buffer_body>> response_parser_;
  std::optional<Response> error_response_;
  std::unique_ptr<char[]> relay_;
};

void ProxyExchange::start() {
  started_ = SteadyClock::now();
  const RequestHeader& in = session().header();
  client_version_ = in.version();
  method_ = in.method();
  client_keep_alive_ = client_wants_keep_alive(in);
  has_body_ = session().body_pending();
  // A request with a body is never upgraded: its body would have to end
  // before the tunnel starts, and no WebSocket handshake has one.
  upgrade_ = !has_body_ && wants_upgrade(in);
  if (has_body_ && client_version_ >= 11) {
    const auto expect = in.find(bhttp::field::expect);
    expect_continue_ = expect != in.end() && beast::iequals(expect->value(), "100-continue");
  }
  endpoint_ = upstream_.address.text();
  build_request_head();
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
  arm(Waiting::kClient, SteadyClock::now() + client_timeout_);
  asio::async_write(client(), asio::buffer(kContinue.data(), kContinue.size()),
                    [self = shared_from_this()](beast::error_code ec, size_t) {
                      if (ec) return self->client_failed(ec);
                      self->do_read_request_body();
                    });
}

void ProxyExchange::build_request_head() {
  const RequestHeader& in = session().header();
  std::string& out = request_head_;
  out.reserve(512);
  out.append(sv(in.method_string()));
  out += ' ';
  // paths.forward: normalized: the upstream gets the path that was matched.
  const std::string_view target = ex_->plan.forward_target.empty() || sv(in.target()) == "*"
                                      ? sv(in.target())
                                      : std::string_view(ex_->plan.forward_target);
  proxy::append_upstream_target(upstream_.base_path, target, out);
  out.append(" HTTP/1.1\r\n");  // keep-alive to the upstream whatever the client speaks
  // The forwarding fields are rewritten below; "100 Continue" is Sluice's to
  // send (start()), so Expect stops here when Sluice handles it.
  static constexpr std::string_view kDropPlain[] = {"X-Forwarded-For", "X-Real-IP", "Forwarded",
                                                    "X-Forwarded-Proto", "X-Forwarded-Host"};
  static constexpr std::string_view kDropExpect[] = {"X-Forwarded-For",  "X-Real-IP",
                                                     "Forwarded",        "X-Forwarded-Proto",
                                                     "X-Forwarded-Host", "Expect"};
  proxy::append_end_to_end(in,
                           expect_continue_ ? std::span<const std::string_view>(kDropExpect)
                                            : std::span<const std::string_view>(kDropPlain),
                           out);
  if (in.find(bhttp::field::host) == in.end()) {
    proxy::append_field("Host", endpoint_, out);  // an HTTP/1.0 client sent none
  }
  if (upgrade_) {
    // Hop-by-hop, so not copied above: the upgrade is asked of this hop anew.
    proxy::append_field("Connection", "Upgrade", out);
    proxy::append_field("Upgrade", sv(in[bhttp::field::upgrade]), out);
  }
  const std::string peer = session().peer().text();
  const std::string client = ex_->plan.client.text();
  proxy::append_forwarding_fields(
      in,
      proxy::Forwarding{
          peer, client,
          policy::is_trusted_proxy(ex_->state->policy.config().client_ip, session().peer()),
          session().stream().is_tls()},
      out);
  // Framing is re-derived from what the parser knows, never copied.
  const HeaderParser& parser = session().header_parser();
  const boost::optional<std::uint64_t> length = parser.content_length();
  if (has_body_ && parser.chunked()) {
    // The body is re-chunked; codings applied before chunked (gzip) stay the
    // client's and travel on.
    request_framing_ = Framing::kChunked;
    out.append("Transfer-Encoding: ");
    out.append(codings_before_chunked(in));
    out.append("chunked\r\n");
  } else if (length) {
    request_framing_ = Framing::kLength;
    out.append("Content-Length: ");
    append_uint(*length, out);
    out.append("\r\n", 2);
  }
  out.append("\r\n", 2);
}

// ---------------------------------------------------------------- timer

void ProxyExchange::arm(Waiting what, SteadyClock::time_point when) {
  if (what == waiting_ && when == armed_for_) return;  // already guarding this
  waiting_ = what;
  armed_for_ = when;
  const uint64_t seq = ++timer_seq_;
  timer_.expires_at(when);
  // A weak reference: the timer never keeps a finished exchange alive (the
  // exchange's destruction cancels it).
  timer_.async_wait([weak = weak_from_this(), seq](beast::error_code ec) {
    if (ec) return;
    if (auto self = weak.lock()) self->on_timer(seq);
  });
}

void ProxyExchange::on_timer(uint64_t seq) {
  // A wait that completed just before it was re-armed still runs: only the
  // current arming counts.
  if (seq != timer_seq_) return;
  beast::error_code ignored;
  switch (waiting_) {
    case Waiting::kConnect:
    case Waiting::kUpstream:
      // Closing the socket completes the pending operation with an error,
      // which upstream_failed() reads as the timeout.
      upstream_timed_out_ = true;
      if (resolver_) resolver_->cancel();
      if (conn_) conn_->socket.close(ignored);
      break;
    case Waiting::kClient:
      client().socket().cancel(ignored);  // the session owns (and later closes) it
      break;
    case Waiting::kNothing:
      break;
  }
}

// ---------------------------------------------------------------- connecting

void ProxyExchange::acquire() {
  const auto now = SteadyClock::now();
  deadline_ = now + upstream_.timeout;
  ex_->upstream.began(now);
  // An upgrade takes its own connection: it becomes the tunnel, never pooled.
  if (upgrade_) return connect_new();
  conn_ = shared_->pool.take(endpoint_, now);
  if (conn_) {
    conn_reused_ = true;
    return write_first_piece();
  }
  connect_new();
}

void ProxyExchange::connect_new() {
  conn_reused_ = false;
  conn_ = std::make_unique<UpstreamConnection>(shared_->io_context);
  conn_->endpoint = endpoint_;
  arm(Waiting::kConnect, std::min(SteadyClock::now() + upstream_.connect_timeout, deadline_));
  beast::error_code ec;
  const asio::ip::address address = asio::ip::make_address(upstream_.address.host, ec);
  if (!ec) return do_connect({tcp::endpoint(address, upstream_.address.port)});
  resolver_.emplace(shared_->io_context);
  resolver_->async_resolve(
      upstream_.address.host, std::to_string(upstream_.address.port),
      [self = shared_from_this()](beast::error_code e, tcp::resolver::results_type results) {
        if (e) return self->upstream_failed(e, Stage::kConnect);
        std::vector<tcp::endpoint> endpoints;
        for (const auto& r : results) endpoints.push_back(r.endpoint());
        self->do_connect(std::move(endpoints));
      });
}

void ProxyExchange::do_connect(std::vector<tcp::endpoint> endpoints) {
  asio::async_connect(conn_->socket, endpoints,
                      [self = shared_from_this()](beast::error_code ec, const tcp::endpoint&) {
                        self->on_connect(ec);
                      });
}

void ProxyExchange::on_connect(beast::error_code ec) {
  if (ec) return upstream_failed(ec, Stage::kConnect);
  beast::error_code ignored;
  conn_->socket.set_option(tcp::no_delay(true), ignored);
  conn_->socket.set_option(ReportReceiveQueue(true), ignored);
  write_first_piece();
}

// ---------------------------------------------------------------- request

void ProxyExchange::do_read_request_body() {
  auto& body = body_parser_->get().body();
  body.data = relay();
  body.size = kRelayBytes;
  arm(Waiting::kClient, SteadyClock::now() + client_timeout_);
  bhttp::async_read_some(client(), session().buffer(), *body_parser_,
                         [self = shared_from_this()](beast::error_code ec, size_t) {
                           self->on_read_request_body(ec);
                         });
}

void ProxyExchange::on_read_request_body(beast::error_code ec) {
  if (ec == bhttp::error::need_buffer) ec = {};
  if (ec) return client_failed(ec);
  const size_t got = kRelayBytes - body_parser_->get().body().size;
  const bool done = body_parser_->is_done();
  if (got == 0 && !done) return do_read_request_body();  // only framing bytes so far
  if (!conn_) {
    // The first bytes: now take a connection (acquire() or on_connect() writes them).
    first_piece_ = got;
    return acquire();
  }
  write_request(relay(), got, done);
}

// The request header, with the body bytes read so far (see start()). A retry
// comes here too, only ever without a body.
void ProxyExchange::write_first_piece() {
  if (!has_body_) return write_request(nullptr, 0, true);
  write_request(relay(), first_piece_, body_parser_->is_done());
}

void ProxyExchange::write_request(const char* data, size_t size, bool last) {
  arm(Waiting::kUpstream, deadline_);
  const auto buffers =
      gather_.make(request_head_sent_ ? std::string_view() : std::string_view(request_head_),
                   request_framing_ == Framing::kChunked, data, size, last);
  if (buffers.empty()) return on_write_request({}, 0, last);  // nothing left to say
  asio::async_write(conn_->socket, buffers,
                    [self = shared_from_this(), last](beast::error_code ec, size_t n) {
                      self->on_write_request(ec, n, last);
                    });
}

void ProxyExchange::on_write_request(beast::error_code ec, size_t n, bool last) {
  request_bytes_written_ += n;
  if (ec) return upstream_failed(ec, Stage::kSend);
  request_head_sent_ = true;
  if (!last) return do_read_request_body();
  request_done_ = true;
  do_read_response_header();
}

// ---------------------------------------------------------------- response

void ProxyExchange::do_read_response_header() {
  response_parser_.emplace();
  response_parser_->header_limit(kMaxUpstreamHeaderBytes);
  response_parser_->body_limit(boost::none);  // streamed, never held whole
  if (method_ == bhttp::verb::head) response_parser_->skip(true);
  arm(Waiting::kUpstream, deadline_);
  bhttp::async_read_header(
      conn_->reads, conn_->buffer, *response_parser_,
      [self = shared_from_this()](beast::error_code ec, size_t) { self->on_response_header(ec); });
}

void ProxyExchange::on_response_header(beast::error_code ec) {
  if (response_parser_->got_some()) response_seen_ = true;
  if (ec) return upstream_failed(ec, Stage::kReceive);
  const unsigned status = response_parser_->get().result_int();
  // An interim response (103 Early Hints; 100 Continue although Sluice never
  // forwards Expect): dropped, the final response follows on the same connection.
  if (status < 200 && status != 101) return do_read_response_header();
  ex_->upstream.responded(status);
  if (session().access_log_on()) {
    session().access_note().upstream =
        std::chrono::duration_cast<std::chrono::microseconds>(SteadyClock::now() - started_);
  }
  settle(static_cast<int>(status), [this, status] {
    if (status != 101) return start_response();
    if (upgrade_) return start_tunnel();
    drop_upstream();
    ex_->upstream.failed(observe::UpstreamFailure::kBadResponse);
    respond_error(HttpStatus::bad_gateway, "UPSTREAM_UNAVAILABLE",
                  "the upstream switched protocols, which the gateway does not relay");
  });
}

// The upstream's end-to-end fields, then the rate headers, which are
// Sluice's: an upstream field of the same name gives way.
void ProxyExchange::append_response_fields(const bhttp::response_header<>& in, std::string& out) {
  std::array<std::string_view, RateHeaders::kMaxFields> rate_names;
  size_t rate_count = 0;
  for (const RateHeaders::Field& f : ex_->rate_headers) rate_names[rate_count++] = f.name;
  proxy::append_end_to_end(in, std::span(rate_names.data(), rate_count), out);
  for (const RateHeaders::Field& f : ex_->rate_headers) proxy::append_field(f.name, f.value, out);
}

void ProxyExchange::start_response() {
  auto& parser = *response_parser_;
  const auto& in = parser.get();
  bool keep_alive = client_keep_alive_ && !session().draining();

  std::string& out = response_head_;
  out.reserve(512);
  append_status_line(client_version_ >= 11 ? 11 : 10, in.result_int(), sv(in.reason()), out);
  append_response_fields(in, out);

  if (parser.is_done()) {
    // No body (HEAD, 204, 304, or empty). For HEAD and 304, Content-Length
    // describes the representation, so the upstream's value is passed on.
    response_framing_ = Framing::kNone;
    const auto length = in.find(bhttp::field::content_length);
    if (length != in.end()) proxy::append_field("Content-Length", sv(length->value()), out);
  } else if (parser.content_length() && !parser.chunked()) {
    response_framing_ = Framing::kLength;
    out.append("Content-Length: ");
    append_uint(*parser.content_length(), out);
    out.append("\r\n", 2);
  } else if (client_version_ >= 11) {
    response_framing_ = Framing::kChunked;  // chunked or read-until-close upstream: re-chunked
    out.append("Transfer-Encoding: chunked\r\n");
  } else {
    response_framing_ = Framing::kUntilClose;  // an HTTP/1.0 client learns the end from the close
    keep_alive = false;
  }
  append_connection_field(client_version_, keep_alive, out);
  out.append("\r\n", 2);
  client_keep_alive_ = keep_alive;

  // With a body, its first bytes are read before writing, so that the header
  // and a small body leave in one write.
  if (parser.is_done()) return write_response(nullptr, 0, true);
  do_read_response_body();
}

void ProxyExchange::do_read_response_body() {
  auto& body = response_parser_->get().body();
  body.data = relay();
  body.size = kRelayBytes;
  arm(Waiting::kUpstream, deadline_);
  bhttp::async_read_some(conn_->reads, conn_->buffer, *response_parser_,
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
  response_body_bytes_ += got;
  write_response(relay(), got, done);
}

void ProxyExchange::write_response(const char* data, size_t size, bool last) {
  if (last && !slots_given_back_) {
    // The upstream is done with it: its concurrency slots go back before
    // the response ends, so the client's next request finds them free.
    slots_given_back_ = true;
    return ex_->charge.release(
        [self = shared_from_this(), data, size] { self->write_response(data, size, true); });
  }
  response_started_ = true;
  const auto buffers =
      gather_.make(response_head_sent_ ? std::string_view() : std::string_view(response_head_),
                   response_framing_ == Framing::kChunked, data, size, last);
  if (buffers.empty()) return on_write_response({}, last);
  arm(Waiting::kClient, SteadyClock::now() + client_timeout_);
  asio::async_write(client(), buffers,
                    [self = shared_from_this(), last](beast::error_code ec, size_t) {
                      self->on_write_response(ec, last);
                    });
}

void ProxyExchange::on_write_response(beast::error_code ec, bool last) {
  if (ec) return client_failed(ec);
  response_head_sent_ = true;
  if (!last) return do_read_response_body();
  response_done_ = true;
  finish();
}

void ProxyExchange::finish() {
  session().log_access(response_parser_->get().result_int(), response_body_bytes_);
  // Clean: both messages complete, the upstream did not ask to close, and no
  // stray bytes after the response (looks_open() checks the buffer too).
  const bool reusable =
      request_done_ && response_parser_->is_done() && response_parser_->keep_alive() && !upgrade_;
  if (reusable) {
    ++conn_->exchanges;
    shared_->pool.put(std::move(conn_), upstream_.max_idle_connections, SteadyClock::now());
  } else {
    drop_upstream();
  }
  end(client_keep_alive_);
}

// ---------------------------------------------------------------- upgrades

// The upstream switched protocols: the 101 goes to the client (with the rate
// headers, as on any answer), then both connections become one tunnel until
// either closes or server.idle_timeout passes with nothing moving.
void ProxyExchange::start_tunnel() {
  const auto& in = response_parser_->get();
  std::string& out = response_head_;
  append_status_line(11, 101, sv(in.reason()), out);
  append_response_fields(in, out);
  proxy::append_field("Connection", "Upgrade", out);
  proxy::append_field("Upgrade", sv(in[bhttp::field::upgrade]), out);
  out.append("\r\n", 2);
  response_started_ = true;
  arm(Waiting::kClient, SteadyClock::now() + client_timeout_);
  asio::async_write(
      client(), asio::buffer(out), [self = shared_from_this()](beast::error_code ec, size_t) {
        if (ec) return self->client_failed(ec);
        self->waiting_ = Waiting::kNothing;  // the tunnel keeps its own time
        // What either side sent beyond its header block goes first.
        const auto leftover = [](beast::flat_buffer& b) {
          std::string bytes(static_cast<const char*>(b.data().data()), b.size());
          b.consume(b.size());
          return bytes;
        };
        std::string to_upstream = leftover(self->session().buffer());
        std::string to_client = leftover(self->conn_->buffer);
        auto tunnel =
            std::make_shared<Tunnel>(self->client(), std::move(self->conn_->socket),
                                     self->ex_->state->policy.config().server.idle_timeout,
                                     [self](uint64_t to_client_bytes, uint64_t) {
                                       self->session().log_access(101, to_client_bytes);
                                       self->end(false);
                                     });
        self->conn_.reset();
        tunnel->start(std::move(to_upstream), std::move(to_client));
      });
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
  const bool timed_out = upstream_timed_out_;
  const bool connect_timed_out =
      timed_out && stage == Stage::kConnect && SteadyClock::now() < deadline_;
  drop_upstream();
  if (response_started_) {
    ex_->upstream.failed(observe::upstream_failure(false, timed_out, is_parse_error(ec)));
    // The status and perhaps part of the body are with the client: the only
    // honest signal left is to cut the connection short.
    log_failure("the upstream failed in the middle of a response (" +
                std::string(timed_out ? "timeout" : ec.message()) + "); client connection closed");
    return end(false);
  }
  if (!timed_out && retry_allowed()) {
    retried_ = true;
    spdlog::debug("gateway: pooled upstream connection failed ({}); retrying once on a new one",
                  ec.message());
    request_bytes_written_ = 0;
    request_head_sent_ = false;
    return connect_new();
  }
  ex_->upstream.failed(observe::upstream_failure(
      stage == Stage::kConnect, timed_out && !connect_timed_out, is_parse_error(ec)));
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
  if (stage != Stage::kConnect) {
    return respond_error(HttpStatus::bad_gateway, "UPSTREAM_UNAVAILABLE", message);
  }
  // Never sent: the upstream tried nothing, so nothing counts.
  settle(std::nullopt, [this, message = std::move(message)] {
    respond_error(HttpStatus::bad_gateway, "UPSTREAM_UNAVAILABLE", message);
  });
}

// count_status: the charge stands only for a status its limits list. The
// status the upstream sent decides, or nothing was sent (connect failure):
// a request the upstream may have worked on without an answer (a timeout, a
// failure after sending, a client gone first) stays charged, so that no
// failure an attacker can provoke yields a free attempt. `then` runs once
// the store has applied what is given back, so that the client's next
// request (on any connection, any worker, any instance) sees it. `then` may
// hold a plain `this`: while the store works, its callback keeps the
// exchange alive.
template <class Then>
void ProxyExchange::settle(std::optional<int> status, Then then) {
  if (ex_->charge.settled()) return then();  // no count_status here
  ex_->charge.settle(policy::Settlement{status},
                     [self = shared_from_this(), then = std::move(then)]() mutable { then(); });
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
  if (!slots_given_back_) {
    // As write_response(): the slots go back before the client learns the outcome.
    slots_given_back_ = true;
    return ex_->charge.release([self = shared_from_this(), status, code, message] {
      self->respond_error(status, code, message);
    });
  }
  log_failure(std::to_string(static_cast<unsigned>(status)) + " " + std::string(code) + ": " +
              message);
  error_response_.emplace(error_response(status, code, message));
  for (const RateHeaders::Field& f : ex_->rate_headers) {
    error_response_->set(beast::string_view(f.name.data(), f.name.size()),
                         beast::string_view(f.value.data(), f.value.size()));
  }
  // The connection can carry another request only if this one was read to its end.
  const bool body_read = !has_body_ || (body_parser_ && body_parser_->is_done());
  const bool keep_alive = client_keep_alive_ && body_read && !session().draining();
  error_response_->version(client_version_);
  error_response_->keep_alive(keep_alive);
  error_response_->prepare_payload();
  if (method_ == bhttp::verb::head) error_response_->body().clear();  // Content-Length stays
  response_started_ = true;
  arm(Waiting::kClient, SteadyClock::now() + client_timeout_);
  bhttp::async_write(client(), *error_response_,
                     [self = shared_from_this(), keep_alive](beast::error_code ec, size_t) {
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
  spdlog::warn("gateway: {} {} via upstream {}: {}{}", sv(in.method_string()),
               policy::target_path(sv(in.target())), upstream_.url, what,
               a.suppressed_before == 0 ? std::string()
                                        : " (" + std::to_string(a.suppressed_before) +
                                              " upstream errors not logged before this one)");
}

void ProxyExchange::drop_upstream() {
  if (!conn_) return;
  beast::error_code ignored;
  conn_->socket.shutdown(tcp::socket::shutdown_both, ignored);
  conn_->socket.close(ignored);
  conn_.reset();
}

void ProxyExchange::end(bool keep_alive) {
  waiting_ = Waiting::kNothing;
  // Every way an exchange ends comes here (the client gone, a failure
  // mid-response, a tunnel closed): what is still held goes back.
  ex_->charge.release();
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
