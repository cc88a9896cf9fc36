// TLS for the integration tests (certificates: tests/tls/test_certs.h): a
// small blocking HTTPS client that verifies the server against a CA and says
// which certificate it got, and a shell command's status and output (curl).
#pragma once

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <cstdio>
#include <memory>
#include <string>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>

#include "http_client.h"

namespace sluice::test {

// Runs a shell command; its exit status and what it wrote (stdout and stderr).
struct CommandResult {
  int status = -1;
  std::string output;
};

inline CommandResult run_command(const std::string& command) {
  CommandResult r;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, p)) > 0) r.output.append(buffer, n);
  r.status = ::pclose(p);
  return r;
}

// One HTTPS connection, verified against a CA for a host name, kept open for
// several requests. Blocking, with no timeout of its own: the server's
// timeouts bound every wait in these tests.
class TlsClient {
 public:
  // Connects to 127.0.0.1:port and handshakes (SNI and verification for
  // `host`; ALPN offers http/1.1). ok() false when either failed; error() says why.
  TlsClient(uint16_t port, const std::string& ca_file, const std::string& host = "localhost",
            bool tls13_only = false, bool tls12_only = false)
      : ssl_(boost::asio::ssl::context::tls_client), stream_(io_, ssl_) {
    boost::system::error_code ec;
    ssl_.load_verify_file(ca_file, ec);
    // On the connection: the stream's SSL object took the context's settings when made.
    if (tls13_only) SSL_set_min_proto_version(stream_.native_handle(), TLS1_3_VERSION);
    if (tls12_only) SSL_set_max_proto_version(stream_.native_handle(), TLS1_2_VERSION);
    static constexpr unsigned char kAlpn[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
    SSL_set_alpn_protos(stream_.native_handle(), kAlpn, sizeof kAlpn);
    SSL_set_tlsext_host_name(stream_.native_handle(), host.c_str());
    stream_.set_verify_mode(boost::asio::ssl::verify_peer);
    stream_.set_verify_callback(boost::asio::ssl::host_name_verification(host));
    const boost::asio::ip::tcp::endpoint to(boost::asio::ip::make_address("127.0.0.1"), port);
    if (!ec) stream_.next_layer().connect(to, ec);
    if (!ec) stream_.handshake(boost::asio::ssl::stream_base::client, ec);
    error_ = ec ? ec.message() : "";
  }

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }

  // The subject CN of the certificate the server presented.
  std::string certificate_cn() {
    X509* cert = SSL_get1_peer_certificate(stream_.native_handle());
    if (cert == nullptr) return "";
    char cn[256] = {};
    X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof cn);
    X509_free(cert);
    return cn;
  }
  std::string alpn() {
    const unsigned char* p = nullptr;
    unsigned int n = 0;
    SSL_get0_alpn_selected(stream_.native_handle(), &p, &n);
    return std::string(reinterpret_cast<const char*>(p), n);
  }
  std::string protocol() { return SSL_get_version(stream_.native_handle()); }
  std::string cipher() { return SSL_get_cipher_name(stream_.native_handle()); }

  // A GET on this connection; status 0 if the connection failed.
  HttpResponse get(const std::string& target) {
    HttpResponse response;
    const std::string request =
        "GET " + target + " HTTP/1.1\r\nHost: localhost\r\nUser-Agent: tls-test\r\n\r\n";
    boost::system::error_code ec;
    boost::asio::write(stream_, boost::asio::buffer(request), ec);
    if (ec) return response;
    const size_t head = boost::asio::read_until(stream_, in_, "\r\n\r\n", ec);
    if (ec) return response;
    std::string text(static_cast<const char*>(in_.data().data()), head);
    in_.consume(head);
    response = parse_head(text);
    const size_t length = std::stoul(response.header("Content-Length").value_or("0"));
    if (in_.size() < length) {
      boost::asio::read(stream_, in_, boost::asio::transfer_exactly(length - in_.size()), ec);
    }
    response.body.assign(static_cast<const char*>(in_.data().data()), length);
    in_.consume(length);
    return response;
  }

 private:
  static HttpResponse parse_head(const std::string& text) {
    HttpResponse r;
    size_t line_end = text.find("\r\n");
    const std::string status_line = text.substr(0, line_end);
    r.status = std::atoi(status_line.c_str() + status_line.find(' ') + 1);
    size_t at = line_end + 2;
    while (at < text.size()) {
      const size_t end = text.find("\r\n", at);
      if (end == std::string::npos || end == at) break;
      const std::string line = text.substr(at, end - at);
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        size_t v = colon + 1;
        while (v < line.size() && line[v] == ' ') ++v;
        r.headers.emplace_back(line.substr(0, colon), line.substr(v));
      }
      at = end + 2;
    }
    return r;
  }

  boost::asio::io_context io_;
  boost::asio::ssl::context ssl_;
  boost::asio::ssl::stream<boost::asio::ip::tcp::socket> stream_;
  boost::asio::streambuf in_;
  std::string error_;
};

}  // namespace sluice::test
