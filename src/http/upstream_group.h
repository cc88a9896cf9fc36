// UpstreamGroup: the servers of one upstream as the gateway sees them while
// it runs: which one the next request goes to (balance), how many requests
// each has in flight, and their passive health.
//
// - round_robin: the next server in order after the last one picked.
// - least_request: the server with the fewest requests in flight (counted
//   across all workers, from pick() to done()); a tie goes to the first in
//   the `servers` order.
// - Passive health (Upstream::fail_after > 0): `fail_after` consecutive
//   failures (connect or TLS handshake failures, 502/503/504 answers; see
//   report()) eject a server for `retry_after`. An ejected server is passed
//   over, and comes back (counted and logged once) at the first pick after
//   its time is up. When every server it could pick is ejected, the group
//   picks among them all the same: health alone never fails a request.
//   Every ejection and return is counted (sluice_upstream_ejections_total,
//   sluice_upstream_returns_total {upstream, server}) and logged once.
//
// Time is passed in (`now`), never read here, so that tests drive it.
//
// Health lives with the State: a reload starts every server healthy.
//
// Thread-safety: shared by every worker; pick(), done() and report() take
// one mutex (a few comparisons per server under it).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <boost/asio/ssl/context.hpp>

#include "observe/metrics.h"
#include "policy/upstreams.h"

namespace sluice::http {

class UpstreamGroup {
 public:
  using SteadyClock = std::chrono::steady_clock;
  static constexpr size_t kNone = static_cast<size_t>(-1);

  // What became of a request sent to a server, for its health.
  enum class Outcome {
    kSuccess,  // a response other than 502/503/504: the failure streak ends
    kFailure,  // connect or TLS failure, or 502/503/504
    kNeutral,  // anything else (a reset, a timeout, a client gone): no change
  };

  // Registers the group's counters in `registry` (null: none). Throws
  // std::runtime_error when OpenSSL refuses the TLS files (the loader
  // checked them: they changed since).
  UpstreamGroup(policy::Upstream config, observe::Registry* registry);

  const policy::Upstream& config() const { return config_; }
  // The client TLS context of the https:// servers (null when none is).
  const std::shared_ptr<boost::asio::ssl::context>& tls() const { return tls_; }
  // "http://host:port" or "https://host:port" of server `i`: the pool key.
  const std::string& key(size_t i) const { return servers_[i].key; }

  // The server for the next request, skipping those whose bit is set in
  // `tried` (a retry); kNone when every server has been tried. The server's
  // in-flight count is raised: call done() once for each pick.
  size_t pick(uint64_t tried, SteadyClock::time_point now);
  void done(size_t server);
  // What server `i` did with a request.
  void report(size_t server, Outcome outcome, SteadyClock::time_point now);

  // For tests and /metrics readers.
  uint32_t in_flight(size_t server) const;
  bool ejected(size_t server) const;

  static Outcome outcome_of(unsigned status) {
    return status == 502 || status == 503 || status == 504 ? Outcome::kFailure : Outcome::kSuccess;
  }

 private:
  struct Server {
    std::string key;
    uint32_t in_flight = 0;
    uint32_t failures = 0;  // consecutive
    bool ejected = false;
    SteadyClock::time_point ejected_until{};
    observe::Counter* ejections = nullptr;
    observe::Counter* returns = nullptr;
  };

  // Whether server `i` may take a request at `now` (returning it if its
  // ejection has run out). Called with mutex_ held.
  bool available(size_t i, SteadyClock::time_point now);
  size_t choose(uint64_t tried, SteadyClock::time_point now, bool ignore_health);

  const policy::Upstream config_;
  std::shared_ptr<boost::asio::ssl::context> tls_;
  mutable std::mutex mutex_;
  std::vector<Server> servers_;  // guarded by mutex_ (the keys are immutable)
  size_t next_ = 0;              // round_robin: where the next scan starts
};

}  // namespace sluice::http
