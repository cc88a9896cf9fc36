#include "http/front_door.h"

#include <charconv>
#include <chrono>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <spdlog/spdlog.h>
#include <boost/beast/http/field.hpp>

#include "http/access.h"
#include "http/beast_headers.h"
#include "http/check_request.h"
#include "policy/connection_limits.h"
#include "policy/cost_settle.h"
#include "policy/path.h"
#include "policy/redact.h"
#include "policy/request.h"
#include "policy/route_syntax.h"
#include "render/rate_headers.h"

namespace sluice::http {

namespace bhttp = boost::beast::http;
using render::append_rate_headers;
using render::kRateLimitedContentType;

namespace {

constexpr std::string_view kCheckPath = "/v1/check";
constexpr std::string_view kAuthPath = "/v1/auth";
constexpr std::string_view kReleasePath = "/v1/release";

std::string_view sv(boost::beast::string_view s) {
  return {s.data(), s.size()};
}

// Milliseconds rounded up: a caller that waits this long is never early.
uint64_t ms_rounded_up(Nanos d) {
  if (d.count() <= 0) return 0;
  return static_cast<uint64_t>((d.count() + 999'999) / 1'000'000);
}

// The default body of a denial, naming the limit that fired.
std::string rate_limited_body(const policy::Verdict& verdict) {
  return render::rate_limited_body(
      verdict.reported != nullptr ? std::string_view(verdict.reported->name) : std::string_view());
}

// `body` (rate_limited_body) must outlive the reply.
Reply rate_limited_reply(const RateHeaders& headers, int status, std::string_view body) {
  Reply reply;
  reply.status = static_cast<bhttp::status>(status);
  reply.content_type = kRateLimitedContentType;
  reply.rate_headers = &headers;
  reply.body = body;
  return reply;
}

// The gateway's answer to a denied request, as `deny:` says (its views live
// in the config, which the caller's State holds).
Reply gateway_denied_reply(const RateHeaders& headers, const policy::DenyResponse& deny,
                           std::string_view default_body) {
  Reply reply = rate_limited_reply(headers, deny.status, default_body);
  if (!deny.body_file.empty()) {
    reply.body = deny.body;
    reply.content_type = deny.content_type;
  }
  return reply;
}

// The body of a /v1/check answer, written into `buf` (large enough for the
// longest: five 20-digit numbers and the names).
std::string_view check_body(const policy::Verdict& verdict, std::span<char, 192> buf) {
  char* p = buf.data();
  char* const end = buf.data() + buf.size();
  const auto put = [&p, end](std::string_view s) {
    if (s.size() > static_cast<size_t>(end - p)) return;  // cannot happen: sized above
    std::memcpy(p, s.data(), s.size());
    p += s.size();
  };
  const auto put_uint = [&p, end](uint64_t v) { p = std::to_chars(p, end, v).ptr; };
  const Decision& d = verdict.decision;
  put(verdict.allowed() ? "{\"allowed\":true" : "{\"allowed\":false");
  put(",\"limit\":");
  put_uint(d.limit);
  put(",\"remaining\":");
  put_uint(d.remaining);
  put(",\"reset_after_ms\":");
  put_uint(ms_rounded_up(d.reset_after));
  put(",\"retry_after_ms\":");
  put_uint(ms_rounded_up(d.retry_after));
  put("}");
  return {buf.data(), static_cast<size_t>(p - buf.data())};
}

Response bad_request(std::string_view message) {
  return error_response(HttpStatus::bad_request, "BAD_REQUEST", message);
}

Reply json_error_reply(HttpStatus status, const std::string& body) {
  Reply reply;
  reply.status = status;
  reply.content_type = "application/json";
  reply.body = body;
  return reply;
}

// A request the plan refuses is answered without a decision: 400 BAD_PATH,
// 403 ACCESS_DENIED or 401 UNKNOWN_CONSUMER (policy::Refusal says when).
void respond_refusal(Session& session, policy::Refusal refusal) {
  static const std::string kBadPath =
      error_body("BAD_PATH",
                 "the path holds an encoded slash or backslash (%2F, %5C), a backslash, %00 or "
                 "bytes that are not UTF-8, which servers read differently; send the path with "
                 "plain '/' separators");
  static const std::string kAccessDenied =
      error_body("ACCESS_DENIED", "this client address is in the server's deny list");
  static const std::string kUnknownConsumer =
      error_body("UNKNOWN_CONSUMER",
                 "this route is for known consumers only: send a consumer id that is "
                 "on a plan");
  ServerMetrics& metrics = session.context().metrics;
  switch (refusal) {
    case policy::Refusal::kNone:
      break;
    case policy::Refusal::kBadPath:
      metrics.rejected_bad_request->add();
      return session.respond(json_error_reply(HttpStatus::bad_request, kBadPath));
    case policy::Refusal::kAccessDenied:
      metrics.rejected_access_denied->add();
      return session.respond(json_error_reply(HttpStatus::forbidden, kAccessDenied));
    case policy::Refusal::kUnknownConsumer:
      metrics.rejected_unknown_consumer->add();
      return session.respond(json_error_reply(HttpStatus::unauthorized, kUnknownConsumer));
  }
}

// A shadow route's denials are counted and logged, and the request goes on.
bool shadow_route(const policy::Plan& plan) {
  return plan.route != nullptr && plan.route->shadow;
}

// The access log names the client as the policy resolved it (client_ip),
// the TCP peer beside it; also for a request refused before any decision.
void note_client(Session& session, const policy::Plan& plan) {
  if (session.access_log_on()) session.access_note().client = plan.client;
}

// Whether a verdict decided without holding (no server.max_held place was
// free) denied a request that the route's `delay` would have held: its
// turn, the latest of its limits', would have come within `delay`.
bool denied_for_want_of_a_place(const policy::Verdict& verdict, Nanos delay) {
  return verdict.result == policy::Verdict::Result::kDenied &&
         verdict.decision.retry_after <= delay;
}

}  // namespace

FrontDoor::FrontDoor(ServerContext& context, Port port, std::unique_ptr<Forwarder> forwarder)
    : context_(context),
      step_(context.store, context.clock),
      port_(port),
      forwarder_(std::move(forwarder)) {}

FrontDoor::~FrontDoor() = default;

void FrontDoor::on_header(const std::shared_ptr<Session>& session) {
  const RequestHeader& req = session->header();
  const std::string_view path = policy::target_path(sv(req.target()));
  const bool decision_path = path == kCheckPath || path == kAuthPath || path == kReleasePath;
  if (port_ == Port::kDecisionApi) {
    if (decision_path) return handle_decision_api(session, path);
    static const std::string kBody = error_body(
        "NOT_FOUND",
        "this port serves the decision API only: POST /v1/check, POST /v1/release, GET /v1/auth");
    return session->respond(json_error_reply(HttpStatus::not_found, kBody));
  }
  const policy::Config& config = session->state()->policy.config();
  // On a gateway (or beside a decision port) these are paths of the API
  // behind: routed and proxied, never answered here.
  if (decision_path && !config.upstream && !config.decision_api.listen) {
    return handle_decision_api(session, path);
  }
  handle_gateway(session);
}

void FrontDoor::handle_decision_api(const std::shared_ptr<Session>& session,
                                    std::string_view path) {
  const RequestHeader& req = session->header();
  const std::string& token = session->state()->policy.config().decision_api.token;
  if (!token.empty()) {
    const auto authorization = req.find(bhttp::field::authorization);
    if (authorization == req.end() || !bearer_token_matches(sv(authorization->value()), token)) {
      static const std::string kBody =
          error_body("UNAUTHORIZED", "the decision API needs \"Authorization: Bearer <token>\"");
      Reply reply = json_error_reply(HttpStatus::unauthorized, kBody);
      reply.extra_name = "WWW-Authenticate";
      reply.extra_value = "Bearer";
      return session->respond(reply);
    }
  }
  if (path == kAuthPath) return handle_auth(session);
  if (req.method() != bhttp::verb::post) {
    static const std::string kBody =
        error_body("METHOD_NOT_ALLOWED", "/v1/check and /v1/release take POST with a JSON body");
    Reply reply = json_error_reply(HttpStatus::method_not_allowed, kBody);
    reply.extra_name = "Allow";
    reply.extra_value = "POST";
    return session->respond(reply);
  }
  if (path == kReleasePath) {
    return session->read_body(
        [this, session](std::string body) { handle_release(session, std::move(body)); });
  }
  session->read_body([this, session](std::string body) { handle_check(session, std::move(body)); });
}

template <class Then>
void FrontDoor::decide(Session& session, const std::shared_ptr<const State>& state,
                       const policy::Plan& plan, const RouteMetrics& metrics, Nanos now,
                       uint64_t cost, Then&& then) {
  // A route's delay holds a request only while one of server.max_held places
  // is free; without one the request is decided as if the route had none
  // (allowed now, or answered at once).
  const Nanos delay = policy::route_delay(plan);
  HeldPlace place;
  if (delay.count() > 0) {
    place = HeldPlace(
        context_.held_requests,
        policy::max_held_in_force(state->policy.config().server, context_.max_connections));
  }
  const policy::Ask ask{plan,
                        now,
                        cost,
                        place ? delay : Nanos{0},
                        policy::on_failure(state->policy.config()),
                        shadow_route(plan)};
  // `then` holds the session, so it outlives this callback, and the session
  // holds `state` until its request is answered: no reference of our own
  // (a count on a block every worker shares).
  step_.decide(
      ask, metrics,
      [this, session = &session, state = state.get(), &plan, &metrics, delay,
       place = std::move(place), then = std::forward<Then>(then)](policy::Verdict verdict) mutable {
        if (delay.count() > 0 && !place && denied_for_want_of_a_place(verdict, delay)) {
          note_held_refused(*state, metrics);
        }
        if (session->access_log_on()) note_access(*session, plan, metrics, verdict);
        session->time_request(metrics.durations.of(verdict));
        if (verdict.allowed() && verdict.wait.count() > 0) {
          return hold(*session, plan, metrics, std::move(verdict), std::move(place),
                      std::move(then));
        }
        place = HeldPlace();  // not held: the place is free for another
        then(std::move(verdict));
      });
}

void FrontDoor::note_held_refused(const State& state, const RouteMetrics& metrics) {
  context_.metrics.held_refused->add();
  const observe::DenialLogGate::Admission a = held_refusal_log_.admit(context_.clock.now());
  if (a.log) {
    spdlog::warn(
        "route \"{}\": server.max_held ({}) requests are held; one its delay would hold was "
        "answered at once{}",
        metrics.name,
        policy::max_held_in_force(state.policy.config().server, context_.max_connections),
        a.suppressed_before == 0 ? std::string()
                                 : cat({" (", std::to_string(a.suppressed_before),
                                        " more not logged before this one)"}));
  }
}

template <class Then>
void FrontDoor::hold(Session& session, const policy::Plan& plan, const RouteMetrics& metrics,
                     policy::Verdict verdict, HeldPlace place, Then&& then) {
  context_.metrics.held->add();
  // Session::hold takes a copyable callback and `then` may own the plan
  // (move-only): both travel in one shared block, the one allocation a held
  // request adds. The place goes with them: it is free again when the hold
  // is over, whichever way.
  struct Held {
    policy::Verdict verdict;
    HeldPlace place;
    std::decay_t<Then> then;
  };
  auto held =
      std::make_shared<Held>(Held{std::move(verdict), std::move(place), std::forward<Then>(then)});
  const auto until = std::chrono::steady_clock::now() + held->verdict.wait;
  // The State (and `metrics` in it) stays until a charge given back is done.
  session.hold(until, [this, &plan, &metrics, held, state = session.state()](bool present) {
    held->place = HeldPlace();
    if (present) return held->then(std::move(held->verdict));
    // The client left before its turn: its place goes to whoever comes next.
    // `plan` is owned by `then`, alive in `held` for this call.
    policy::Charge(context_.store, context_.clock, plan, held->verdict, metrics).cancel([state] {});
  });
}

void FrontDoor::note_access(Session& session, const policy::Plan& plan, const RouteMetrics& metrics,
                            const policy::Verdict& verdict) {
  Session::AccessNote& note = session.access_note();
  note.route = metrics.name;
  std::string redacted;
  note.key = observe::shown_key(session.state()->policy.config().logging.redact_keys,
                                policy::decision_key(plan, verdict), redacted);
  if (verdict.store_failed()) {
    note.decision = "error";
  } else if (!verdict.limited()) {
    note.decision = "none";
  } else {
    note.decision = verdict.allowed()                  ? "allowed"
                    : metrics.shadow_denied != nullptr ? "shadow_denied"
                                                       : "denied";
    if (!verdict.allowed() && verdict.reported != nullptr) note.limit = verdict.reported->name;
  }
}

void FrontDoor::handle_check(const std::shared_ptr<Session>& session, std::string body) {
  const std::shared_ptr<const State>& state = session->state();
  const CheckRequest request = parse_check(body);
  if (!request.error.empty()) return session->respond(bad_request(request.error));
  if (!request.consumer.empty()) return check_consumer(session, request);
  const policy::NamedPolicy* named = state->policy.find_policy(request.policy);
  if (named == nullptr) {
    return session->respond(error_response(HttpStatus::not_found, "UNKNOWN_POLICY",
                                           cat({"no policy named \"", request.policy, "\""})));
  }
  if (request.cost > named->limit.size()) {
    return session->respond(
        bad_request(cat({"\"cost\" ", std::to_string(request.cost),
                         " is above the size of policy \"", request.policy, "\" (",
                         std::to_string(named->limit.size()), "): it could never be allowed"})));
  }
  const long index = state->policy_index(named);
  const RouteMetrics& metrics =
      index >= 0 ? state->policies[static_cast<size_t>(index)] : state->unmatched;
  // On the heap: the plan must outlive a decision that completes later.
  auto plan =
      std::make_unique<policy::Plan>(state->policy.plan_policy(request.policy, request.key));
  answer_check(session, std::move(plan), metrics, request.cost);
}

void FrontDoor::check_consumer(const std::shared_ptr<Session>& session,
                               const CheckRequest& request) {
  const std::shared_ptr<const State>& state = session->state();
  if (state->policy.consumers() == nullptr) {
    return session->respond(
        error_response(HttpStatus::not_found, "NO_CONSUMERS",
                       "this server has no `consumers:` (plans per consumer) in its config"));
  }
  auto plan =
      std::make_unique<policy::Plan>(state->policy.plan_consumer(request.consumer, request.key));
  if (plan->refusal != policy::Refusal::kNone) return respond_refusal(*session, plan->refusal);
  for (const policy::PlannedLimit& planned : plan->limits) {
    const uint64_t size = planned.limit->limit.size();
    if (request.cost > size) {
      return session->respond(bad_request(
          cat({"\"cost\" ", std::to_string(request.cost), " is above the size of limit \"",
               planned.limit->name, "\" of consumer \"", request.consumer, "\"'s plan (",
               std::to_string(size), "): it could never be allowed"})));
    }
  }
  const RouteMetrics& metrics = state->metrics_for_plan(plan->consumer_plan);
  answer_check(session, std::move(plan), metrics, request.cost);
}

void FrontDoor::answer_check(const std::shared_ptr<Session>& session,
                             std::unique_ptr<policy::Plan> plan, const RouteMetrics& metrics,
                             uint64_t cost) {
  const std::shared_ptr<const State>& state = session->state();
  const policy::Plan& planned = *plan;
  const Nanos now = context_.clock.now();
  decide(
      *session, state, planned, metrics, now, cost,
      [this, session, state, now, cost, &metrics, plan = std::move(plan)](policy::Verdict verdict) {
        if (verdict.invalid()) return session->respond(bad_request(verdict.error));
        char buf[192];
        RateHeaders headers;
        append_rate_headers(verdict, state->policy.config().headers, now, headers);
        Reply reply;
        reply.status = verdict.allowed() ? HttpStatus::ok : HttpStatus::too_many_requests;
        reply.content_type = "application/json";
        reply.rate_headers = &headers;
        reply.body = check_body(verdict, buf);
        // A policy's concurrency slot: the caller gives it back with its lease.
        std::string with_lease;
        if (policy::holds_slots(verdict) && plan->consumer_plan == nullptr) {
          const policy::RouteLimit& limit = *verdict.outcomes.front().limit;
          const Nanos charged_at = verdict.outcomes.front().decision.decided_at;
          const std::string id = context_.leases.issue(
              policy::Lease{limit.name, plan->limits.front().store_key, cost, charged_at,
                            limit.limit.fingerprint(), charged_at + limit.limit.period()},
              now);
          with_lease =
              cat({reply.body.substr(0, reply.body.size() - 1), ",\"lease\":\"", id, "\"}"});
          reply.body = with_lease;
          if (metrics.slots_taken != nullptr) metrics.slots_taken->add();
        }
        session->respond(reply);
      });
}

void FrontDoor::handle_release(const std::shared_ptr<Session>& session, std::string body) {
  const std::shared_ptr<const State>& state = session->state();
  const ReleaseRequest request = parse_release(body);
  if (!request.error.empty()) return session->respond(bad_request(request.error));
  const Nanos now = context_.clock.now();
  // Taken out of the table: a second release of the id finds nothing held.
  policy::LeaseTable::Taken taken = context_.leases.take(request.lease, now);
  // Released already, or past its lease (the slot has freed itself): nothing to give back.
  if (taken.outcome == policy::LeaseTable::Outcome::kNotHeld) {
    return session->respond(json_response(HttpStatus::ok, "{\"released\":false}"));
  }
  const policy::Lease& lease = taken.lease;
  const bool held = taken.outcome == policy::LeaseTable::Outcome::kTaken;
  const policy::NamedPolicy* named = held ? state->policy.find_policy(lease.policy) : nullptr;
  const long index = state->policy_index(named);
  // The policy must still be the one that granted it: a changed limit keeps
  // its slots under another fingerprint (they free themselves).
  if (!held || index < 0 || named->limit.fingerprint() != lease.fingerprint ||
      named->limit.algorithm() != Algorithm::kConcurrency || lease.cost == 0 ||
      lease.cost > named->limit.size()) {
    return session->respond(error_response(
        HttpStatus::not_found, "UNKNOWN_LEASE",
        "this lease was not granted by this server, or its policy has changed since"));
  }
  const RouteMetrics& metrics = state->policies[static_cast<size_t>(index)];
  // The refund reads the request (its key) only before refund_async returns.
  const RefundRequest refund{&state->policy_limits[static_cast<size_t>(index)].limit,
                             lease.store_key, lease.cost, lease.charged_at};
  context_.store.refund_async(
      {&refund, 1}, now,
      [session, state, &metrics, errors = context_.metrics.store_errors](Status s) {
        if (!s.ok()) {
          errors->add();
          return session->respond(error_response(
              HttpStatus::service_unavailable, "STORE_UNAVAILABLE",
              cat({"the store could not give the slot back (it frees itself when its lease "
                   "ends): ",
                   s.error().message})));
        }
        if (metrics.slots_released != nullptr) metrics.slots_released->add();
        session->respond(json_response(HttpStatus::ok, "{\"released\":true}"));
      });
}

void FrontDoor::handle_auth(const std::shared_ptr<Session>& session) {
  const std::shared_ptr<const State>& state = session->state();
  const RequestHeader& req = session->header();
  const auto method = req.find("X-Original-Method");
  const auto uri = req.find("X-Original-URI");
  if (method == req.end() || method->value().empty()) {
    return session->respond(bad_request("/v1/auth needs the X-Original-Method header"));
  }
  if (uri == req.end() || uri->value().empty()) {
    return session->respond(bad_request("/v1/auth needs the X-Original-URI header"));
  }
  // As a request line's method (request_checks.h): "post" is not POST.
  if (!policy::is_request_method(sv(method->value()))) {
    return session->respond(
        bad_request("X-Original-Method must be an upper-case method token (methods are "
                    "case-sensitive)"));
  }
  const BeastHeaders headers(req);
  policy::RequestInfo info;
  info.method = sv(method->value());
  info.target = sv(uri->value());
  info.peer = session->peer();
  info.headers = &headers;
  const Nanos now = context_.clock.now();
  info.now = now;
  auto plan = std::make_unique<policy::Plan>(state->policy.plan(info));
  note_client(*session, *plan);
  if (plan->refusal != policy::Refusal::kNone) return respond_refusal(*session, plan->refusal);
  const policy::Plan& planned = *plan;
  decide(
      *session, state, planned, state->metrics_for(planned.route), now, 1,
      [this, session, now, plan = std::move(plan)](policy::Verdict verdict) {
        const std::shared_ptr<const State>& state = session->state();  // held until answered
        // auth_request never says when the request it asked about ends, so a
        // concurrency slot is checked here, not held: it goes back at once.
        policy::Charge(context_.store, context_.clock, *plan, verdict,
                       state->metrics_for(plan->route))
            .release([state] {});  // the route's metrics stay until the store is done
        RateHeaders rate;
        append_rate_headers(verdict, state->policy.config().headers, now, rate);
        if (verdict.allowed() || shadow_route(*plan)) {
          Reply reply;
          reply.status = HttpStatus::no_content;
          reply.rate_headers = &rate;
          return session->respond(reply);
        }
        const std::string body = rate_limited_body(verdict);
        session->respond(rate_limited_reply(rate, state->policy.config().auth_deny_status, body));
      });
}

void FrontDoor::handle_gateway(const std::shared_ptr<Session>& session) {
  const std::shared_ptr<const State>& state = session->state();
  const RequestHeader& req = session->header();
  const BeastHeaders headers(req);
  policy::RequestInfo info;
  info.method = sv(req.method_string());
  info.target = sv(req.target());
  info.peer = session->peer();
  info.headers = &headers;
  const Nanos now = context_.clock.now();
  info.now = now;

  auto exchange = std::make_shared<GatewayExchange>();
  exchange->plan = state->policy.plan(info);
  note_client(*session, exchange->plan);
  if (exchange->plan.refusal != policy::Refusal::kNone) {
    return respond_refusal(*session, exchange->plan.refusal);
  }
  const policy::Plan& plan = exchange->plan;
  decide(*session, state, plan, state->metrics_for(plan.route), now, policy::route_estimate(plan),
         [this, session, now, exchange = std::move(exchange)](policy::Verdict v) mutable {
           const std::shared_ptr<const State>& state = session->state();  // held until answered
           exchange->verdict = std::move(v);
           const policy::Verdict& verdict = exchange->verdict;
           append_rate_headers(verdict, state->policy.config().headers, now,
                               exchange->rate_headers);
           if (verdict.invalid()) {
             return session->respond(
                 error_response(HttpStatus::internal_server_error, "INTERNAL", verdict.error));
           }
           if (!verdict.allowed() && !shadow_route(exchange->plan)) {
             const policy::DenyResponse& deny = state->policy.config().deny;
             const std::string body = deny.body_file.empty() ? rate_limited_body(verdict) : "";
             return session->respond(gateway_denied_reply(exchange->rate_headers, deny, body));
           }
           exchange->session = session;
           exchange->state = state;
           // Given back by the forwarder, or when `exchange` goes below.
           const RouteMetrics& metrics = state->metrics_for(exchange->plan.route);
           exchange->charge = policy::Charge(context_.store, context_.clock, exchange->plan,
                                             exchange->verdict, metrics);
           exchange->upstream = observe::UpstreamRecorder(metrics.upstream);
           exchange->cost = CostMeter::make(context_.store, context_.clock, exchange->plan,
                                            exchange->verdict, metrics);
           if (state->policy.config().upstream) {
             if (forwarder_) return forwarder_->forward(std::move(exchange));
             // The seam: no proxy in this build yet.
             static const std::string kBody =
                 error_body("UPSTREAM_UNAVAILABLE", "the upstream cannot be reached");
             Reply reply;
             reply.status = HttpStatus::bad_gateway;
             reply.content_type = "application/json";
             reply.rate_headers = &exchange->rate_headers;
             reply.body = kBody;
             return session->respond(reply);
           }
           // Decision-only mode (no upstream): every path is a probe of its route.
           Reply reply;
           reply.content_type = "application/json";
           reply.rate_headers = &exchange->rate_headers;
           reply.body = "{\"allowed\":true}";
           session->respond(reply);
         });
}

}  // namespace sluice::http
