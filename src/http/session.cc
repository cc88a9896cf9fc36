#include "http/session.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include <spdlog/spdlog.h>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address_v6.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/rfc7230.hpp>

#include "http/h2_connection.h"
#include "http/head_writer.h"
#include "http/request_checks.h"
#include "observe/denial_log.h"
#include "observe/logging.h"
#include "policy/path.h"

namespace sluice::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;

namespace {

constexpr size_t kFirstReadBytes = 4096;
// Bytes asked of the socket per read while a header is incomplete; never
// more than one past max_header_bytes in all (see continue_header()).
constexpr size_t kHeaderReadBytes = 4096;
// Lingering close: how long and how much unread input is drained after an
// error response before the socket is closed (closing with unread input makes
// the kernel send a reset, which can destroy the response in flight).
constexpr std::chrono::milliseconds kLingerTime{1000};
constexpr size_t kLingerBytes = 1024 * 1024;
constexpr size_t kLingerChunk = 4096;
// Buffers kept between requests are returned to the allocator when a large
// request or response (a dashboard page, a long header) left them bigger than this.
constexpr size_t kKeepBufferBytes = 64 * 1024;
// Beast's serialization of response<empty_body>{status::continue_, 11}.
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

const SessionLimits kAdminLimits{16 * 1024, 64 * 1024, std::chrono::milliseconds(10000),
                                 std::chrono::milliseconds(60000), 512};

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

// A TLS handshake closed unfinished for want of a place: counted, and
// logged at most once a second.
void note_handshake_dropped(ServerContext& context, size_t bound) {
  context.metrics.tls_handshakes_dropped->add();
  const observe::DenialLogGate::Admission a = context.handshake_drop_log.admit(context.clock.now());
  if (a.log) {
    spdlog::warn(
        "TLS: server.max_tls_handshakes ({}) handshakes in progress: closed the oldest "
        "unfinished one{}",
        bound,
        a.suppressed_before == 0 ? std::string()
                                 : cat({" (", std::to_string(a.suppressed_before),
                                        " more not logged before this one)"}));
  }
}

bool is_http_error(const beast::error_code& ec) {
  return ec.category() == bhttp::make_error_code(bhttp::error::bad_target).category();
}

// Feeds the bytes already in `buffer` to `parser`, as Beast's read operations
// do before reading. True when no read is needed: the header (`header_only`)
// or the whole message is parsed, or parsing failed (`ec` set). False when the
// parser needs more bytes than are buffered.
template <class Parser>
bool parse_buffered(Parser& parser, beast::flat_buffer& buffer, bool header_only,
                    beast::error_code& ec) {
  while (buffer.size() > 0) {
    const size_t used = parser.put(buffer.data(), ec);
    buffer.consume(used);
    if (ec == bhttp::error::need_more) {
      ec = {};
      return false;
    }
    if (ec) return true;
    if (header_only ? parser.is_header_done() : parser.is_done()) return true;
    if (used == 0) return false;
  }
  return header_only ? parser.is_header_done() : parser.is_done();
}

}  // namespace

Session::Session(tcp::socket socket, ConnectionTicket ticket, ServerContext& context,
                 RequestHandler& handler, SessionRegistry& registry, bool admin,
                 std::shared_ptr<asio::ssl::context> tls)
    : stream_(std::move(socket), std::move(tls)),
      timer_(stream_.get_executor()),
      context_(context),
      handler_(handler),
      registry_(registry),
      admin_(admin),
      ticket_(std::move(ticket)),
      accepted_(SteadyClock::now()) {
  beast::error_code ec;
  const tcp::endpoint remote = stream_.socket().remote_endpoint(ec);
  if (!ec) {
    peer_ = to_ip(remote.address());
    peer_text_ = peer_.text();
  }
  const tcp::endpoint local = stream_.socket().local_endpoint(ec);
  if (!ec) local_text_ = to_ip(local.address()).text();
}

void Session::bridge(const policy::IpAddress& peer, const std::string& local, bool tls) {
  peer_ = peer;
  peer_text_ = peer_.text();
  local_text_ = local;
  bridged_tls_ = tls;
}

Session::~Session() {
  leave_handshakes();
  registry_.sessions.erase(this);
}

void Session::start() {
  registry_.sessions.insert(this);
  beast::error_code ec;
  stream_.socket().set_option(tcp::no_delay(true), ec);
  set_limits();
  state_.reset();  // held only while a request is in progress
  if (context_.draining.load(std::memory_order_relaxed)) draining_ = true;
  if (stream_.is_tls()) return do_handshake();
  do_wait();
}

// The handshake counts against the first header's deadline (header_timeout
// from the accept), so a client that connects and stalls in the handshake
// holds the connection no longer than one that stalls in its header. The
// TLS session is made once the client has sent something (a connection that
// sends nothing costs what a plain one does), and then it takes one of
// server.max_tls_handshakes places, closing the oldest unfinished handshake
// of this worker if none is free.
void Session::do_handshake() {
  set_deadline(Wait::kIdle, accepted_ + limits_.header_timeout);
  stream_.socket().async_wait(tcp::socket::wait_read,
                              [self = shared_from_this()](beast::error_code ec) {
                                if (ec) return self->on_handshake(ec);
                                self->start_handshake();
                              });
}

void Session::start_handshake() {
  const auto bound = static_cast<int64_t>(limits_.max_tls_handshakes);
  if (context_.tls_handshakes.fetch_add(1, std::memory_order_relaxed) >= bound) {
    if (registry_.handshakes.empty()) {  // every place is another worker's
      context_.tls_handshakes.fetch_sub(1, std::memory_order_relaxed);
      note_handshake_dropped(context_, limits_.max_tls_handshakes);
      return close_now();
    }
    registry_.handshakes.front()->drop_handshake();
  }
  handshake_entry_ = registry_.handshakes.insert(registry_.handshakes.end(), this);
  in_handshake_ = true;
  stream_.start_tls();
  stream_.async_handshake(
      [self = shared_from_this()](beast::error_code ec) { self->on_handshake(ec); });
}

void Session::leave_handshakes() {
  if (!in_handshake_) return;
  in_handshake_ = false;
  registry_.handshakes.erase(handshake_entry_);
  context_.tls_handshakes.fetch_sub(1, std::memory_order_relaxed);
}

void Session::drop_handshake() {
  leave_handshakes();
  dropped_ = true;
  note_handshake_dropped(context_, limits_.max_tls_handshakes);
  close_now();  // the handshake completes with an error: on_handshake()
}

void Session::on_handshake(beast::error_code ec) {
  wait_ = Wait::kNone;
  leave_handshakes();
  if (dropped_) return;
  if (ec) {
    context_.metrics.tls_handshake_failed->add();
    // A client failing handshakes in a loop must not flood the log.
    const observe::DenialLogGate::Admission a =
        context_.state.load()->handshake_log->admit(context_.clock.now());
    if (a.log) {
      spdlog::info("TLS handshake with {} failed: {}{}", peer_text_, ec.message(),
                   observe::suppressed_note(a, "failed handshakes"));
    }
    return close_now();
  }
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
  limits_.max_tls_handshakes = s.max_tls_handshakes;
}

void Session::drain() {
  draining_ = true;
  if (drain_hook_) return drain_hook_();
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
  // Between requests a keep-alive connection may stay silent for the idle
  // timeout; once a byte arrives, the header must be complete within
  // header_timeout. A new connection has header_timeout from its accept for
  // its whole first header: a client that connects and sends nothing holds
  // a connection no longer than one that sends slowly.
  const SteadyClock::time_point deadline = requests_ == 0
                                               ? accepted_ + limits_.header_timeout
                                               : SteadyClock::now() + limits_.idle_timeout;
  set_deadline(Wait::kIdle, deadline);
  stream_.async_read_some(
      buffer_.prepare(kFirstReadBytes),
      [self = shared_from_this()](beast::error_code ec, size_t n) { self->on_first_bytes(ec, n); });
}

void Session::on_first_bytes(beast::error_code ec, size_t n) {
  wait_ = Wait::kNone;
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
  started_ = SteadyClock::now();
  header_deadline_ = (requests_ == 0 ? accepted_ : started_) + limits_.header_timeout;
  header_bytes_ = 0;
  set_limits();
  body_parser_.reset();
  header_parser_.emplace();
  header_parser_->header_limit(static_cast<std::uint32_t>(
      std::min<size_t>(limits_.max_header_bytes, std::numeric_limits<std::uint32_t>::max())));
  // The body limit is applied when (and if) the body is read: a proxied body
  // streams and is not bounded here.
  header_parser_->body_limit(boost::none);
  header_parser_->eager(false);
  continue_header();
}

// Parses what is buffered and reads more until the header is complete.
// Beast's header_limit bounds only the bytes not yet parsed when a read
// completes (fields parsed by earlier reads are not counted), so a header
// sent in small pieces could grow without bound: the total is counted here.
void Session::continue_header() {
  // HTTP/2 (prior knowledge, or chosen by ALPN) opens with its connection
  // preface, which no HTTP/1.x parser takes: the connection becomes HTTP/2's.
  if (requests_ == 0 && header_bytes_ == 0 && !admin_ && state_->policy.config().http2) {
    const auto data = buffer_.data();
    switch (
        match_h2_preface(std::string_view(static_cast<const char*>(data.data()), data.size()))) {
      case H2Preface::kWhole:
        phase_ = Phase::kInRequest;
        ++requests_;
        return H2Connection::start(shared_from_this(), handler_, registry_);
      case H2Preface::kPart:
        set_deadline(Wait::kRead, header_deadline_);
        stream_.async_read_some(buffer_.prepare(kHeaderReadBytes),
                                [self = shared_from_this()](beast::error_code e, size_t n) {
                                  self->on_header_bytes(e, n);
                                });
        return;
      case H2Preface::kNo:
        break;
    }
  }
  beast::error_code ec;
  const size_t buffered = buffer_.size();
  const bool finished = parse_buffered(*header_parser_, buffer_, true, ec);
  header_bytes_ += buffered - buffer_.size();
  const size_t pending = header_parser_->is_header_done() ? 0 : buffer_.size();
  if (!ec && header_bytes_ + pending > limits_.max_header_bytes) {
    ec = bhttp::error::header_limit;
  }
  // Usually the whole header came with the first bytes: no read, no timer.
  if (finished || ec) return on_header(ec);
  set_deadline(Wait::kRead, header_deadline_);
  // One byte past the limit is enough to know it is exceeded.
  const size_t room = limits_.max_header_bytes + 1 - header_bytes_ - pending;
  stream_.async_read_some(
      buffer_.prepare(std::min(room, kHeaderReadBytes)),
      [self = shared_from_this()](beast::error_code e, size_t n) { self->on_header_bytes(e, n); });
}

void Session::on_header_bytes(beast::error_code ec, size_t n) {
  wait_ = Wait::kNone;
  if (ec) {
    // The timer cancelled the read (408), the client left (end of stream:
    // closed quietly), or we are draining.
    if (ec == asio::error::eof) {
      ec = header_bytes_ + buffer_.size() == 0 ? beast::error_code(bhttp::error::end_of_stream)
                                               : beast::error_code(bhttp::error::partial_message);
    }
    return on_header(ec);
  }
  buffer_.commit(n);
  continue_header();
}

void Session::on_header(beast::error_code ec) {
  wait_ = Wait::kNone;
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
  if (std::optional<RequestProblem> problem = check_request_header(header())) {
    context_.metrics.rejected_bad_request->add();
    return reject(problem->status, problem->code, problem->message);
  }
  phase_ = Phase::kInRequest;
  ++requests_;
  header_read_ = SteadyClock::now();
  duration_ = nullptr;
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
    set_deadline(Wait::kWrite, SteadyClock::now() + limits_.header_timeout);
    asio::async_write(
        stream_, asio::buffer(kContinue.data(), kContinue.size()),
        [self = shared_from_this(), then = std::move(then)](beast::error_code ec, size_t) mutable {
          self->wait_ = Wait::kNone;
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
  body_parser_->eager(true);
  beast::error_code ec;
  if (parse_buffered(*body_parser_, buffer_, false, ec)) return on_body(ec, std::move(then));
  set_deadline(Wait::kRead, SteadyClock::now() + limits_.header_timeout);
  bhttp::async_read(
      stream_, buffer_, *body_parser_,
      [self = shared_from_this(), then = std::move(then)](beast::error_code ec, size_t) mutable {
        self->on_body(ec, std::move(then));
      });
}

void Session::on_body(beast::error_code ec, std::function<void(std::string body)> then) {
  wait_ = Wait::kNone;
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

bool Session::has_body() const {
  const RequestHeader& req = header();
  if (req.find(bhttp::field::transfer_encoding) != req.end()) return true;
  const auto length = req.find(bhttp::field::content_length);
  return length != req.end() && length->value() != "0";
}

const RequestHeader& Session::header() const {
  if (body_parser_) return body_parser_->get().base();
  return header_parser_->get().base();
}

// ---------------------------------------------------------------- the timer

void Session::set_deadline(Wait wait, SteadyClock::time_point deadline) {
  wait_ = wait;
  deadline_ = deadline;
  // A timer armed for later would miss this deadline; one armed for earlier
  // re-arms itself when it fires.
  if (!timer_armed_ || deadline < timer_expiry_) arm_timer(deadline);
}

void Session::arm_timer(SteadyClock::time_point expiry) {
  const uint64_t seq = ++timer_seq_;
  timer_armed_ = true;
  timer_expiry_ = expiry;
  timer_.expires_at(expiry);  // cancels a pending wait: its handler sees an old seq
  timer_.async_wait(
      [self = shared_from_this(), seq](beast::error_code ec) { self->on_timer(ec, seq); });
}

void Session::on_timer(beast::error_code ec, uint64_t seq) {
  if (seq != timer_seq_) return;  // superseded by a later arming
  timer_armed_ = false;
  // Cancelled (closing, draining), or nothing waited for: the next
  // set_deadline() arms it again.
  if (ec || wait_ == Wait::kNone || phase_ == Phase::kClosed) return;
  if (SteadyClock::now() < deadline_) return arm_timer(deadline_);
  const Wait expired = wait_;
  wait_ = Wait::kNone;
  if (expired == Wait::kLinger) return close_now();
  // Reading: the read completes with an error and the session answers 408.
  // Idle or writing: the operation fails and the connection closes.
  // Cancelling (not closing) the socket lets a 408 still be written.
  if (expired == Wait::kRead) timed_out_ = true;
  beast::error_code ignored;
  stream_.socket().cancel(ignored);
}

// ---------------------------------------------------------------- holding

void Session::hold(SteadyClock::time_point until, std::function<void(bool present)> then) {
  hold_ = Hold::kWaiting;
  // The hold takes the connection's one timer: no deadline runs while a
  // request is being decided, and a deadline armed for later (idle) is
  // superseded, its handler seeing an old sequence number.
  ++timer_seq_;
  timer_armed_ = false;
  timer_.expires_at(until);
  // `then` travels in the wait, not in a member: a session whose io_context
  // is destroyed with the wait pending is freed with it.
  timer_.async_wait([self = shared_from_this(), then = std::move(then)](beast::error_code) {
    const bool client_left = self->hold_ == Hold::kClientLeft;
    self->hold_ = Hold::kNone;
    if (client_left || self->phase_ != Phase::kInRequest) {
      self->context_.metrics.held_gave_up->add();
      self->close_now();
      return then(false);
    }
    beast::error_code ignored;
    self->stream_.socket().cancel(ignored);  // the watch: its handler sees the hold is over
    then(true);
  });
  // Bytes already buffered (a pipelined request) would hide an end of stream.
  if (buffer_.size() == 0) watch_while_held();
}

void Session::watch_while_held() {
  stream_.socket().async_wait(
      tcp::socket::wait_read,
      [self = shared_from_this()](beast::error_code ec) { self->on_watched(ec); });
}

void Session::on_watched(beast::error_code ec) {
  if (ec || hold_ == Hold::kNone) return;  // the turn came (cancelled), or closing
  // Readable: the client closed, or sent bytes. A peek tells which without
  // taking anything from the socket.
  char byte;
  const ssize_t n = ::recv(stream_.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return;  // bytes: held to its turn (see hold())
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
    return watch_while_held();
  hold_ = Hold::kClientLeft;  // end of stream (0) or an error such as a reset
  timer_.cancel();            // the hold's handler ends it now
}

// ---------------------------------------------------------------- writing

bool Session::on_own_thread() {
  const asio::any_io_executor executor = stream_.get_executor();
  const auto* io = executor.target<asio::io_context::executor_type>();
  return io != nullptr && io->running_in_this_thread();
}

void Session::respond(Response response) {
  asio::dispatch(stream_.get_executor(),
                 [self = shared_from_this(), r = std::move(response)]() mutable {
                   if (self->phase_ != Phase::kInRequest) return;  // already answered or closed
                   self->response_.emplace(std::move(r));
                   self->pending_ = Pending::kBeast;
                   self->write_when_body_handled();
                 });
}

void Session::respond(const Reply& reply) {
  if (!on_own_thread()) return respond(to_response(reply));
  if (phase_ != Phase::kInRequest) return;  // already answered or closed
  // The status line and fields now (the views are the caller's); the framing
  // when writing, once it is known whether the connection stays open.
  out_.clear();
  append_status_line(header().version(), static_cast<unsigned>(reply.status), {}, out_);
  append_reply_fields(reply, out_);
  reply_body_.assign(reply.body);
  reply_status_ = static_cast<unsigned>(reply.status);
  pending_ = Pending::kText;
  write_when_body_handled();
}

void Session::write_when_body_handled() {
  // Read the unused body so the connection can carry the next request.
  if (should_discard_body()) {
    return read_body([self = shared_from_this()](std::string) { self->do_write(); });
  }
  do_write();
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
  const RequestHeader& req = header();
  const unsigned version = req.version();
  // An unread body is in the way of the next request: close after this one.
  const bool keep_alive =
      client_wants_keep_alive(req) && !draining_ && !close_after_ && !body_pending();
  const bool head = req.method() == bhttp::verb::head;  // Content-Length stays, no body
  if (pending_ == Pending::kBeast) {
    out_.clear();
    append_beast_response(*response_, version, keep_alive, head, out_);
    written_status_ = response_->result_int();
    written_body_bytes_ = head ? 0 : response_->body().size();
    response_.reset();
  } else {
    append_framing(reply_status_, version, keep_alive, reply_body_.size(), out_);
    if (!head) out_.append(reply_body_);
    written_status_ = reply_status_;
    written_body_bytes_ = head ? 0 : reply_body_.size();
  }
  pending_ = Pending::kNone;
  written_keep_alive_ = keep_alive;
  set_deadline(Wait::kWrite, SteadyClock::now() + limits_.header_timeout);
  asio::async_write(
      stream_, asio::buffer(out_),
      [self = shared_from_this()](beast::error_code ec, size_t) { self->on_write(ec); });
}

void Session::on_write(beast::error_code ec) {
  wait_ = Wait::kNone;
  if (ec) return close_now();
  log_access(written_status_, written_body_bytes_);
  finish_request(written_keep_alive_);
}

bool Session::access_log_on() const {
  return !admin_ && state_ && state_->policy.config().logging.access_log;
}

void Session::log_access(unsigned status, size_t body_bytes) {
  if (!access_log_on()) return;
  const RequestHeader& req = header();
  const auto elapsed =
      std::chrono::duration_cast<std::chrono::microseconds>(SteadyClock::now() - started_);
  const beast::string_view method = req.method_string();
  // The query is left out: it may hold credentials (?api_key=...).
  const std::string_view path =
      policy::target_path(std::string_view(req.target().data(), req.target().size()));
  const AccessNote& note = access_note_;
  const std::string client = note.client ? note.client->text() : peer_text_;
  const std::string status_text = std::to_string(status);
  const std::string bytes_text = std::to_string(body_bytes);
  const std::string upstream_ms =
      note.upstream ? fmt::format("{:.3f}", static_cast<double>(note.upstream->count()) / 1000.0)
                    : std::string();
  const std::string ms = fmt::format("{:.3f}", static_cast<double>(elapsed.count()) / 1000.0);
  using Field = observe::LogField;
  constexpr Field::Kind kNumber = Field::Kind::kNumber;
  // The fields of the line, in its order, as text (logfmt) or JSON members.
  const Field fields[] = {
      {"client", client},
      {"peer", peer_text_},
      {"method", std::string_view(method.data(), method.size())},
      {"path", path},
      {"route", note.route},
      {"key", note.key},
      {"decision", note.decision},
      {"limit", note.limit},
      {"status", status_text, kNumber},
      {"bytes", bytes_text, kNumber},
      {"upstream_ms", upstream_ms, kNumber},
      {"ms", ms, kNumber},
  };
  observe::log_access(fields);
}

void Session::resume(bool keep_alive) {
  asio::dispatch(stream_.get_executor(), [self = shared_from_this(), keep_alive] {
    if (self->phase_ != Phase::kInRequest) return;
    self->finish_request(keep_alive);
  });
}

void Session::finish_request(bool keep_alive) {
  if (duration_ != nullptr) {
    duration_->observe_ns(static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now() - header_read_)
            .count()));
    duration_ = nullptr;
  }
  state_.reset();
  if (access_note_.decision != "-" || access_note_.upstream || access_note_.client) {
    access_note_.client.reset();
    access_note_.route.clear();
    access_note_.key.clear();
    access_note_.decision = "-";
    access_note_.limit.clear();
    access_note_.upstream.reset();
  }
  header_parser_.reset();
  body_parser_.reset();
  if (out_.capacity() > kKeepBufferBytes) out_ = std::string();
  if (reply_body_.capacity() > kKeepBufferBytes) reply_body_ = std::string();
  if (buffer_.size() == 0 && buffer_.capacity() > kKeepBufferBytes) buffer_.shrink_to_fit();
  if (keep_alive && !draining_) return do_wait();
  // Plain TCP with nothing unread, here or in the socket: close at once (as
  // nginx does). Unread input would make the close a reset that can destroy
  // the response in flight: then linger. A TLS peer answers our close_notify
  // with its own, which is such input: TLS always lingers.
  beast::error_code ec;
  if (!stream_.is_tls() && buffer_.size() == 0 && stream_.socket().available(ec) == 0 && !ec) {
    return close_now();
  }
  linger_close();
}

// ---------------------------------------------------------------- errors and closing

void Session::reject(HttpStatus status, std::string_view code, std::string_view message) {
  phase_ = Phase::kWriting;
  pending_ = Pending::kNone;
  response_.reset();
  const std::string body = error_body(code, message);
  out_.clear();
  append_status_line(11, static_cast<unsigned>(status), {}, out_);
  append_field("Content-Type", "application/json", out_);
  append_framing(static_cast<unsigned>(status), 11, false, body.size(), out_);
  // A client reads no content after a response to HEAD (RFC 9110 9.3.2): a
  // body would be read as the next response. Its length is still announced.
  const bool header_read = body_parser_ || (header_parser_ && header_parser_->is_header_done());
  if (!header_read || header().method() != bhttp::verb::head) out_.append(body);
  set_deadline(Wait::kWrite, SteadyClock::now() + limits_.header_timeout);
  asio::async_write(stream_, asio::buffer(out_),
                    [self = shared_from_this()](beast::error_code ec, size_t) {
                      self->wait_ = Wait::kNone;
                      if (ec) return self->close_now();
                      self->linger_close();
                    });
}

void Session::linger_close() {
  phase_ = Phase::kClosing;
  set_deadline(Wait::kLinger, SteadyClock::now() + kLingerTime);
  if (stream_.tls() != nullptr) {
    // close_notify first, so the client knows the response is whole; then
    // the same as over plain TCP.
    return stream_.async_shutdown([self = shared_from_this()](beast::error_code ec) {
      if (ec) return self->close_now();
      self->linger_tcp();
    });
  }
  linger_tcp();
}

void Session::linger_tcp() {
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  if (ec) return close_now();
  if (!linger_buffer_) linger_buffer_ = std::make_unique<char[]>(kLingerChunk);
  lingered_bytes_ = 0;
  do_linger();
}

void Session::do_linger() {
  stream_.socket().async_read_some(asio::buffer(linger_buffer_.get(), kLingerChunk),
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
  wait_ = Wait::kNone;
  timer_.cancel();
  beast::error_code ec;
  stream_.socket().close(ec);
}

}  // namespace sluice::http
