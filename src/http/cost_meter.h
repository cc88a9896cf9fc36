// CostMeter: the gateway's side of a route's `cost:` for one proxied
// request. The proxy shows it the upstream's response header and body as
// they pass (policy::UsageReader reads the figure without holding them),
// then asks it to settle once the response is complete; the settle
// (policy::settle_cost) charges actual − estimate to every limit of the
// route in one store call. A meter destroyed before settling (the upstream
// cut the response, the client left, a tunnel) counts the request as
// unreported: its estimate stands.
//
// Thread-safety: one thread at a time (the exchange's worker).
#pragma once

#include <cstddef>
#include <memory>
#include <utility>

#include <boost/beast/http/message.hpp>

#include "http/state.h"
#include "policy/decider.h"
#include "policy/policy.h"
#include "policy/usage_reader.h"
#include "sluice/clock.h"
#include "sluice/store.h"

namespace sluice::http {

class CostMeter {
 public:
  // `store`, `clock`, `plan`, `verdict` and `metrics` must outlive the
  // meter and the settle it starts. Null when the route has no `cost:` or
  // the verdict charged nothing.
  static std::unique_ptr<CostMeter> make(Store& store, const Clock& clock, const policy::Plan& plan,
                                         const policy::Verdict& verdict,
                                         const RouteMetrics& metrics);
  CostMeter(Store& store, const Clock& clock, const policy::Plan& plan,
            const policy::Verdict& verdict, const RouteMetrics& metrics);
  CostMeter(const CostMeter&) = delete;
  CostMeter& operator=(const CostMeter&) = delete;
  ~CostMeter();

  void on_response_header(const boost::beast::http::response_header<>& header);
  void on_body(const char* data, size_t size);
  // Whether settle() has yet to run.
  bool pending() const { return !settled_; }
  // The response is complete (`header` holds its trailers too, after its
  // header fields): settles, once, and runs `then` once the store has
  // applied it (or at once when nothing is to be charged).
  void settle(const boost::beast::http::response_header<>& header, std::function<void()> then);

 private:
  Store& store_;
  const Clock& clock_;
  const policy::Plan& plan_;
  const policy::Verdict& verdict_;
  const RouteMetrics& metrics_;
  policy::UsageReader reader_;
  size_t header_fields_ = 0;  // fields of the header block (trailers come after them)
  bool settled_ = false;
};

}  // namespace sluice::http
