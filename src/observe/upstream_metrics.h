// The gateway's upstream, seen per route: its responses by status class,
// its failures by reason and the time it took to answer
// (sluice_upstream_responses_total, sluice_upstream_failures_total,
// sluice_upstream_duration_seconds). The series are registered at config
// load for every route of a config with `upstream` (zero before any
// traffic); the proxy records one exchange through an UpstreamRecorder.
//
// What counts (docs/ARCHITECTURE.md, "Metrics"):
// - a response: the upstream's final response header (200-599; a 1xx,
//   101 included, is not counted), and the time from the start of the
//   upstream exchange (taking a pooled connection or connecting) to it;
// - a failure: the exchange ended without a response (connect: refused,
//   unreachable, connect_timeout; timeout: upstream.timeout passed, the
//   client got 504; reset: the upstream closed or reset the connection;
//   bad_response: the response could not be parsed; tls: the TLS handshake
//   with an https:// server failed), or a response's body
//   broke off after its header was counted. A pooled connection that fails
//   and is retried on a fresh one counts as the retry ends.
//
// Thread-safety: the series are immutable once made; a recorder belongs to
// one exchange (one thread at a time). Recording is relaxed atomic
// increments, no lock.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "observe/metrics.h"

namespace sluice::observe {

enum class UpstreamFailure : uint8_t { kConnect, kTimeout, kReset, kBadResponse, kTls };

// The reason of a failed exchange: `timed_out` when upstream.timeout passed
// (whatever the step), else `connecting` for a failed connect (connect_timeout
// included), else `malformed` for a response that could not be parsed, else
// a connection the upstream closed or reset.
UpstreamFailure upstream_failure(bool connecting, bool timed_out, bool malformed);

// The upstream series of one route. Null pointers: none registered (a
// config without `upstream`, a named policy).
struct UpstreamSeries {
  std::array<Counter*, 4> responses{};  // by status class: 2xx, 3xx, 4xx, 5xx
  std::array<Counter*, 5> failures{};   // by UpstreamFailure
  Histogram* duration = nullptr;
};

// Registers (or finds again, after a reload) the series of `route`.
UpstreamSeries make_upstream_series(Registry& registry, const std::string& route);

// The record of one proxied exchange. A default-made one records nothing.
class UpstreamRecorder {
 public:
  using SteadyClock = std::chrono::steady_clock;
  UpstreamRecorder() = default;
  explicit UpstreamRecorder(const UpstreamSeries& series)
      : series_(series.duration != nullptr ? &series : nullptr) {}

  // The upstream exchange starts (a connection is taken or opened).
  void began(SteadyClock::time_point at) { began_ = at; }
  // The upstream's final response header arrived with `status`.
  void responded(unsigned status);
  void failed(UpstreamFailure reason);

 private:
  const UpstreamSeries* series_ = nullptr;
  SteadyClock::time_point began_{};
};

}  // namespace sluice::observe
