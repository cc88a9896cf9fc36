// The HTTP session (src/http/session.cc) with the FrontDoor on the `listen`
// port in decision-only mode (no upstream: /v1/check and /v1/auth answered
// there, every other path decided and answered 200 or 429) on a fresh
// MemoryStore per input.
//
// The input is the byte stream a client sends: one or several requests
// (pipelined), bodies of any framing, upgrades, garbage, written through a
// socketpair as the session tests do (tests/http/session_pipe.h). No timer is
// needed: every read ends with data or the end of the stream. The run is
// bounded anyway, and a session still open after it is a finding.
//
// Asserts, beyond no crash: what the session wrote back parses as a
// sequence of HTTP/1.x responses (interim 100 Continue allowed), each final
// response framed by Content-Length (or bodiless by status), without content
// when the request was HEAD, at most one per request the stream holds, and
// nothing after a response that said Connection: close.
#include <boost/asio/buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "fuzz_check.h"
#include "http/context.h"
#include "http/front_door.h"
#include "http/state.h"
#include "policy/config_loader.h"
#include "session_pipe.h"
#include "sluice/memory_store.h"

namespace {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
using namespace sluice;

// Decision-only, both header styles, every kind of client key, a body limit
// small enough to be reached, X-Forwarded-For read from the socketpair's
// peer (which reads as "::").
constexpr std::string_view kConfig = R"(
listen: 127.0.0.1:0
headers: [legacy, draft]
client_ip:
  trusted_proxies: ["::/128"]
policies:
  login: {capacity: 3, refill_rate: 1/h}
  search: {algorithm: sliding_log, limit: 2, window: 1m}
default:
  key: ip
  limits: [{algorithm: fixed_window, limit: 4, window: 1m}]
routes:
  - match: POST /login
    key: ip+header:x-user
    limits: [login]
  - match: GET /api/users/{id}
    key: header:x-api-key
    limits: [{algorithm: gcra, capacity: 2, refill_rate: 1/s}, search]
  - match: "* /static/*"
    key: global
    limits: [{algorithm: sliding_window, limit: 3, window: 10s}]
server:
  max_header_bytes: 1KiB
  max_body_bytes: 64
)";

// The store of the current input: a fresh MemoryStore each time, behind the
// one Store& the long-lived ServerContext holds, so decisions never depend
// on earlier inputs.
class FreshStore final : public Store {
 public:
  void renew() {
    MemoryStoreOptions o;
    o.shards = 1;
    o.max_keys = 1024;
    o.seed = 1;
    inner_ = std::make_unique<MemoryStore>(o);
  }
  Status acquire(std::span<const AcquireRequest> r, Nanos now, std::span<Decision> out) override {
    return inner_->acquire(r, now, out);
  }
  Result<bool> reset(const Limit& limit, std::string_view key) override {
    return inner_->reset(limit, key);
  }
  size_t size() const override { return inner_->size(); }

 private:
  std::unique_ptr<MemoryStore> inner_;
};

struct World {
  World() : clock(Nanos{std::chrono::seconds(1'700'000'000)}), context(store, clock) {
    spdlog::set_level(spdlog::level::off);
    policy::LoadResult loaded = policy::load_config_string(kConfig, "fuzz.yaml");
    FUZZ_CHECK(loaded.config.has_value(), "the fuzz config does not load: %s",
               loaded.errors.front().text().c_str());
    http::testing::register_session_metrics(context);
    context.state.store(
        http::build_state(std::move(*loaded.config), 1, context.registry, context.decision_sinks));
  }
  FreshStore store;
  ManualClock clock;
  http::ServerContext context;
};

// A request body that is skipped, not stored: a string_body would reserve
// the announced Content-Length (up to 2^63) before any byte arrives, which
// is the harness failing, not the session.
struct SkippedBody {
  using value_type = size_t;  // bytes skipped
  struct reader {
    template <bool isRequest, class Fields>
    reader(bhttp::header<isRequest, Fields>&, value_type& skipped) : skipped_(skipped) {}
    void init(const boost::optional<std::uint64_t>&, boost::beast::error_code& ec) { ec = {}; }
    template <class ConstBufferSequence>
    size_t put(const ConstBufferSequence& buffers, boost::beast::error_code& ec) {
      ec = {};
      const size_t n = asio::buffer_size(buffers);
      skipped_ += n;
      return n;
    }
    void finish(boost::beast::error_code& ec) { ec = {}; }

   private:
    value_type& skipped_;
  };
};

// The methods of the requests in `input`, read as the session reads them
// (Beast's parser, the same header limit), up to the first it cannot read.
std::vector<bhttp::verb> request_methods(std::string_view input, size_t max_header_bytes) {
  std::vector<bhttp::verb> methods;
  boost::beast::error_code ec;
  while (!input.empty()) {
    bhttp::request_parser<SkippedBody> parser;
    parser.header_limit(static_cast<uint32_t>(max_header_bytes));
    parser.body_limit(boost::none);
    parser.eager(true);
    const size_t used = parser.put(asio::buffer(input.data(), input.size()), ec);
    if (parser.is_header_done()) methods.push_back(parser.get().method());
    if (ec || !parser.is_done()) break;
    input.remove_prefix(used);
  }
  return methods;
}

// Checks that `out` is a sequence of responses to the requests of `methods`.
void check_responses(std::string_view out, const std::vector<bhttp::verb>& methods) {
  size_t finals = 0;
  bool closed = false;
  while (!out.empty()) {
    FUZZ_CHECK(!closed, "bytes after a Connection: close response: %.*s",
               static_cast<int>(std::min<size_t>(out.size(), 200)), out.data());
    bhttp::response_parser<SkippedBody> parser;
    parser.body_limit(boost::none);
    parser.eager(true);
    const bool head = finals < methods.size() && methods[finals] == bhttp::verb::head;
    parser.skip(head);
    boost::beast::error_code ec;
    const size_t used = parser.put(asio::buffer(out.data(), out.size()), ec);
    FUZZ_CHECK(!ec && parser.is_done(), "not a whole HTTP response (%s): %.*s",
               ec.message().c_str(), static_cast<int>(std::min<size_t>(out.size(), 400)),
               out.data());
    const auto& res = parser.get();
    FUZZ_CHECK(res.version() == 11 || res.version() == 10, "HTTP version %u", res.version());
    out.remove_prefix(used);
    if (res.result_int() < 200) continue;  // 100 Continue
    ++finals;
    const bool bodiless = res.result_int() == 204 || res.result_int() == 304;
    FUZZ_CHECK(bodiless || res.has_content_length(), "a %u response without Content-Length",
               res.result_int());
    if (head) {
      FUZZ_CHECK(out.empty() || out.starts_with("HTTP/1."),
                 "a %u response to HEAD with content: %.*s", res.result_int(),
                 static_cast<int>(std::min<size_t>(out.size(), 200)), out.data());
    }
    closed = !res.keep_alive();
  }
  FUZZ_CHECK(finals <= methods.size() + 1, "%zu responses to %zu requests", finals, methods.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static World* world = new World();  // lives for the process, as a server's context
  world->store.renew();
  const std::string_view input = sluice::fuzz::text_of(data, size);

  http::FrontDoor door(world->context, http::FrontDoor::Port::kListen, nullptr);
  const http::testing::Exchange e =
      http::testing::exchange(world->context, door, input, std::chrono::seconds(5));
  const std::string& out = e.out;
  FUZZ_CHECK(e.closed, "the session did not close (%zu bytes answered)", out.size());
  check_responses(out, request_methods(input, 1024));
  return 0;
}
