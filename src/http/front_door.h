// FrontDoor: the requests of the `listen` port and of `decision_api.listen`.
//
//   POST /v1/check   a named policy applied to a caller-given key, or a
//                    consumer's plan (consumers:); a policy's concurrency
//                    slot comes with a lease id (policy/lease.h)
//   POST /v1/release gives a lease's slot back
//   *    /v1/auth    for nginx auth_request: the original request comes in
//                    X-Original-Method / X-Original-URI; the routes decide
//   anything else    the gateway: the routes decide; allowed requests go to the
//                    Forwarder when `upstream` is set (502 while none exists),
//                    and get 200 {"allowed":true} in decision-only mode (no upstream)
//
// The decision API (/v1/check, /v1/auth) lets a caller spend any key's
// limit, so it is for trusted callers only: served on decision_api.listen
// when that is set (and nothing else is), else on `listen` only when no
// upstream is set. A gateway's public port routes and proxies those paths
// like any other. With decision_api.token_file every decision request needs
// "Authorization: Bearer <token>" (401 without).
//
// A path holding %2F, %5C or a backslash gets 400 BAD_PATH before anything is
// decided (policy/path.h says why). A route listing `plan` answers an unknown
// consumer 401 UNKNOWN_CONSUMER when `consumers.unknown` is reject.
//
// A route with `delay`: an allowed verdict with a wait is held on its
// connection (Session::hold) and then goes on as if allowed then; a client
// that leaves while held gets its charge given back (policy::Charge::cancel).
//
// Every door builds a policy::Plan, asks the decision step (policy/step.h;
// the answer may come later, from the store's event loop: the session
// waits), and answers with the headers of rate_headers.h; none has limiting
// logic of its own. The step counts each decision in the route's series
// (observe::RouteMetrics), logs denials at a bounded rate and records them
// in the top denied keys.
//
// Thread-safety: one FrontDoor per worker thread; on_header() runs on it.
#pragma once

#include <chrono>
#include <memory>

#include "http/check_request.h"
#include "http/context.h"
#include "http/forwarder.h"
#include "http/session.h"
#include "observe/denial_log.h"
#include "policy/decider.h"
#include "policy/step.h"

namespace sluice::http {

class FrontDoor final : public RequestHandler {
 public:
  enum class Port { kListen, kDecisionApi };
  // `forwarder` may be null (no proxy built): allowed gateway requests get 502.
  FrontDoor(ServerContext& context, Port port, std::unique_ptr<Forwarder> forwarder);
  ~FrontDoor() override;

  void on_header(const std::shared_ptr<Session>& session) override;

 private:
  // /v1/check and /v1/auth, once the caller is known to be allowed to ask.
  void handle_decision_api(const std::shared_ptr<Session>& session, std::string_view path);
  void handle_check(const std::shared_ptr<Session>& session, std::string body);
  void handle_release(const std::shared_ptr<Session>& session, std::string body);
  // /v1/check {"consumer": ...}: the consumer's plan.
  void check_consumer(const std::shared_ptr<Session>& session, const CheckRequest& request);
  // Decides a /v1/check plan and answers with its JSON body.
  void answer_check(const std::shared_ptr<Session>& session, std::unique_ptr<policy::Plan> plan,
                    const RouteMetrics& metrics, uint64_t cost);
  void handle_auth(const std::shared_ptr<Session>& session);
  void handle_gateway(const std::shared_ptr<Session>& session);

  // The decision step (policy::DecisionStep: decided, counted and logged
  // through `metrics`) plus what only HTTP doors do: a place among
  // server.max_held for a route's `delay`, the access log's note, holding
  // a queued request; then `then(policy::Verdict)` on this worker's thread:
  // before this returns with the memory store, from the event loop with
  // Redis. `plan` and `metrics` must live until then (`state` is the
  // session's, which it holds until the request is answered; `then` must
  // hold the session).
  template <class Then>
  void decide(Session& session, const std::shared_ptr<const State>& state, const policy::Plan& plan,
              const RouteMetrics& metrics, Nanos now, uint64_t cost, Then&& then);
  // Holds a request the verdict queued (verdict.wait > 0) until its turn,
  // then `then(verdict)`; gives its charge back if the client leaves first.
  // `place` is the request's among server.max_held, kept until then.
  template <class Then>
  void hold(Session& session, const policy::Plan& plan, const RouteMetrics& metrics,
            policy::Verdict verdict, HeldPlace place, Then&& then);
  // Counts (and logs, at most once a second) a request answered at once
  // because server.max_held requests were held.
  void note_held_refused(const State& state, const RouteMetrics& metrics);
  static void note_access(Session& session, const policy::Plan& plan, const RouteMetrics& metrics,
                          const policy::Verdict& verdict);

  ServerContext& context_;
  const policy::DecisionStep step_;
  const Port port_;
  std::unique_ptr<Forwarder> forwarder_;
  observe::DenialLogGate held_refusal_log_{1.0};
};

}  // namespace sluice::http
