// The internals of UpstreamProxy (proxy.h), shared by the files that run one
// exchange: proxy.cc (the exchange, its timer and its end), proxy_request.cc
// (connecting and sending the request upstream), proxy_response.cc (reading
// the upstream's response and relaying it to the client) and
// proxy_failure.cc (retries, the 502/504/400 answers, cleanup).
//
// Thread-safety: as UpstreamProxy, one worker io_context's thread only.
#pragma once

#include <array>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <boost/asio/buffer.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>

#include "http/forwarder.h"
#include "http/proxy_pool.h"
#include "http/responses.h"
#include "http/retry_rule.h"
#include "http/upstream_group.h"
#include "observe/denial_log.h"

namespace sluice::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using SteadyClock = std::chrono::steady_clock;

// Body bytes relayed per read/write step, in either direction. Large enough
// for one system call to move a useful amount, small enough that a thousand
// exchanges streaming at once cost 64 MiB.
inline constexpr size_t kRelayBytes = 64 * 1024;
// Relay buffers kept per worker for reuse (allocating and freeing 64 KiB per
// request costs more than the proxying itself).
inline constexpr size_t kSpareRelays = 64;
inline constexpr std::string_view kCrlf = "\r\n";
inline constexpr std::string_view kLastChunk = "0\r\n\r\n";

inline std::string_view sv(beast::string_view s) {
  return {s.data(), s.size()};
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

  // The keep-alive pool of one server (UpstreamGroup::key).
  UpstreamPool& pool_for(const std::string& key) { return pools[key]; }

  asio::io_context& io_context;
  std::unordered_map<std::string, UpstreamPool> pools;  // by server
  // Upstream failures are logged at most once a second per worker (with a
  // count of the rest): an upstream that is down under load must not flood the log.
  observe::DenialLogGate error_log{1.0};
  std::vector<std::unique_ptr<char[]>> spare_relays;
};

// ---------------------------------------------------------------- one exchange

class ProxyExchange : public std::enable_shared_from_this<ProxyExchange> {
 public:
  ProxyExchange(std::shared_ptr<GatewayExchange> exchange, std::shared_ptr<ProxyShared> shared)
      : ex_(std::move(exchange)),
        shared_(std::move(shared)),
        group_(*ex_->state->upstream_for(ex_->plan.route)),
        upstream_(group_.config()),
        retries_left_(upstream_.retries),
        client_timeout_(ex_->state->policy.config().server.header_timeout),
        timer_(shared_->io_context) {}

  ~ProxyExchange() {
    leave_server();
    if (relay_) shared_->give_relay(std::move(relay_));
  }

  void start();

 private:
  enum class Stage { kConnect, kSend, kReceive };
  // Where the exchange is, in order: each phase implies the ones before it
  // (a retry goes back to kRequestHead; an error answer jumps to kAnswering).
  enum class Phase {
    kRequestHead,       // connecting, or the request header not yet written upstream
    kRequestBody,       // the header went upstream, the body is being relayed
    kAwaitingResponse,  // the whole request went upstream, no byte of a response yet
    kResponseHead,      // a response is arriving (its header, or 1xx ones skipped)
    kAnswering,         // the client is being answered: its status is fixed
    kRelaying,          // the response header went to the client, its body follows
    kDone,              // the response went to the client whole
  };
  // Which connection the request is on: one from the pool, a new one, or the
  // new one of the one retry (retry_allowed()).
  enum class Attempt { kPooled, kNew, kRetry };
  // What the exchange timer guards (one timer per exchange, re-armed per phase).
  enum class Waiting { kNothing, kConnect, kUpstream, kClient };

  Session& session() { return *ex_->session; }
  ClientStream& client() { return ex_->session->stream(); }

  void build_request_head();
  void acquire();
  bool pick_server();
  void leave_server();
  void report_server(UpstreamGroup::Outcome outcome);
  void take_or_connect();
  void connect_new();
  void do_handshake();
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
  bool retry_elsewhere(Stage stage, bool timed_out);
  void client_failed(beast::error_code ec);
  void respond_error(HttpStatus status, std::string_view code, const std::string& message);
  void log_failure(const std::string& what);
  void drop_upstream();
  void end(bool keep_alive);
  char* relay();

  std::shared_ptr<GatewayExchange> ex_;
  std::shared_ptr<ProxyShared> shared_;
  UpstreamGroup& group_;                  // lives in ex_->state
  const policy::Upstream& upstream_;      // group_'s config
  size_t server_ = UpstreamGroup::kNone;  // the server picked (in flight there until left)
  uint64_t tried_ = 0;                    // bit i: server i was tried and failed
  uint32_t retries_left_;                 // Upstream::retries not yet spent
  bool tls_failed_ = false;               // the failure was the TLS handshake
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
  bool upgrade_ = false;          // the request asks to switch protocols (wants_upgrade)
  Phase phase_ = Phase::kRequestHead;
  Attempt attempt_ = Attempt::kNew;
  Framing request_framing_ = Framing::kNone;
  Framing response_framing_ = Framing::kNone;
  uint64_t request_bytes_written_ = 0;
  uint64_t response_body_bytes_ = 0;
  size_t first_piece_ = 0;  // body bytes read before the connection was taken

  std::unique_ptr<UpstreamConnection> conn_;
  std::string request_head_;
  std::string response_head_;
  Gather gather_;
  std::optional<bhttp::request_parser<bhttp::buffer_body>> body_parser_;
  std::optional<bhttp::response_parser<bhttp::buffer_body>> response_parser_;
  std::optional<Response> error_response_;
  std::unique_ptr<char[]> relay_;
};

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

}  // namespace sluice::http
