// WebSockets through the gateway (the real sluice binary): the handshake is
// decided and charged like any request, then the two connections are one
// byte tunnel. The upstream is the demo's WebSocket echo (GET /ws); the
// client is Beast's WebSocket client.
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>

#include <memory>
#include <string>

#include "gateway_support.h"
#include "test_support.h"
#include "tls/test_certs.h"

namespace sluice::test {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;

std::string ws_yaml(const std::string& upstream_url, const std::string& idle_timeout = "60s") {
  return "upstream: " + upstream_url + "\nserver: {threads: 1, idle_timeout: " + idle_timeout +
         R"(}
headers: [legacy]
logging: {access_log: true}
routes:
  - match: GET /ws
    limits: [{capacity: 2, refill_rate: 1/h}]
)";
}

// A WebSocket client connected through `server` to `target`; the handshake's
// response in `response`. Every blocking call is bounded by a 10 s timeout.
class WsClient {
 public:
  WsClient(const SluiceProcess& server, const std::string& target) : ws_(io_) {
    auto& stream = beast::get_lowest_layer(ws_);
    stream.expires_after(std::chrono::seconds(10));
    stream.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), server.port()));
    ws_.handshake(response, "127.0.0.1:" + std::to_string(server.port()), target, error);
  }

  std::string echo(const std::string& message, bool binary = false) {
    beast::get_lowest_layer(ws_).expires_after(std::chrono::seconds(10));
    ws_.binary(binary);
    ws_.write(asio::buffer(message));
    beast::flat_buffer buffer;
    ws_.read(buffer);
    EXPECT_EQ(ws_.got_binary(), binary);
    return beast::buffers_to_string(buffer.data());
  }

  // Reads until the connection ends; the error it ended with.
  beast::error_code read_until_closed() {
    beast::get_lowest_layer(ws_).expires_after(std::chrono::seconds(10));
    beast::flat_buffer buffer;
    beast::error_code ec;
    ws_.read(buffer, ec);
    return ec;
  }

  void close() { ws_.close(websocket::close_code::normal); }

  websocket::response_type response;
  beast::error_code error;

 private:
  asio::io_context io_;
  websocket::stream<beast::tcp_stream> ws_;
};

TEST(WebSocket, FramesGoBothWaysThroughTheGatewayAndTheHandshakeIsCharged) {
  DemoUpstream upstream(SLUICE_BINARY);
  ASSERT_NE(upstream.port(), 0);
  auto server = SluiceProcess::start(ws_yaml(upstream.url()));
  ASSERT_NE(server, nullptr);
  {
    WsClient ws(*server, "/ws");
    ASSERT_FALSE(ws.error) << ws.error.message();
    EXPECT_EQ(ws.response.result_int(), 101);
    EXPECT_EQ(ws.response["X-RateLimit-Remaining"], "1");
    EXPECT_EQ(ws.echo("hello"), "hello");
    const std::string big(200 * 1024, 'x');  // larger than one relay buffer
    EXPECT_EQ(ws.echo(big, true), big);
    EXPECT_EQ(ws.echo("again"), "again");
    ws.close();
  }
  {
    WsClient ws(*server, "/ws");
    ASSERT_FALSE(ws.error) << ws.error.message();
    EXPECT_EQ(ws.response["X-RateLimit-Remaining"], "0");
    EXPECT_EQ(ws.echo("second"), "second");
    ws.close();
  }
  // The third handshake is over the limit: the usual 429, no upgrade.
  WsClient denied(*server, "/ws");
  EXPECT_EQ(denied.error, websocket::error::upgrade_declined);
  EXPECT_EQ(denied.response.result_int(), 429);
  // One token an hour: the hour since the last handshake, less the moments since.
  const int retry_after = std::stoi(std::string(denied.response["Retry-After"]));
  EXPECT_GT(retry_after, 1800);
  EXPECT_LE(retry_after, 3600);
  EXPECT_EQ(denied.response.body(), rate_limited_body("GET /ws"));
  // Each tunnel is logged once it ends, as a 101.
  const std::string log = server->wait_for_access_log({"status=101", "status=429"});
  EXPECT_NE(
      log.find("path=/ws route=\"GET /ws\" key=ip:127.0.0.1 decision=allowed limit=- status=101"),
      std::string::npos)
      << log;
}

TEST(WebSocket, AnIdleTunnelIsClosedAfterTheIdleTimeout) {
  DemoUpstream upstream(SLUICE_BINARY);
  ASSERT_NE(upstream.port(), 0);
  auto server = SluiceProcess::start(ws_yaml(upstream.url(), "300ms"));
  ASSERT_NE(server, nullptr);
  WsClient ws(*server, "/ws");
  ASSERT_FALSE(ws.error) << ws.error.message();
  EXPECT_EQ(ws.echo("still here"), "still here");
  // Nothing moves: the gateway closes both sides (well before the client's
  // own 10 s bound, which would end the read with `timeout`).
  const beast::error_code ec = ws.read_until_closed();
  EXPECT_TRUE(ec == beast::http::error::end_of_stream || ec == asio::error::eof ||
              ec == asio::error::connection_reset)
      << ec.message();
}

// The request the upstream gets: an upgrade asked of it anew; h2c never.
TEST(WebSocket, TheUpgradeIsAskedOfTheUpstreamButH2cIsNot) {
  TestUpstream upstream;
  ASSERT_NE(upstream.port(), 0);
  auto server = SluiceProcess::start("upstream: " + upstream.url() + "\nserver: {threads: 1}\n");
  ASSERT_NE(server, nullptr);
  auto c = server->connect();
  // The test upstream answers 200, not 101: a declined upgrade is an
  // ordinary response.
  EXPECT_EQ(c->request("GET", "/ws",
                       {{"Connection", "Upgrade"},
                        {"Upgrade", "websocket"},
                        {"Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="},
                        {"Sec-WebSocket-Version", "13"}})
                .status,
            200);
  auto c2 = server->connect();
  EXPECT_EQ(c2->request("GET", "/h2",
                        {{"Connection", "Upgrade, HTTP2-Settings"},
                         {"Upgrade", "h2c"},
                         {"HTTP2-Settings", "AAMAAABkAAQCAAAAAAIAAAAA"}})
                .status,
            200);
  const std::vector<std::string> heads = upstream.request_heads();
  ASSERT_EQ(heads.size(), 2u);
  EXPECT_NE(heads[0].find("\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"), std::string::npos)
      << heads[0];
  EXPECT_NE(heads[0].find("\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"), std::string::npos)
      << heads[0];
  EXPECT_EQ(heads[1].find("Upgrade"), std::string::npos) << heads[1];
  EXPECT_EQ(heads[1].find("HTTP2-Settings"), std::string::npos) << heads[1];
}

TEST(WebSocket, FramesGoBothWaysOverTls) {
  const testing::TestCerts certs;
  ASSERT_TRUE(certs.ok()) << certs.error();
  DemoUpstream upstream(SLUICE_BINARY);
  ASSERT_NE(upstream.port(), 0);
  auto server =
      SluiceProcess::start("tls: {cert: " + certs.server_cert() + ", key: " + certs.server_key() +
                           "}\n" + ws_yaml(upstream.url()));
  ASSERT_NE(server, nullptr);

  asio::io_context io;
  asio::ssl::context tls(asio::ssl::context::tls_client);
  tls.load_verify_file(certs.ca());
  websocket::stream<beast::ssl_stream<beast::tcp_stream>> ws(io, tls);
  beast::get_lowest_layer(ws).expires_after(std::chrono::seconds(10));
  beast::get_lowest_layer(ws).connect(
      tcp::endpoint(asio::ip::make_address("127.0.0.1"), server->port()));
  ws.next_layer().set_verify_mode(asio::ssl::verify_peer);
  ws.next_layer().set_verify_callback(asio::ssl::host_name_verification("localhost"));
  SSL_set_tlsext_host_name(ws.next_layer().native_handle(), "localhost");
  ws.next_layer().handshake(asio::ssl::stream_base::client);
  websocket::response_type response;
  ws.handshake(response, "localhost", "/ws");
  EXPECT_EQ(response.result_int(), 101);
  EXPECT_EQ(response["X-RateLimit-Remaining"], "1");
  for (const std::string& message : {std::string("hello"), std::string(200 * 1024, 'x')}) {
    ws.write(asio::buffer(message));
    beast::flat_buffer buffer;
    ws.read(buffer);
    EXPECT_EQ(beast::buffers_to_string(buffer.data()), message);
  }
  ws.close(websocket::close_code::normal);
  EXPECT_NE(server->wait_for_access_log({"status=101"}).find("path=/ws"), std::string::npos);
}

}  // namespace
}  // namespace sluice::test
