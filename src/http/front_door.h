// FrontDoor: the requests of the `listen` port (DESIGN.md §6).
//
//   POST /v1/check   a named policy applied to a caller-given key
//   *    /v1/auth    for nginx auth_request: the original request comes in
//                    X-Original-Method / X-Original-URI; the routes decide
//   anything else    the gateway: the routes decide; allowed requests go to the
//                    Forwarder when `upstream` is set (502 while none exists),
//                    and get 200 {"allowed":true} in decision-only mode (no upstream)
//
// Every door builds a policy::Plan, asks policy::decide_async() (the answer may
// come later, from the store's event loop: the session waits), and answers with the
// headers of rate_headers.h; none has limiting logic of its own. Decisions are
// counted in the State's metric series, denials logged at a bounded rate and
// recorded in the top denied keys.
//
// Thread-safety: one FrontDoor per worker thread; on_header() runs on it.
#pragma once

#include <chrono>
#include <memory>

#include "http/context.h"
#include "http/forwarder.h"
#include "http/session.h"
#include "policy/decider.h"

namespace sluice::http {

class FrontDoor final : public RequestHandler {
 public:
  // `forwarder` may be null (no proxy built): allowed gateway requests get 502.
  FrontDoor(ServerContext& context, std::unique_ptr<Forwarder> forwarder);
  ~FrontDoor() override;

  void on_header(const std::shared_ptr<Session>& session) override;

 private:
  void handle_check(const std::shared_ptr<Session>& session, std::string body);
  void handle_auth(const std::shared_ptr<Session>& session);
  void handle_gateway(const std::shared_ptr<Session>& session);

  // policy::decide_async() plus the bookkeeping every door shares (latency,
  // counters, logs), then `then(policy::Verdict)` on this worker's thread:
  // before this returns with the memory store, from the event loop with Redis.
  // `plan` and `metrics` must live until then (the caller holds the State).
  template <class Then>
  void decide_and_count(const std::shared_ptr<const State>& state, const policy::Plan& plan,
                        const RouteMetrics& metrics, Nanos now, uint64_t cost, Then&& then);
  void count(const State& state, const policy::Plan& plan, const RouteMetrics& metrics, Nanos now,
             std::chrono::steady_clock::time_point start, const policy::Verdict& verdict);

  ServerContext& context_;
  std::unique_ptr<Forwarder> forwarder_;
};

}  // namespace sluice::http
