// sluice_http_request_duration_seconds{route,result}: how long the HTTP
// doors (the gateway, /v1/check, /v1/auth) took over each decided request,
// from its header read to the last byte of its response written (for a
// proxied request, until the gateway gives the connection back: the
// upstream's whole response relayed, or the exchange ended otherwise; for a
// WebSocket, until its tunnel closes). `result` is the decision's, as in
// sluice_requests_total. A request refused before any decision
// (sluice_http_rejected_total) has no result and is not timed.
//
// Thread-safety: immutable once made; the histograms take any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "observe/metrics.h"
#include "policy/decider.h"

namespace sluice::observe {

// Upper bounds of the HTTP and upstream durations, in nanoseconds: the
// store latency's 1-5-10 steps, from 100 µs to 50 s (above upstream.timeout's
// default of 30 s).
extern const std::vector<uint64_t> kHttpDurationBoundsNs;

// The request durations of one route (or named policy, plan). Null
// histograms: the route has no such result (shadow_denied off a shadow
// route), or nothing was registered.
struct RequestDurations {
  Histogram* allowed = nullptr;
  Histogram* denied = nullptr;
  Histogram* error = nullptr;
  Histogram* shadow_denied = nullptr;

  // The histogram of `verdict`'s result (as RouteMetrics counts it); null
  // for an invalid request, which has none.
  Histogram* of(const policy::Verdict& verdict) const;
};

RequestDurations make_request_durations(Registry& registry, const std::string& route, bool shadow);

}  // namespace sluice::observe
