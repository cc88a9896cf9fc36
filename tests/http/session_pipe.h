// A Session fed a whole byte stream through a socketpair, with what it wrote
// back: shared by the session tests (session_test.cc) and the session fuzz
// target (fuzz/http_session.cc), which must drive the session the same way.
//
// The client's end is shut down for writing after the input, so every read of
// the session ends with data or the end of the stream and no timer is
// involved; the run is bounded anyway, and `closed` says whether the session
// was gone by then.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include "http/context.h"
#include "http/session.h"

namespace sluice::http::testing {

// The metrics a Session and FrontDoor write to, registered in the context's
// own registry (a server registers them in serve.cc).
inline void register_session_metrics(ServerContext& context) {
  observe::Registry& r = context.registry;
  ServerMetrics& m = context.metrics;
  m.store_latency = r.histogram("latency", "", {}, {1000});
  m.store_errors = r.counter("store_errors", "", {});
  m.rejected_bad_request = r.counter("rejected", "", {{"reason", "bad_request"}});
  m.rejected_header_too_large = r.counter("rejected", "", {{"reason", "header_too_large"}});
  m.rejected_body_too_large = r.counter("rejected", "", {{"reason", "body_too_large"}});
  m.rejected_timeout = r.counter("rejected", "", {{"reason", "timeout"}});
  m.tls_handshake_failed = r.counter("tls_handshake_failures", "", {});
  m.rejected_access_denied = r.counter("rejected", "", {{"reason", "access_denied"}});
  context.decision_sinks = {m.store_latency, m.store_errors, &context.top_denied, &context.history};
}

struct Exchange {
  std::string out;      // every byte the session wrote
  bool closed = false;  // the session was gone and its end closed within the bound
};

// `input` sent to a new session of `handler` on `context`'s public port.
inline Exchange exchange(ServerContext& context, RequestHandler& handler, std::string_view input,
                         std::chrono::milliseconds bound) {
  namespace asio = boost::asio;
  int fds[2];
  Exchange result;
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return result;
  asio::io_context io;
  // The session's socket type is TCP's; a socketpair end reads as "::" to it.
  asio::ip::tcp::socket server_end(io);
  server_end.assign(asio::ip::tcp::v6(), fds[0]);
  asio::local::stream_protocol::socket client(io);
  client.assign(asio::local::stream_protocol(), fds[1]);
  SessionRegistry registry;
  std::weak_ptr<Session> watch;
  {
    auto session = std::make_shared<Session>(std::move(server_end),
                                             ConnectionTicket(context.public_connections), context,
                                             handler, registry, false);
    watch = session;
    session->start();
  }
  asio::async_write(client, asio::buffer(input.data(), input.size()),
                    [&client](boost::system::error_code, size_t) {
                      boost::system::error_code ignored;
                      client.shutdown(asio::socket_base::shutdown_send, ignored);
                    });
  bool read_to_end = false;
  asio::async_read(client, asio::dynamic_buffer(result.out),
                   [&read_to_end](boost::system::error_code ec, size_t) {
                     read_to_end = ec == asio::error::eof;
                   });
  io.run_for(bound);
  result.closed = watch.expired() && read_to_end;
  return result;
}

}  // namespace sluice::http::testing
