// The gateway's upstreams as the config describes them: `upstream: URL` (one
// plain HTTP server, as before named upstreams existed) or `upstreams:` (named
// groups of servers, with balancing, passive health, retries and TLS), the
// top-level `upstream: NAME` as the default and `upstream: NAME` per route.
// Plain data; the loader (upstreams_loader.h) builds it, the gateway
// (http/upstream_group.h) keeps the state of each group's servers.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "config/values/values.h"

namespace sluice::policy {

// One server of an upstream: http://host[:port] or https://host[:port].
struct UpstreamServer {
  std::string url;  // as written
  config::HostPort address;
  bool tls = false;  // https://
  friend bool operator==(const UpstreamServer&, const UpstreamServer&) = default;
};

// `tls:` of an upstream: how its https:// servers are verified. Paths are
// resolved against the config file's folder; the key names are those of
// store.redis.tls.
struct UpstreamTls {
  std::string ca_file;    // "" = the system's CAs
  std::string cert_file;  // client certificate ("" = none), with key_file
  std::string key_file;
  std::string server_name;  // SNI and the name verified; "" = each server's host
  friend bool operator==(const UpstreamTls&, const UpstreamTls&) = default;
};

enum class Balance : uint8_t { kRoundRobin, kLeastRequest };

struct Upstream {
  // The name under `upstreams:`; "" for `upstream: URL` (then the metrics
  // and logs call it "default").
  std::string name;
  std::string url;                      // `upstream: URL` as written; "" for a named one
  config::HostPort address;             // the first server's
  std::string base_path;                // path prefix of `upstream: URL` ("" when none)
  std::vector<UpstreamServer> servers;  // never empty once loaded
  Balance balance = Balance::kRoundRobin;
  // Passive health: `fail_after` consecutive connect failures (TLS
  // handshakes included) or 502/503/504 answers take a server out for
  // `retry_after`. 0 = off.
  uint32_t fail_after = 0;
  std::chrono::milliseconds retry_after{10000};
  // Other servers tried after a failure that cannot have reached the
  // upstream's application (http/retry_rule.h).
  uint32_t retries = 0;
  UpstreamTls tls;
  std::chrono::milliseconds connect_timeout{1000};
  std::chrono::milliseconds timeout{30000};  // whole upstream response; 504 after it
  size_t max_idle_connections = 64;          // per worker thread and server
  friend bool operator==(const Upstream&, const Upstream&) = default;

  // How metrics and logs name it.
  std::string label() const { return name.empty() ? "default" : name; }
};

}  // namespace sluice::policy
