#include "http/session.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include <spdlog/spdlog.h>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/address_v6.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/rfc7230.hpp>
#include <boost/beast/http/write.hpp>

#include "observe/logging.h"

namespace sluice::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;

namespace {

constexpr size_t kFirstReadBytes = 4096;
// Lingering close: how long and how much unread input is drained after an
// error response before the socket is closed (closing with unread input makes
// the kernel send a reset, which can destroy the response in flight).
constexpr std::chrono::milliseconds kLingerTime{1000};
constexpr size_t kLingerBytes = 1024 * 1024;
constexpr size_t kLingerChunk = 4096;

const SessionLimits kAdminLimits{16 * 1024, 64 * 1024, std::chrono::milliseconds(10000),
                                 std::chrono::milliseconds(60000)};

policy::IpAddress to_ip(const asio::ip::address& address) {
  policy::IpAddress ip;
  const asio::ip::address_v6 v6 =
      address.is_v4() ? asio::ip::make_address_v6(asio::ip::v4_mapped, address.to_v4())
                      : address.to_v6();
  const asio::ip::address_v6::bytes_type bytes = v6.to_bytes();
  std::memcpy(ip.bytes, bytes.data(), sizeof ip.bytes);
  return ip;
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

bool is_http_error(const beast::error_code& ec) {
  return ec.category() == bhttp::make_error_code(bhttp::error::bad_target).category();
}

}  // namespace

Session::Session(tcp::socket socket, ServerContext& context, RequestHandler& handler,
                 SessionRegistry& registry, bool admin)
    : stream_(std::move(socket)),
      timer_(stream_.get_executor()),
      context_(context),
      handler_(handler),
      registry_(registry),
      admin_(admin) {
  context_.open_connections.fetch_add(1, std::memory_order_relaxed);
  beast::error_code ec;
  const tcp::endpoint remote = stream_.socket().remote_endpoint(ec);
  if (!ec) {
    peer_ = to_ip(remote.address());
    peer_text_ = peer_.text();
  }
}

Session::~Session() {
  registry_.sessions.erase(this);
  context_.open_connections.fetch_sub(1, std::memory_order_relaxed);
}

void Session::start() {
  registry_.sessions.insert(this);
  beast::error_code ec;
  stream_.socket().set_option(tcp::no_delay(true), ec);
  set_limits();
  state_.reset();  // held only while a request is in progress
  if (context_.draining.load(std::memory_order_relaxed)) draining_ = true;
  do_wait();
}

void Session::set_limits() {
  if (admin_) {
    limits_ = kAdminLimits;
    return;
  }
  state_ = context_.state.load();
  const policy::ServerLimits& s = state_->policy.config().server;
  limits_.max_header_bytes = s.max_header_bytes;
  limits_.max_body_bytes = s.max_body_bytes;
  limits_.header_timeout = s.header_timeout;
  limits_.idle_timeout = s.idle_timeout;
}

void Session::drain() {
  draining_ = true;
  // A connection between requests (or in the middle of sending a header) has
  // nothing in flight: close it. One whose header is read finishes its request.
  if (phase_ == Phase::kIdle || phase_ == Phase::kReadingHeader) {
    beast::error_code ec;
    stream_.socket().cancel(ec);
    timer_.cancel();
  }
}

// ---------------------------------------------------------------- reading

void Session::do_wait() {
  phase_ = Phase::kIdle;
  if (draining_) return close_now();
  if (buffer_.size() > 0) return do_read_header();  // a pipelined request is already here
  // Waiting for the first byte of a request is bounded by the idle timeout;
  // once it arrives, the header must be complete within header_timeout.
  stream_.expires_after(limits_.idle_timeout);
  stream_.async_read_some(
      buffer_.prepare(kFirstReadBytes),
      [self = shared_from_this()](beast::error_code ec, size_t n) { self->on_first_bytes(ec, n); });
}

void Session::on_first_bytes(beast::error_code ec, size_t n) {
  stream_.expires_never();
  if (ec) return close_now();  // idle timeout, client closed, or draining
  buffer_.commit(n);
  if (draining_) return close_now();
  do_read_header();
}

void Session::do_read_header() {
  phase_ = Phase::kReadingHeader;
  timed_out_ = false;
  body_read_ = false;
  close_after_ = false;
  started_ = std::chrono::steady_clock::now();
  set_limits();
  body_parser_.reset();
  header_parser_.emplace();
  header_parser_->header_limit(static_cast<std::uint32_t>(
      std::min<size_t>(limits_.max_header_bytes, std::numeric_limits<std::uint32_t>::max())));
  // The body limit is applied when (and if) the body is read: a proxied body
  // streams and is not bounded here.
  header_parser_->body_limit(boost::none);
  arm_timer();
  reading_ = true;
  bhttp::async_read_header(
      stream_, buffer_, *header_parser_,
      [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
}

void Session::on_header(beast::error_code ec) {
  timer_.cancel();
  reading_ = false;
  if (ec) {
    if (timed_out_) {
      context_.metrics.rejected_timeout->add();
      return reject(HttpStatus::request_timeout, "REQUEST_TIMEOUT",
                    "the request header was not received in time");
    }
    if (ec == bhttp::error::header_limit) {
      context_.metrics.rejected_header_too_large->add();
      return reject(HttpStatus::request_header_fields_too_large, "HEADER_TOO_LARGE",
                    cat({"the request header is larger than ",
                         std::to_string(limits_.max_header_bytes), " bytes"}));
    }
    if (ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message ||
        !is_http_error(ec)) {
      return close_now();  // the client went away, or we are draining
    }
    context_.metrics.rejected_bad_request->add();
    return reject(HttpStatus::bad_request, "BAD_REQUEST",
                  cat({"malformed HTTP request: ", ec.message()}));
  }
  phase_ = Phase::kInRequest;
  handler_.on_header(shared_from_this());
}

bool Session::body_pending() const {
  if (body_read_) return false;
  return header_parser_ && !header_parser_->is_done();
}

void Session::read_body(std::function<void(std::string body)> then) {
  if (!body_pending()) return then(std::string());
  const boost::optional<std::uint64_t> length = header_parser_->content_length();
  if (length && *length > limits_.max_body_bytes) {
    context_.metrics.rejected_body_too_large->add();
    return reject(HttpStatus::payload_too_large, "BODY_TOO_LARGE",
                  cat({"the request body is larger than ", std::to_string(limits_.max_body_bytes),
                       " bytes"}));
  }
  body_read_ = true;
  // `then` travels inside the pending operation rather than in a member: a
  // callback that holds the session must not keep it alive by itself if the
  // read never completes (io_context destroyed at shutdown).
  const auto expect = header_parser_->get().find(bhttp::field::expect);
  if (expect != header_parser_->get().end() && beast::iequals(expect->value(), "100-continue")) {
    auto cont = std::make_shared<bhttp::response<bhttp::empty_body>>(bhttp::status::continue_, 11);
    stream_.expires_after(limits_.header_timeout);
    bhttp::async_write(stream_, *cont,
                       [self = shared_from_this(), cont, then = std::move(then)](
                           beast::error_code ec, size_t) mutable {
                         self->stream_.expires_never();
                         if (ec) return self->close_now();
                         self->do_read_body(std::move(then));
                       });
    return;
  }
  do_read_body(std::move(then));
}

void Session::do_read_body(std::function<void(std::string body)> then) {
  // Continue parsing the same message with a body: the header is carried over.
  body_parser_.emplace(std::move(*header_parser_));
  header_parser_.reset();
  body_parser_->body_limit(limits_.max_body_bytes);
  arm_timer();
  reading_ = true;
  bhttp::async_read(
      stream_, buffer_, *body_parser_,
      [self = shared_from_this(), then = std::move(then)](beast::error_code ec, size_t) mutable {
        self->on_body(ec, std::move(then));
      });
}

void Session::on_body(beast::error_code ec, std::function<void(std::string body)> then) {
  timer_.cancel();
  reading_ = false;
  if (ec) {
    if (timed_out_) {
      context_.metrics.rejected_timeout->add();
      return reject(HttpStatus::request_timeout, "REQUEST_TIMEOUT",
                    "the request body was not received in time");
    }
    if (ec == bhttp::error::body_limit) {
      context_.metrics.rejected_body_too_large->add();
      return reject(HttpStatus::payload_too_large, "BODY_TOO_LARGE",
                    cat({"the request body is larger than ", std::to_string(limits_.max_body_bytes),
                         " bytes"}));
    }
    if (ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message ||
        !is_http_error(ec)) {
      return close_now();
    }
    context_.metrics.rejected_bad_request->add();
    return reject(HttpStatus::bad_request, "BAD_REQUEST",
                  cat({"malformed HTTP request body: ", ec.message()}));
  }
  then(std::move(body_parser_->get().body()));
}

const RequestHeader& Session::header() const {
  if (body_parser_) return body_parser_->get().base();
  return header_parser_->get().base();
}

// ---------------------------------------------------------------- timers

void Session::arm_timer() {
  const uint64_t seq = ++timer_seq_;
  timer_.expires_after(limits_.header_timeout);
  timer_.async_wait(
      [self = shared_from_this(), seq](beast::error_code ec) { self->on_timer(ec, seq); });
}

void Session::on_timer(beast::error_code ec, uint64_t seq) {
  // A cancelled timer, or one whose wait completed just before it was
  // cancelled (its handler still runs): only the current arming counts.
  if (ec || seq != timer_seq_) return;
  if (!reading_) return;
  timed_out_ = true;
  // Cancelling (not closing) the socket lets the read complete with an error
  // while the connection stays usable for the 408.
  beast::error_code ignored;
  stream_.socket().cancel(ignored);
}

// ---------------------------------------------------------------- writing

void Session::respond(Response response) {
  asio::dispatch(stream_.get_executor(),
                 [self = shared_from_this(), r = std::move(response)]() mutable {
                   if (self->phase_ != Phase::kInRequest) return;  // already answered or closed
                   if (self->should_discard_body()) {
                     // Read the unused body so the connection can carry the next request.
                     auto pending = std::make_shared<Response>(std::move(r));
                     return self->read_body([self, pending](std::string) {
                       self->response_.emplace(std::move(*pending));
                       self->do_write();
                     });
                   }
                   self->response_.emplace(std::move(r));
                   self->do_write();
                 });
}

bool Session::should_discard_body() const {
  // A small body of known length is read and dropped; a large or chunked one,
  // or one the client has not sent yet (Expect: 100-continue), is not worth
  // reading: the connection closes after the response instead.
  if (!body_pending() || draining_) return false;
  const boost::optional<std::uint64_t> length = header_parser_->content_length();
  if (!length || *length > limits_.max_body_bytes) return false;
  const auto expect = header_parser_->get().find(bhttp::field::expect);
  return expect == header_parser_->get().end();
}

void Session::do_write() {
  phase_ = Phase::kWriting;
  Response& res = *response_;
  const RequestHeader& req = header();
  res.version(req.version());
  // An unread body is in the way of the next request: close after this one.
  const bool keep_alive =
      client_wants_keep_alive(req) && !draining_ && !close_after_ && !body_pending();
  res.keep_alive(keep_alive);
  res.prepare_payload();
  if (req.method() == bhttp::verb::head) res.body().clear();  // Content-Length stays
  stream_.expires_after(limits_.header_timeout);
  bhttp::async_write(stream_, res, [self = shared_from_this()](beast::error_code ec, size_t n) {
    self->on_write(ec, n);
  });
}

void Session::on_write(beast::error_code ec, size_t) {
  stream_.expires_never();
  if (ec) return close_now();
  const bool keep_alive = response_->keep_alive();
  log_access(response_->result_int(), response_->body().size());
  response_.reset();
  finish_request(keep_alive);
}

void Session::log_access(unsigned status, size_t body_bytes) {
  if (admin_ || !state_ || !state_->policy.config().logging.access_log) return;
  const RequestHeader& req = header();
  const auto elapsed = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now() - started_);
  const beast::string_view method = req.method_string();
  const beast::string_view target = req.target();
  observe::access_logger().info("{} \"{} {}\" {} {} {:.3f}ms", peer_text_,
                                std::string_view(method.data(), method.size()),
                                std::string_view(target.data(), target.size()), status, body_bytes,
                                static_cast<double>(elapsed.count()) / 1000.0);
}

void Session::resume(bool keep_alive) {
  asio::dispatch(stream_.get_executor(), [self = shared_from_this(), keep_alive] {
    if (self->phase_ != Phase::kInRequest) return;
    self->finish_request(keep_alive);
  });
}

void Session::finish_request(bool keep_alive) {
  state_.reset();
  header_parser_.reset();
  body_parser_.reset();
  if (keep_alive && !draining_) return do_wait();
  linger_close();
}

// ---------------------------------------------------------------- errors and closing

void Session::reject(HttpStatus status, std::string_view code, std::string_view message) {
  phase_ = Phase::kWriting;
  response_.emplace(error_response(status, code, message));
  response_->version(11);
  response_->keep_alive(false);
  response_->prepare_payload();
  stream_.expires_after(limits_.header_timeout);
  bhttp::async_write(stream_, *response_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       self->stream_.expires_never();
                       self->response_.reset();
                       if (ec) return self->close_now();
                       self->linger_close();
                     });
}

void Session::linger_close() {
  phase_ = Phase::kClosing;
  timer_.cancel();
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  if (ec) return close_now();
  linger_buffer_ = std::make_unique<char[]>(kLingerChunk);
  lingered_bytes_ = 0;
  stream_.expires_after(kLingerTime);
  do_linger();
}

void Session::do_linger() {
  stream_.async_read_some(asio::buffer(linger_buffer_.get(), kLingerChunk),
                          [self = shared_from_this()](beast::error_code ec, size_t n) {
                            self->lingered_bytes_ += n;
                            if (ec || self->lingered_bytes_ > kLingerBytes) {
                              return self->close_now();
                            }
                            self->do_linger();
                          });
}

void Session::close_now() {
  phase_ = Phase::kClosed;
  timer_.cancel();
  beast::error_code ec;
  stream_.socket().close(ec);
}

}  // namespace sluice::http
