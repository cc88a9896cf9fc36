#include "http/h2_connection.h"

#include <nghttp2/nghttp2.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>

#include "http/h2_bridge.h"
#include "http/responses.h"

namespace sluice::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;

namespace {

constexpr std::string_view kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
constexpr uint32_t kMaxConcurrentStreams = 100;
constexpr uint32_t kHpackTableBytes = 4096;
constexpr size_t kReadBytes = 16 * 1024;
// nghttp2's output gathered into one write, at most about this much.
constexpr size_t kWriteBytes = 64 * 1024;
// Response body buffered per stream before the bridge is read again.
constexpr size_t kBodyBufferBytes = 32 * 1024;
constexpr size_t kBridgeReadBytes = 16 * 1024;
// Streams the client may reset before their answer: a budget of 100,
// refilled at 10 a second (a browser cancels a few; a flood cancels all).
constexpr double kResetBurst = 100;
constexpr double kResetsPerSecond = 10;

struct Stream {
  explicit Stream(const asio::any_io_executor& executor) : bridge(executor) {}
  int32_t id = 0;
  tcp::socket bridge;
  BridgedRequest request;
  bool too_large = false;
  bool started = false;  // bridged (or answered here)
  bool closed = false;   // closed on the HTTP/2 side
  // Request body towards the bridge; DATA bytes in it are given back to
  // the client's window once written.
  std::string to_bridge;
  std::string in_flight;
  size_t pending_data = 0;
  size_t in_flight_data = 0;
  bool bridge_writing = false;
  bool bridge_write_failed = false;
  bool request_ended = false;
  // Response from the bridge.
  beast::flat_buffer from_bridge;
  std::string body;
  size_t body_offset = 0;
  std::optional<BridgedResponseParser> parser;
  bool bridge_reading = false;
  bool submitted = false;  // HEADERS submitted
  bool body_done = false;
  bool deferred = false;
};

// A response parser for the stream's bridge: any body length (it streams),
// a response header as large as the proxy lets through.
void new_parser(Stream& s) {
  s.parser.emplace(s.body);
  s.parser->header_limit(64 * 1024);
  s.parser->body_limit(boost::none);
  s.parser->eager(true);
  if (s.request.is_head()) s.parser->skip(true);
}

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(const std::shared_ptr<Session>& session, RequestHandler& handler,
             SessionRegistry& registry)
      : session_(session),
        handler_(handler),
        registry_(registry),
        timer_(session->stream().get_executor()),
        last_read_(std::chrono::steady_clock::now()),
        reset_tokens_(kResetBurst),
        reset_refilled_(last_read_) {
    const std::shared_ptr<const State>& state = session->state();
    max_header_bytes_ = state->policy.config().server.max_header_bytes;
    idle_timeout_ = state->policy.config().server.idle_timeout;
  }
  ~Connection() {
    if (h2_ != nullptr) nghttp2_session_del(h2_);
  }

  void run();

 private:
  using Ptr = std::shared_ptr<Stream>;

  static int on_begin_headers(nghttp2_session*, const nghttp2_frame* frame, void* self);
  static int on_header(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name,
                       size_t namelen, const uint8_t* value, size_t valuelen, uint8_t, void* self);
  static int on_frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* self);
  static int on_data_chunk(nghttp2_session*, uint8_t, int32_t id, const uint8_t* data, size_t len,
                           void* self);
  static int on_stream_close(nghttp2_session*, int32_t id, uint32_t, void* self);
  static ssize_t read_body(nghttp2_session*, int32_t, uint8_t* buf, size_t length, uint32_t* flags,
                           nghttp2_data_source* source, void* self);

  Stream* find(int32_t id) {
    const auto it = streams_.find(id);
    return it == streams_.end() ? nullptr : it->second.get();
  }
  void start_stream(const Ptr& s, bool end_stream);
  void answer_here(const Ptr& s, HttpStatus status, std::string_view code,
                   std::string_view message);
  void end_request_body(const Ptr& s);
  void write_bridge(const Ptr& s);
  void read_bridge(const Ptr& s);
  void on_bridge_bytes(const Ptr& s, beast::error_code ec);
  void submit_response(const Ptr& s);
  void client_reset(int32_t id);
  void begin_drain();
  void do_read();
  void on_read(beast::error_code ec, size_t n);
  void receive(const uint8_t* data, size_t n);
  void flush();
  void arm_idle_timer();
  void finish();

  std::shared_ptr<Session> session_;
  RequestHandler& handler_;
  SessionRegistry& registry_;
  asio::steady_timer timer_;
  nghttp2_session* h2_ = nullptr;
  std::map<int32_t, Ptr> streams_;
  size_t max_header_bytes_ = 0;
  std::chrono::milliseconds idle_timeout_{0};
  std::chrono::steady_clock::time_point last_read_;
  double reset_tokens_;
  std::chrono::steady_clock::time_point reset_refilled_;
  bool rapid_reset_ = false;
  bool terminated_ = false;           // ended for rapid resets: counted once
  size_t connection_unconsumed_ = 0;  // DATA of closed streams, given back in flush()
  char in_[kReadBytes];
  std::string out_;
  bool reading_ = false;
  bool writing_ = false;
  bool done_ = false;
};

void Connection::run() {
  nghttp2_session_callbacks* callbacks = nullptr;
  nghttp2_session_callbacks_new(&callbacks);
  nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(callbacks, on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, on_data_chunk);
  nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, on_stream_close);
  nghttp2_option* option = nullptr;
  nghttp2_option_new(&option);
  // The window is given back as the bridge takes the body (write_bridge).
  nghttp2_option_set_no_auto_window_update(option, 1);
  nghttp2_option_set_max_deflate_dynamic_table_size(option, kHpackTableBytes);
  nghttp2_session_server_new2(&h2_, callbacks, this, option);
  nghttp2_option_del(option);
  nghttp2_session_callbacks_del(callbacks);
  const nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, kMaxConcurrentStreams},
      {NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, kHpackTableBytes},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE,
       static_cast<uint32_t>(std::min<size_t>(max_header_bytes_, UINT32_MAX))},
  };
  nghttp2_submit_settings(h2_, NGHTTP2_FLAG_NONE, settings, std::size(settings));
  std::weak_ptr<Connection> weak = weak_from_this();
  session_->on_drain([weak] {
    if (auto self = weak.lock()) self->begin_drain();
  });
  // The bytes the Session read: the preface and whatever followed it.
  beast::flat_buffer& buffered = session_->buffer();
  std::string first(static_cast<const char*>(buffered.data().data()), buffered.size());
  buffered.consume(buffered.size());
  receive(reinterpret_cast<const uint8_t*>(first.data()), first.size());
  if (done_) return;
  if (session_->draining()) begin_drain();
  flush();
  arm_idle_timer();
  do_read();
}

// ---------------------------------------------------------------- the client side

void Connection::do_read() {
  // Backpressure: no new input while output is being written.
  if (reading_ || writing_ || done_) return;
  reading_ = true;
  session_->stream().async_read_some(
      asio::buffer(in_, sizeof in_),
      [self = shared_from_this()](beast::error_code ec, size_t n) { self->on_read(ec, n); });
}

void Connection::on_read(beast::error_code ec, size_t n) {
  reading_ = false;
  if (done_) return;
  if (ec) return finish();  // the client left, or a timeout cancelled the read
  last_read_ = std::chrono::steady_clock::now();
  receive(reinterpret_cast<const uint8_t*>(in_), n);
  if (done_) return;
  flush();
  do_read();
}

void Connection::receive(const uint8_t* data, size_t n) {
  const ssize_t used = nghttp2_session_mem_recv(h2_, data, n);
  if (used < 0) {
    // A protocol error: nghttp2 has queued a GOAWAY; send it, then close.
    flush();
    if (!writing_) finish();
    return;
  }
  if (rapid_reset_ && !terminated_) {
    terminated_ = true;
    session_->context().metrics.http2_rapid_resets->add();
    nghttp2_session_terminate_session(h2_, NGHTTP2_ENHANCE_YOUR_CALM);
  }
}

void Connection::flush() {
  if (done_ || writing_) return;
  if (connection_unconsumed_ > 0) {
    nghttp2_session_consume_connection(h2_, connection_unconsumed_);
    connection_unconsumed_ = 0;
  }
  out_.clear();
  while (out_.size() < kWriteBytes) {
    const uint8_t* data = nullptr;
    const ssize_t n = nghttp2_session_mem_send(h2_, &data);
    if (n < 0) return finish();
    if (n == 0) break;
    out_.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
  }
  if (out_.empty()) {
    if (nghttp2_session_want_read(h2_) == 0 && nghttp2_session_want_write(h2_) == 0) finish();
    return;
  }
  writing_ = true;
  asio::async_write(session_->stream(), asio::buffer(out_),
                    [self = shared_from_this()](beast::error_code ec, size_t) {
                      self->writing_ = false;
                      if (self->done_) return;
                      if (ec) return self->finish();
                      self->flush();
                      self->do_read();
                    });
}

void Connection::arm_idle_timer() {
  timer_.expires_at(last_read_ + idle_timeout_);
  timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (ec || self->done_) return;
    const auto now = std::chrono::steady_clock::now();
    if (self->streams_.empty() && now >= self->last_read_ + self->idle_timeout_) {
      // Idle: GOAWAY, and the connection ends once it is sent.
      nghttp2_session_terminate_session(self->h2_, NGHTTP2_NO_ERROR);
      self->flush();
      if (!self->writing_) return self->finish();
    }
    if (self->streams_.empty()) return self->arm_idle_timer();
    self->last_read_ = std::max(self->last_read_, now);  // busy streams are not idle
    self->arm_idle_timer();
  });
}

void Connection::begin_drain() {
  if (done_) return;
  nghttp2_submit_goaway(h2_, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(h2_),
                        NGHTTP2_NO_ERROR, nullptr, 0);
  flush();
}

void Connection::finish() {
  if (done_) return;
  done_ = true;
  timer_.cancel();
  beast::error_code ignored;
  for (auto& [id, s] : streams_) {
    s->closed = true;
    s->bridge.close(ignored);
  }
  streams_.clear();
  // A read or write of ours still pending must not run beside the close's.
  if (reading_ || writing_) session_->stream().socket().cancel(ignored);
  session_->on_drain(nullptr);
  session_->resume(false);
}

// ---------------------------------------------------------------- nghttp2 callbacks

int Connection::on_begin_headers(nghttp2_session*, const nghttp2_frame* frame, void* user) {
  auto* self = static_cast<Connection*>(user);
  if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  auto s = std::make_shared<Stream>(self->session_->stream().get_executor());
  s->id = frame->hd.stream_id;
  self->streams_.emplace(s->id, std::move(s));
  return 0;
}

int Connection::on_header(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name,
                          size_t namelen, const uint8_t* value, size_t valuelen, uint8_t,
                          void* user) {
  auto* self = static_cast<Connection*>(user);
  if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  Stream* s = self->find(frame->hd.stream_id);
  if (s == nullptr || s->too_large) return 0;
  // Past the limit nothing more is kept: the stream is answered 431.
  if (s->request.bytes() + namelen + valuelen > self->max_header_bytes_) {
    s->too_large = true;
    s->request = BridgedRequest();
    return 0;
  }
  s->request.add(std::string_view(reinterpret_cast<const char*>(name), namelen),
                 std::string_view(reinterpret_cast<const char*>(value), valuelen));
  return 0;
}

int Connection::on_frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* user) {
  auto* self = static_cast<Connection*>(user);
  const int32_t id = frame->hd.stream_id;
  const bool end_stream = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
  switch (frame->hd.type) {
    case NGHTTP2_HEADERS: {
      const auto it = self->streams_.find(id);
      if (it == self->streams_.end()) return 0;
      if (frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
        self->start_stream(it->second, end_stream);
      } else if (end_stream) {
        self->end_request_body(it->second);  // trailers: not forwarded
      }
      return 0;
    }
    case NGHTTP2_DATA: {
      const auto it = self->streams_.find(id);
      if (it != self->streams_.end() && end_stream) self->end_request_body(it->second);
      return 0;
    }
    case NGHTTP2_RST_STREAM:
      self->client_reset(id);
      return 0;
    default:
      return 0;
  }
}

int Connection::on_data_chunk(nghttp2_session*, uint8_t, int32_t id, const uint8_t* data,
                              size_t len, void* user) {
  auto* self = static_cast<Connection*>(user);
  const auto it = self->streams_.find(id);
  if (it == self->streams_.end() || !it->second->started || it->second->bridge_write_failed ||
      !it->second->bridge.is_open()) {
    // Nobody takes it: its window is given back at once.
    nghttp2_session_consume(self->h2_, id, len);
    return 0;
  }
  Stream& s = *it->second;
  if (s.request.chunked()) {
    char size[20];
    const int n = std::snprintf(size, sizeof size, "%zx\r\n", len);
    s.to_bridge.append(size, static_cast<size_t>(n));
  }
  s.to_bridge.append(reinterpret_cast<const char*>(data), len);
  if (s.request.chunked()) s.to_bridge.append("\r\n");
  s.pending_data += len;
  self->write_bridge(it->second);
  return 0;
}

int Connection::on_stream_close(nghttp2_session*, int32_t id, uint32_t, void* user) {
  auto* self = static_cast<Connection*>(user);
  const auto it = self->streams_.find(id);
  if (it == self->streams_.end()) return 0;
  Stream& s = *it->second;
  s.closed = true;
  // DATA not yet written to the bridge will not be: its connection window
  // is given back (the stream's is gone with it).
  self->connection_unconsumed_ += s.pending_data + s.in_flight_data;
  s.pending_data = 0;
  s.in_flight_data = 0;
  beast::error_code ignored;
  s.bridge.close(ignored);  // the bridged Session sees the client leave
  self->streams_.erase(it);
  return 0;
}

ssize_t Connection::read_body(nghttp2_session*, int32_t, uint8_t* buf, size_t length,
                              uint32_t* flags, nghttp2_data_source* source, void* user) {
  auto* self = static_cast<Connection*>(user);
  auto* s = static_cast<Stream*>(source->ptr);
  const size_t available = s->body.size() - s->body_offset;
  if (available == 0) {
    if (s->body_done) {
      *flags |= NGHTTP2_DATA_FLAG_EOF;
      return 0;
    }
    s->deferred = true;
    return NGHTTP2_ERR_DEFERRED;
  }
  const size_t n = std::min(available, length);
  std::memcpy(buf, s->body.data() + s->body_offset, n);
  s->body_offset += n;
  if (s->body_offset == s->body.size()) {
    s->body.clear();
    s->body_offset = 0;
    if (s->body_done) *flags |= NGHTTP2_DATA_FLAG_EOF;
  }
  const auto it = self->streams_.find(s->id);
  if (it != self->streams_.end()) self->read_bridge(it->second);
  return static_cast<ssize_t>(n);
}

// ---------------------------------------------------------------- streams

void Connection::client_reset(int32_t id) {
  const Stream* s = find(id);
  if (s == nullptr || s->body_done || terminated_) return;  // answered: not a rapid reset
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(now - reset_refilled_).count();
  reset_refilled_ = now;
  reset_tokens_ = std::min(kResetBurst, reset_tokens_ + elapsed * kResetsPerSecond);
  if (reset_tokens_ >= 1) {
    reset_tokens_ -= 1;
    return;
  }
  rapid_reset_ = true;
}

void Connection::start_stream(const Ptr& s, bool end_stream) {
  s->started = true;
  if (rapid_reset_) return answer_here(s, HttpStatus::service_unavailable, "GOING_AWAY", "");
  if (s->too_large) {
    session_->context().metrics.rejected_header_too_large->add();
    return answer_here(
        s, HttpStatus::request_header_fields_too_large, "HEADER_TOO_LARGE",
        "the request header is larger than " + std::to_string(max_header_bytes_) + " bytes");
  }
  if (s->request.is_connect()) {
    return answer_here(s, HttpStatus::not_implemented, "NOT_IMPLEMENTED",
                       "CONNECT (and WebSocket over HTTP/2) is not served over HTTP/2");
  }
  ServerContext& context = session_->context();
  int fds[2];
  if (context.open_connections() >= context.max_connections ||
      ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) != 0) {
    nghttp2_submit_rst_stream(h2_, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_REFUSED_STREAM);
    return;
  }
  beast::error_code ec;
  s->bridge.assign(tcp::v6(), fds[0], ec);
  tcp::socket far(s->bridge.get_executor());
  far.assign(tcp::v6(), fds[1], ec);
  auto bridged =
      std::make_shared<Session>(std::move(far), ConnectionTicket(context.public_connections),
                                context, handler_, registry_, false);
  bridged->bridge(session_->peer(), session_->local_address(), session_->secure());
  bridged->start();
  s->to_bridge = s->request.head(!end_stream);
  s->request_ended = end_stream;
  new_parser(*s);
  write_bridge(s);
  read_bridge(s);
}

void Connection::end_request_body(const Ptr& s) {
  if (s->request_ended) return;
  s->request_ended = true;
  if (s->started && s->request.chunked() && !s->bridge_write_failed) {
    s->to_bridge.append("0\r\n\r\n");
    write_bridge(s);
  }
}

void Connection::answer_here(const Ptr& s, HttpStatus status, std::string_view code,
                             std::string_view message) {
  s->body = error_body(code, message);
  s->body_done = true;
  const std::string status_text = std::to_string(static_cast<unsigned>(status));
  const std::string length = std::to_string(s->body.size());
  const nghttp2_nv nv[] = {
      {(uint8_t*)":status", (uint8_t*)status_text.data(), 7, status_text.size(),
       NGHTTP2_NV_FLAG_NONE},
      {(uint8_t*)"content-type", (uint8_t*)"application/json", 12, 16, NGHTTP2_NV_FLAG_NONE},
      {(uint8_t*)"content-length", (uint8_t*)length.data(), 14, length.size(),
       NGHTTP2_NV_FLAG_NONE},
  };
  nghttp2_data_provider provider;
  provider.source.ptr = s.get();
  provider.read_callback = read_body;
  s->submitted = true;
  nghttp2_submit_response(h2_, s->id, nv, std::size(nv), &provider);
}

void Connection::write_bridge(const Ptr& s) {
  if (s->bridge_writing || s->to_bridge.empty() || s->closed) return;
  s->bridge_writing = true;
  s->in_flight.swap(s->to_bridge);
  s->to_bridge.clear();
  s->in_flight_data = s->pending_data;
  s->pending_data = 0;
  asio::async_write(s->bridge, asio::buffer(s->in_flight),
                    [self = shared_from_this(), s](beast::error_code ec, size_t) {
                      s->bridge_writing = false;
                      s->in_flight.clear();
                      const size_t written = std::exchange(s->in_flight_data, 0);
                      if (self->done_ || s->closed) return;
                      if (written > 0) nghttp2_session_consume(self->h2_, s->id, written);
                      if (ec) {
                        // The bridged Session answered without reading the
                        // body (a denial): the rest of it is dropped.
                        s->bridge_write_failed = true;
                        nghttp2_session_consume(self->h2_, s->id, s->pending_data);
                        s->pending_data = 0;
                        s->to_bridge.clear();
                      } else {
                        self->write_bridge(s);
                      }
                      self->flush();
                    });
}

void Connection::read_bridge(const Ptr& s) {
  if (s->bridge_reading || s->body_done || s->closed || !s->parser) return;
  if (s->body.size() - s->body_offset >= kBodyBufferBytes) return;
  s->bridge_reading = true;
  s->bridge.async_read_some(s->from_bridge.prepare(kBridgeReadBytes),
                            [self = shared_from_this(), s](beast::error_code ec, size_t n) {
                              s->bridge_reading = false;
                              if (self->done_ || s->closed) return;
                              s->from_bridge.commit(n);
                              self->on_bridge_bytes(s, ec);
                              self->flush();
                            });
}

void Connection::on_bridge_bytes(const Ptr& s, beast::error_code read_error) {
  beast::error_code ec;
  const size_t before = s->body.size();
  while (s->from_bridge.size() > 0 && !s->parser->is_done()) {
    const size_t used = s->parser->put(s->from_bridge.data(), ec);
    s->from_bridge.consume(used);
    if (ec == beast::http::error::need_more) {
      ec = {};
      break;
    }
    if (ec) break;
    // An interim response (100 Continue): the final one follows.
    if (s->parser->is_done() && s->parser->status() / 100 == 1) {
      new_parser(*s);
      continue;
    }
    if (used == 0) break;
  }
  if (!ec && read_error && s->parser->is_header_done() && !s->parser->is_done()) {
    s->parser->put_eof(ec);  // a body that ends with the connection
  }
  const bool failed = ec || (read_error && !s->parser->is_done());
  if (failed) {
    // The bridge closed without a whole response: the stream is reset.
    nghttp2_submit_rst_stream(h2_, NGHTTP2_FLAG_NONE, s->id,
                              s->submitted ? NGHTTP2_INTERNAL_ERROR : NGHTTP2_REFUSED_STREAM);
    s->body_done = true;
    return;
  }
  if (s->parser->is_header_done() && !s->submitted) submit_response(s);
  if (s->parser->is_done()) s->body_done = true;
  if (s->deferred && (s->body.size() > before || s->body_done)) {
    s->deferred = false;
    nghttp2_session_resume_data(h2_, s->id);
  }
  read_bridge(s);
}

void Connection::submit_response(const Ptr& s) {
  s->submitted = true;
  const std::string status = std::to_string(s->parser->status());
  std::vector<nghttp2_nv> nv;
  nv.reserve(s->parser->fields().size() + 1);
  nv.push_back(
      {(uint8_t*)":status", (uint8_t*)status.data(), 7, status.size(), NGHTTP2_NV_FLAG_NONE});
  for (const auto& [name, value] : s->parser->fields()) {
    nv.push_back({(uint8_t*)name.data(), (uint8_t*)value.data(), name.size(), value.size(),
                  NGHTTP2_NV_FLAG_NONE});
  }
  // A response with no body at all (HEAD, 204, 304, an empty one already
  // read whole) ends with its HEADERS.
  const bool no_body = s->parser->is_done() && s->body.empty();
  nghttp2_data_provider provider;
  provider.source.ptr = s.get();
  provider.read_callback = read_body;
  nghttp2_submit_response(h2_, s->id, nv.data(), nv.size(), no_body ? nullptr : &provider);
}

}  // namespace

H2Preface match_h2_preface(std::string_view bytes) {
  const size_t n = std::min(bytes.size(), kPreface.size());
  if (bytes.substr(0, n) != kPreface.substr(0, n)) return H2Preface::kNo;
  return n == kPreface.size() ? H2Preface::kWhole : H2Preface::kPart;
}

void H2Connection::start(const std::shared_ptr<Session>& session, RequestHandler& handler,
                         SessionRegistry& registry) {
  std::make_shared<Connection>(session, handler, registry)->run();
}

}  // namespace sluice::http
