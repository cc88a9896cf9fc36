// Test support: a TCP relay on 127.0.0.1 that holds each new connection's
// bytes for `delay` before relaying them both ways, then relays at once: a
// Redis whose connect and TLS handshake take that long (one far away), while
// the calls on an established connection do not. Bytes are relayed as they
// are (TLS passes through).
#pragma once

#include <chrono>
#include <memory>

namespace sluice::testing {

class SlowStartProxy {
 public:
  // Relays to 127.0.0.1:target_port; listens on a free port (port()).
  SlowStartProxy(int target_port, std::chrono::milliseconds delay);
  ~SlowStartProxy();
  SlowStartProxy(const SlowStartProxy&) = delete;
  SlowStartProxy& operator=(const SlowStartProxy&) = delete;

  int port() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace sluice::testing
