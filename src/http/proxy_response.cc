#include <array>
#include <span>
#include <string>
#include <string_view>

#include <boost/asio/write.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/read.hpp>

#include "http/head_writer.h"
#include "http/proxy_exchange.h"
#include "http/proxy_headers.h"
#include "http/tunnel.h"

namespace sluice::http {

namespace {

// The upstream's response header may be larger than what clients may send.
constexpr std::uint32_t kMaxUpstreamHeaderBytes = 64 * 1024;

}  // namespace

// ---------------------------------------------------------------- response

void ProxyExchange::do_read_response_header() {
  response_parser_.emplace();
  response_parser_->header_limit(kMaxUpstreamHeaderBytes);
  response_parser_->body_limit(boost::none);  // streamed, never held whole
  if (method_ == bhttp::verb::head) response_parser_->skip(true);
  arm(Waiting::kUpstream, deadline_);
  bhttp::async_read_header(
      conn_->stream, conn_->buffer, *response_parser_,
      [self = shared_from_this()](beast::error_code ec, size_t) { self->on_response_header(ec); });
}

void ProxyExchange::on_response_header(beast::error_code ec) {
  if (response_parser_->got_some()) phase_ = Phase::kResponseHead;
  if (ec) return upstream_failed(ec, Stage::kReceive);
  const unsigned status = response_parser_->get().result_int();
  // An interim response (103 Early Hints; 100 Continue although Sluice never
  // forwards Expect): dropped, the final response follows on the same connection.
  if (status < 200 && status != 101) return do_read_response_header();
  ex_->upstream.responded(status);
  report_server(UpstreamGroup::outcome_of(status));
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
  if (ex_->cost) ex_->cost->on_response_header(in);

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
  response_body_bytes_ += got;
  if (ex_->cost) ex_->cost->on_body(relay(), got);
  write_response(relay(), got, done);
}

void ProxyExchange::write_response(const char* data, size_t size, bool last) {
  if (last && ex_->cost && ex_->cost->pending()) {
    // The response is complete: its cost is settled before it ends, so
    // that the client's next request sees it (http/cost_meter.h).
    return ex_->cost->settle(response_parser_->get(), [self = shared_from_this(), data, size] {
      self->write_response(data, size, true);
    });
  }
  if (last && ex_->charge.holds_slots()) {
    // The upstream is done with it: its concurrency slots go back before
    // the response ends, so the client's next request finds them free.
    return ex_->charge.release(
        [self = shared_from_this(), data, size] { self->write_response(data, size, true); });
  }
  if (phase_ < Phase::kAnswering) phase_ = Phase::kAnswering;
  const auto buffers = gather_.make(
      phase_ == Phase::kRelaying ? std::string_view() : std::string_view(response_head_),
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
  phase_ = last ? Phase::kDone : Phase::kRelaying;
  if (!last) return do_read_response_body();
  finish();
}

void ProxyExchange::finish() {
  session().log_access(response_parser_->get().result_int(), response_body_bytes_);
  // Clean: both messages complete (a response is only read once the whole
  // request went), the upstream did not ask to close, and no stray bytes
  // after the response (looks_open() checks the buffer too).
  const bool reusable = response_parser_->is_done() && response_parser_->keep_alive() && !upgrade_;
  if (reusable) {
    ++conn_->exchanges;
    shared_->pool_for(endpoint_).put(std::move(conn_), upstream_.max_idle_connections,
                                     SteadyClock::now());
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
  phase_ = Phase::kAnswering;
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

}  // namespace sluice::http
