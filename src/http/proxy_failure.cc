#include <string>
#include <string_view>

#include <spdlog/spdlog.h>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/status.hpp>
#include <boost/beast/http/write.hpp>

#include "http/proxy_exchange.h"
#include "http/retry_rule.h"
#include "policy/path.h"

namespace sluice::http {

namespace {

bool is_parse_error(const beast::error_code& ec) {
  return ec.category() == bhttp::make_error_code(bhttp::error::bad_target).category() &&
         ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message &&
         ec != bhttp::error::need_buffer;
}
}  // namespace

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
  if (attempt_ != Attempt::kPooled || phase_ >= Phase::kResponseHead || has_body_) return false;
  if (request_bytes_written_ == 0) return true;
  return is_idempotent(method_);
}

void ProxyExchange::upstream_failed(beast::error_code ec, Stage stage) {
  const bool timed_out = upstream_timed_out_;
  const bool connect_timed_out =
      timed_out && stage == Stage::kConnect && SteadyClock::now() < deadline_;
  drop_upstream();
  if (phase_ >= Phase::kAnswering) {
    ex_->upstream.failed(observe::upstream_failure(false, timed_out, is_parse_error(ec)));
    // The status and perhaps part of the body are with the client: the only
    // honest signal left is to cut the connection short.
    log_failure("the upstream failed in the middle of a response (" +
                std::string(timed_out ? "timeout" : ec.message()) + "); client connection closed");
    return end(false);
  }
  if (!timed_out && retry_allowed()) {
    attempt_ = Attempt::kRetry;
    spdlog::debug("gateway: pooled upstream connection failed ({}); retrying once on a new one",
                  ec.message());
    request_bytes_written_ = 0;
    phase_ = Phase::kRequestHead;
    return connect_new();
  }
  const bool exchange_timed_out = timed_out && !connect_timed_out;
  // A connect (TCP or TLS) that failed or took longer than connect_timeout
  // counts against the server's health; the upstream's own timeout does not
  // (the server may be slow on this request only).
  if (stage == Stage::kConnect && !exchange_timed_out) {
    report_server(UpstreamGroup::Outcome::kFailure);
  }
  if (retry_elsewhere(stage, exchange_timed_out)) return;
  ex_->upstream.failed(tls_failed_ && !exchange_timed_out
                           ? observe::UpstreamFailure::kTls
                           : observe::upstream_failure(stage == Stage::kConnect, exchange_timed_out,
                                                       is_parse_error(ec)));
  if (timed_out && !connect_timed_out) {
    return respond_error(
        HttpStatus::gateway_timeout, "UPSTREAM_TIMEOUT",
        "the upstream did not answer within " + std::to_string(upstream_.timeout.count()) + " ms");
  }
  std::string message;
  switch (stage) {
    case Stage::kConnect:
      if (tls_failed_ && !connect_timed_out) {
        message = "the TLS handshake with the upstream failed: " + ec.message();
        break;
      }
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

// Another server of the upstream, when retry_rule.h allows it and
// `retries` are left: the failed server is not picked again.
bool ProxyExchange::retry_elsewhere(Stage stage, bool timed_out) {
  if (retries_left_ == 0 || server_ == UpstreamGroup::kNone) return false;
  const RetryFacts facts{
      stage == Stage::kConnect,   phase_ >= Phase::kResponseHead, timed_out, has_body_,
      request_bytes_written_ > 0, is_idempotent(method_)};
  if (!may_retry_elsewhere(facts)) return false;
  const std::string failed = endpoint_;
  tried_ |= uint64_t{1} << server_;
  leave_server();
  if (!pick_server()) return false;
  --retries_left_;
  spdlog::debug("gateway: upstream {} server {} failed; retrying on {}", upstream_.label(), failed,
                endpoint_);
  attempt_ = Attempt::kNew;
  request_bytes_written_ = 0;
  phase_ = Phase::kRequestHead;
  upstream_timed_out_ = false;
  tls_failed_ = false;
  take_or_connect();
  return true;
}

void ProxyExchange::client_failed(beast::error_code ec) {
  drop_upstream();
  if (is_parse_error(ec) && phase_ < Phase::kAnswering) {
    return respond_error(HttpStatus::bad_request, "BAD_REQUEST",
                         "malformed HTTP request body: " + ec.message());
  }
  // The client went away or was too slow: nobody to answer.
  end(false);
}

void ProxyExchange::respond_error(HttpStatus status, std::string_view code,
                                  const std::string& message) {
  if (ex_->charge.holds_slots()) {
    // As write_response(): the slots go back before the client learns the outcome.
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
  phase_ = Phase::kAnswering;
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
  spdlog::warn("gateway: {} {} via upstream {} ({}): {}{}", sv(in.method_string()),
               policy::target_path(sv(in.target())), upstream_.label(), endpoint_, what,
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

}  // namespace sluice::http
