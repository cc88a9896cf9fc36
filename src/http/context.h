// ServerContext: what every connection of one server shares — the current
// State, the store, the clock, metrics and the denial bookkeeping. Owned by
// Server; connections hold a reference (the server outlives them).
//
// Thread-safety: every member may be used from any thread. `state` is swapped
// atomically on reload; the other members are set at construction.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <utility>

#include "http/state.h"
#include "observe/decision_history.h"
#include "observe/denial_log.h"
#include "observe/metrics.h"
#include "observe/route_metrics.h"
#include "observe/top_keys.h"
#include "policy/lease.h"
#include "sluice/clock.h"
#include "sluice/store.h"

namespace sluice::http {

struct ServerMetrics {
  observe::Histogram* store_latency = nullptr;  // sluice_store_latency_seconds
  observe::Counter* store_errors = nullptr;     // sluice_store_errors_total
  observe::Counter* reload_success = nullptr;   // sluice_config_reloads_total{result}
  observe::Counter* reload_failure = nullptr;
  // sluice_http_rejected_total{reason}: requests refused before any decision.
  observe::Counter* rejected_bad_request = nullptr;       // malformed HTTP (400)
  observe::Counter* rejected_header_too_large = nullptr;  // 431
  observe::Counter* rejected_body_too_large = nullptr;    // 413
  observe::Counter* rejected_timeout = nullptr;           // 408 / slow client dropped
  observe::Counter* rejected_access_denied = nullptr;     // 403: the client is in access.deny
  observe::Counter* rejected_unknown_consumer = nullptr;  // 401: consumers.unknown is reject
  // sluice_connections_refused_total: closed at accept, server.max_connections reached.
  observe::Counter* connections_refused = nullptr;
  // sluice_tls_handshake_failures_total: TLS connections closed before a request.
  observe::Counter* tls_handshake_failed = nullptr;
  // Queueing (a route's `delay`): sluice_held_requests_total counts requests
  // held for their turn, sluice_held_requests_gave_up_total those whose
  // client left while held (their charge given back); the gauge
  // sluice_held_requests reads ServerContext::held_requests.
  observe::Counter* held = nullptr;
  observe::Counter* held_gave_up = nullptr;
  // sluice_held_requests_refused_total: requests a route's delay would have
  // held, answered at once because server.max_held requests were held.
  observe::Counter* held_refused = nullptr;
  // sluice_tls_handshakes_dropped_total: unfinished TLS handshakes closed to
  // make room for a new one (server.max_tls_handshakes); the gauge
  // sluice_tls_handshakes reads ServerContext::tls_handshakes.
  observe::Counter* tls_handshakes_dropped = nullptr;
  // sluice_http2_rapid_resets_total: HTTP/2 connections ended with GOAWAY
  // because the client reset too many streams before their answer.
  observe::Counter* http2_rapid_resets = nullptr;
};

// One open client connection, counted (in ServerContext::public_connections
// or admin_connections) from its accept until its Session ends (or until the hand-off to a worker
// is dropped before a Session exists, at shutdown): the count that
// server.max_connections is held to. Move-only.
class ConnectionTicket {
 public:
  explicit ConnectionTicket(std::atomic<size_t>& open) : open_(&open) {
    open_->fetch_add(1, std::memory_order_relaxed);
  }
  ConnectionTicket(ConnectionTicket&& other) noexcept
      : open_(std::exchange(other.open_, nullptr)) {}
  ConnectionTicket& operator=(ConnectionTicket&&) = delete;
  ~ConnectionTicket() {
    if (open_ != nullptr) open_->fetch_sub(1, std::memory_order_relaxed);
  }

 private:
  std::atomic<size_t>* open_;
};

// A place among the requests server.max_held lets routes' `delay` hold at
// once: taken before a request on such a route is decided, kept while the
// request is held, given back when that ends (or at once when the verdict
// holds nothing). Move-only; false when every place was taken.
class HeldPlace {
 public:
  HeldPlace() = default;
  HeldPlace(std::atomic<int64_t>& held, size_t bound) {
    if (held.fetch_add(1, std::memory_order_relaxed) < static_cast<int64_t>(bound)) {
      held_ = &held;
    } else {
      held.fetch_sub(1, std::memory_order_relaxed);
    }
  }
  HeldPlace(HeldPlace&& other) noexcept : held_(std::exchange(other.held_, nullptr)) {}
  HeldPlace& operator=(HeldPlace&& other) noexcept {
    std::swap(held_, other.held_);
    return *this;
  }
  ~HeldPlace() {
    if (held_ != nullptr) held_->fetch_sub(1, std::memory_order_relaxed);
  }
  explicit operator bool() const { return held_ != nullptr; }

 private:
  std::atomic<int64_t>* held_ = nullptr;
};

struct ServerContext {
  ServerContext(Store& store_ref, const Clock& clock_ref) : store(store_ref), clock(clock_ref) {}

  Store& store;
  const Clock& clock;
  std::atomic<std::shared_ptr<const State>> state;
  observe::Registry registry;
  ServerMetrics metrics;
  observe::TopKeys top_denied;
  // Decisions per second of the last 15 minutes, per route (/admin/history).
  observe::DecisionHistory history;
  // Where every decision also counts, whatever its door (the Envoy RLS's
  // too): the store's latency and errors, top_denied, history. Set before the first
  // State is built.
  observe::DecisionSinks decision_sinks;
  // /v1/check's concurrency leases, held until released or ended
  // (policy/lease.h); ids are this process's.
  policy::LeaseTable leases;
  std::atomic<bool> draining{false};
  // Client connections open on the public ports (listen, decision_api),
  // which server.max_connections bounds, and on the admin port.
  std::atomic<size_t> public_connections{0};
  std::atomic<size_t> admin_connections{0};
  // server.max_connections in force (policy/connection_limits.h), set
  // before the first connection.
  size_t max_connections = 0;
  // Requests held for their turn now, on every worker: the places taken
  // (HeldPlace), which server.max_held bounds.
  std::atomic<int64_t> held_requests{0};
  // TLS sessions in their handshake now, on every worker (Session), and
  // the gate of the warning logged when one is dropped to make room.
  std::atomic<int64_t> tls_handshakes{0};
  observe::DenialLogGate handshake_drop_log{1.0};
  size_t open_connections() const {
    return public_connections.load(std::memory_order_relaxed) +
           admin_connections.load(std::memory_order_relaxed);
  }
};

}  // namespace sluice::http
