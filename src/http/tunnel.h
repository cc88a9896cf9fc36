// Tunnel: the two connections of an upgraded exchange (a WebSocket after the
// upstream's 101 Switching Protocols) as one byte pipe both ways. Sluice reads
// nothing of what passes: frames, pings and the closing handshake go through
// as bytes.
//
// It ends when either side closes or fails (the other is closed too: a
// WebSocket has ended by then, its close frames went through), or when no
// byte has moved either way for `idle` (server.idle_timeout). `done` then runs
// once, with the bytes relayed each way; the client connection (TLS or not)
// stays the session's to close.
//
// Thread-safety: everything runs on the io_context of the two sockets.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "http/client_stream.h"

namespace sluice::http {

class Tunnel : public std::enable_shared_from_this<Tunnel> {
 public:
  using Done = std::function<void(uint64_t to_client, uint64_t to_upstream)>;

  // `client` belongs to the session and must outlive the tunnel (`done` is
  // where its owner may let go); `upstream` is the tunnel's.
  Tunnel(ClientStream& client, boost::asio::ip::tcp::socket upstream,
         std::chrono::milliseconds idle, Done done);

  // `to_upstream`: bytes the client sent after its request; `to_client`:
  // bytes the upstream sent after its 101. Each goes first its way.
  void start(std::string to_upstream, std::string to_client);

 private:
  static constexpr size_t kBufferBytes = 16 * 1024;
  struct Direction {
    ClientStream* from;
    ClientStream* to;
    std::string pending;  // written before the first read
    std::unique_ptr<char[]> buffer{new char[kBufferBytes]};
    uint64_t bytes = 0;
  };

  void read(Direction& d);
  void write(Direction& d, const char* data, size_t size);
  void arm_idle();
  void close();
  void settle();  // runs `done` once nothing is pending

  ClientStream upstream_;  // plain: Sluice speaks HTTP to its upstream
  Direction up_;           // client -> upstream
  Direction down_;         // upstream -> client
  boost::asio::steady_timer idle_timer_;
  const std::chrono::milliseconds idle_;
  std::chrono::steady_clock::time_point last_activity_;
  Done done_;
  int pending_ = 0;  // operations in flight (reads, writes, the idle wait)
  bool closed_ = false;
};

}  // namespace sluice::http
