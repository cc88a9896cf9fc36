#include "http/proxy.h"

#include <string>
#include <string_view>

#include <boost/asio/write.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/rfc7230.hpp>

#include "http/proxy_exchange.h"

namespace sluice::http {

namespace {

constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

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

}  // namespace

void ProxyExchange::start() {
  started_ = SteadyClock::now();
  const RequestHeader& in = session().header();
  client_version_ = in.version();
  method_ = in.method();
  client_keep_alive_ = client_wants_keep_alive(in);
  has_body_ = session().body_pending();
  // A request with a body is never upgraded: its body would have to end
  // before the tunnel starts, and no WebSocket handshake has one.
  // Nor to an upstream with https:// servers: the tunnel relays TCP bytes,
  // not TLS records, so the request goes on without its Upgrade.
  upgrade_ = !has_body_ && group_.tls() == nullptr && wants_upgrade(in);
  if (has_body_ && client_version_ >= 11) {
    const auto expect = in.find(bhttp::field::expect);
    expect_continue_ = expect != in.end() && beast::iequals(expect->value(), "100-continue");
  }
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

// ---------------------------------------------------------------- end

void ProxyExchange::end(bool keep_alive) {
  waiting_ = Waiting::kNothing;
  // Every way an exchange ends comes here (the client gone, a failure
  // mid-response, a tunnel closed): what is still held goes back.
  // The exchange stays until the store is done: the give-back reads its
  // plan, verdict and the state's limits and route metrics, and a reload may
  // drop that state meanwhile.
  ex_->charge.release([ex = ex_] {});
  leave_server();
  if (relay_) shared_->give_relay(std::move(relay_));
  ex_->session->resume(keep_alive);
}

char* ProxyExchange::relay() {
  if (!relay_) relay_ = shared_->take_relay();
  return relay_.get();
}

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
