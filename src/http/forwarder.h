// The gateway seam: what the front door hands to the upstream proxy for an
// allowed request when `upstream` is configured.
//
// The front door has read the request header only and decided it. A Forwarder
// takes the client connection over: it streams the request body (if any) from
// session->stream()/buffer() (continue the parser with
// `request_parser<OtherBody>(std::move(session->header_parser()))`), forwards
// the request, writes the upstream's response to the client with
// `rate_headers` added, and finally calls session->resume(keep_alive) exactly
// once (also on every failure: 502 when the upstream is down, 504 on upstream
// timeout, then resume(false) if the client connection is unusable). While a
// Forwarder owns the connection the session does nothing with it. When the
// server drains (session->draining()), answer with Connection: close.
//
// Without a Forwarder (none is built yet) the front door answers allowed
// gateway requests with 502 UPSTREAM_UNAVAILABLE and the rate headers.
//
// Thread-safety: one Forwarder per worker io_context; forward() is called on
// that io_context's thread only.
#pragma once

#include <functional>
#include <memory>

#include <boost/asio/io_context.hpp>

#include "http/context.h"
#include "http/cost_meter.h"
#include "http/session.h"
#include "http/state.h"
#include "observe/upstream_metrics.h"
#include "policy/charge.h"
#include "policy/decider.h"
#include "policy/policy.h"
#include "render/rate_headers.h"

namespace sluice::http {

struct GatewayExchange {
  GatewayExchange() = default;
  GatewayExchange(const GatewayExchange&) = delete;
  GatewayExchange& operator=(const GatewayExchange&) = delete;

  std::shared_ptr<Session> session;    // the client connection
  std::shared_ptr<const State> state;  // the config this request was decided with
  policy::Plan plan;                   // route, normalised path, client address
  policy::Verdict verdict;             // allowed (limited or not)
  RateHeaders rate_headers;            // to add to the response (empty when not limited)
  // What the verdict charged and may give back, counted in the route's
  // series (policy/charge.h). The Forwarder settles it with the upstream's
  // status (count_status), and releases its concurrency slots when the
  // upstream's response is complete (before its last bytes go to the
  // client, so that the client's next request finds the slot free) or when
  // the exchange ends otherwise (502/504, client gone, tunnel closed); the
  // destructor releases what nothing released (a worker torn down at
  // shutdown). Declared after what it refers to.
  policy::Charge charge;
  // The route's upstream series (observe/upstream_metrics.h): the
  // Forwarder records the exchange's start, response or failure in it.
  observe::UpstreamRecorder upstream;
  // A route with `cost:` (http/cost_meter.h): the Forwarder shows it the
  // response and settles it when the response is complete; null otherwise.
  std::unique_ptr<CostMeter> cost;
};

class Forwarder {
 public:
  virtual ~Forwarder() = default;
  virtual void forward(std::shared_ptr<GatewayExchange> exchange) = 0;
};

// Builds the Forwarder of one worker; its I/O objects belong to `io_context`.
using ForwarderFactory =
    std::function<std::unique_ptr<Forwarder>(boost::asio::io_context& io_context)>;

}  // namespace sluice::http
