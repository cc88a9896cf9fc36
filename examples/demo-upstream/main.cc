// sluice-demo-upstream: a small HTTP API to put behind the Sluice gateway in
// `make run`, the integration tests and the benchmarks.
//
//   GET/POST any path   -> 200 {"upstream":"demo","method":..,"path":..,"x_forwarded_for":..}
//   ?delay_ms=N         -> the same, answered after N ms (slow upstream, drain tests)
//   POST ...?echo=1     -> the request body echoed back (streaming tests)
//   POST .../login      -> 200 {"login":"ok"} when the body holds the password
//                          "demo" (JSON "password":"demo" or a form's
//                          password=demo), else 401 {"error":"WRONG_PASSWORD"}:
//                          a login to show count_status and block on
//   GET /ws (WebSocket) -> echoes every message back, text or binary
//
// Asio + Beast, one io_context per thread, keep-alive. Not for production.
#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

std::string json_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

// The value of `name` in a query string, or "".
std::string_view query_param(std::string_view target, std::string_view name) {
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return {};
  std::string_view query = target.substr(q + 1);
  while (!query.empty()) {
    const size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    const size_t eq = pair.find('=');
    if (pair.substr(0, eq) == name) return eq == std::string_view::npos ? "" : pair.substr(eq + 1);
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return {};
}

// GET /ws after the WebSocket handshake: every message comes back as sent.
class WebSocketEcho : public std::enable_shared_from_this<WebSocketEcho> {
 public:
  explicit WebSocketEcho(beast::tcp_stream stream) : ws_(std::move(stream)) {}

  void start(http::request<http::string_body> request) {
    beast::get_lowest_layer(ws_).expires_never();
    ws_.set_option(beast::websocket::stream_base::timeout::suggested(beast::role_type::server));
    ws_.async_accept(request, [self = shared_from_this()](beast::error_code ec) {
      if (!ec) self->do_read();
    });
  }

 private:
  void do_read() {
    ws_.async_read(buffer_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return;  // closed (a close frame, or the connection went away)
      self->ws_.text(self->ws_.got_text());
      self->ws_.async_write(self->buffer_.data(), [self](beast::error_code write_ec, size_t) {
        if (write_ec) return;
        self->buffer_.consume(self->buffer_.size());
        self->do_read();
      });
    });
  }

  beast::websocket::stream<beast::tcp_stream> ws_;
  beast::flat_buffer buffer_;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  explicit Session(tcp::socket socket)
      : stream_(std::move(socket)), timer_(stream_.get_executor()) {}

  void start() { do_read(); }

 private:
  void do_read() {
    request_ = {};
    parser_.emplace();
    parser_->body_limit(64 * 1024 * 1024);
    stream_.expires_after(std::chrono::seconds(60));
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    if (ec) return;  // closed, timed out or malformed: drop the connection
    request_ = parser_->release();
    if (beast::websocket::is_upgrade(request_) && request_.target() == "/ws") {
      std::make_shared<WebSocketEcho>(std::move(stream_))->start(std::move(request_));
      return;
    }
    int delay_ms = 0;
    const std::string_view delay = query_param(request_.target(), "delay_ms");
    std::from_chars(delay.data(), delay.data() + delay.size(), delay_ms);
    if (delay_ms > 0) {
      timer_.expires_after(std::chrono::milliseconds(delay_ms));
      timer_.async_wait([self = shared_from_this()](beast::error_code) { self->respond(); });
    } else {
      respond();
    }
  }

  // The demo's one password, in either body format a login form sends.
  static bool password_is_right(std::string_view body) {
    return body.find(R"("password":"demo")") != std::string_view::npos ||
           body.find(R"("password": "demo")") != std::string_view::npos ||
           body == "password=demo" || body.starts_with("password=demo&") ||
           body.find("&password=demo&") != std::string_view::npos ||
           body.ends_with("&password=demo");
  }

  void respond() {
    auto response =
        std::make_shared<http::response<http::string_body>>(http::status::ok, request_.version());
    response->set(http::field::server, "sluice-demo-upstream");
    const std::string_view target = request_.target();
    const std::string_view path = target.substr(0, target.find('?'));
    if (request_.method() == http::verb::post && path.ends_with("/login")) {
      response->set(http::field::content_type, "application/json");
      if (password_is_right(request_.body())) {
        response->body() = "{\"login\":\"ok\"}\n";
      } else {
        response->result(http::status::unauthorized);
        response->body() = "{\"error\":\"WRONG_PASSWORD\",\"message\":\"the password is demo\"}\n";
      }
    } else if (query_param(target, "echo") == "1") {
      response->set(http::field::content_type, "application/octet-stream");
      response->body() = std::move(request_.body());
    } else {
      response->set(http::field::content_type, "application/json");
      response->body() = R"({"upstream":"demo","method":")" +
                         json_escape(std::string(request_.method_string())) + R"(","path":")" +
                         json_escape(path) + R"(","x_forwarded_for":")" +
                         json_escape(std::string(request_["X-Forwarded-For"])) + "\"}\n";
    }
    response->keep_alive(request_.keep_alive());
    response->prepare_payload();
    http::async_write(stream_, *response,
                      [self = shared_from_this(), response](beast::error_code ec, size_t) {
                        if (ec || !response->keep_alive()) {
                          beast::error_code ignored;
                          self->stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
                          return;
                        }
                        self->do_read();
                      });
  }

  beast::tcp_stream stream_;
  asio::steady_timer timer_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::request<http::string_body> request_;
};

void accept_loop(tcp::acceptor& acceptor) {
  acceptor.async_accept([&acceptor](beast::error_code ec, tcp::socket socket) {
    if (!ec) {
      socket.set_option(tcp::no_delay(true));
      std::make_shared<Session>(std::move(socket))->start();
    }
    if (acceptor.is_open()) accept_loop(acceptor);
  });
}

int usage(int code) {
  std::fputs(
      "usage: sluice-demo-upstream [--host 127.0.0.1] [--port 3000] [--threads N]\n"
      "A demo HTTP API for the Sluice gateway. ?delay_ms=N delays the answer;\n"
      "?echo=1 echoes the request body. POST .../login answers 401 unless the body\n"
      "holds the password demo (\"password\":\"demo\" or password=demo).\n"
      "GET /ws is a WebSocket echo.\n",
      code == 0 ? stdout : stderr);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  std::string host = "127.0.0.1";
  unsigned port = 3000;
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") return usage(0);
    if (i + 1 >= argc) return usage(2);
    if (arg == "--host") {
      host = argv[++i];
    } else if (arg == "--port") {
      port = static_cast<unsigned>(std::atoi(argv[++i]));
    } else if (arg == "--threads") {
      threads = std::max(1, std::atoi(argv[++i]));
    } else {
      return usage(2);
    }
  }
  try {
    asio::io_context accept_context(1);
    const tcp::endpoint endpoint(asio::ip::make_address(host), static_cast<unsigned short>(port));
    std::vector<std::unique_ptr<asio::io_context>> contexts;
    std::vector<std::unique_ptr<tcp::acceptor>> acceptors;
    for (unsigned t = 0; t < threads; ++t) {
      contexts.push_back(std::make_unique<asio::io_context>(1));
      auto acceptor = std::make_unique<tcp::acceptor>(*contexts.back());
      acceptor->open(endpoint.protocol());
      acceptor->set_option(asio::socket_base::reuse_address(true));
      int one = 1;  // every thread accepts on the same port; the kernel spreads connections
      ::setsockopt(acceptor->native_handle(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
      acceptor->bind(endpoint);
      acceptor->listen(asio::socket_base::max_listen_connections);
      accept_loop(*acceptor);
      acceptors.push_back(std::move(acceptor));
    }
    asio::signal_set signals(*contexts.front(), SIGINT, SIGTERM);
    signals.async_wait([&](beast::error_code, int) {
      for (auto& c : contexts) c->stop();
    });
    std::fprintf(stderr, "demo upstream listening on %s:%u (%u threads)\n", host.c_str(), port,
                 threads);
    std::vector<std::thread> workers;
    for (unsigned t = 1; t < threads; ++t) workers.emplace_back([&, t] { contexts[t]->run(); });
    contexts.front()->run();
    for (auto& c : contexts) c->stop();
    for (auto& w : workers) w.join();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sluice-demo-upstream: %s\n", e.what());
    return 1;
  }
  return 0;
}
