#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/read.hpp>

#include "http/drained_reads.h"
#include "http/head_writer.h"
#include "http/proxy_exchange.h"
#include "http/proxy_headers.h"
#include "http/request_checks.h"
#include "policy/ip.h"

namespace sluice::http {

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
          session().secure()},
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

// ---------------------------------------------------------------- connecting

void ProxyExchange::acquire() {
  const auto now = SteadyClock::now();
  deadline_ = now + upstream_.timeout;
  ex_->upstream.began(now);
  // An upgrade takes its own connection: it becomes the tunnel, never pooled.
  if (upgrade_) return connect_new();
  conn_ = shared_->pool.take(endpoint_, now);
  if (conn_) {
    attempt_ = Attempt::kPooled;
    return write_first_piece();
  }
  connect_new();
}

void ProxyExchange::connect_new() {
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
  const auto buffers = gather_.make(
      phase_ != Phase::kRequestHead ? std::string_view() : std::string_view(request_head_),
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
  phase_ = Phase::kRequestBody;
  if (!last) return do_read_request_body();
  phase_ = Phase::kAwaitingResponse;
  do_read_response_header();
}

}  // namespace sluice::http
