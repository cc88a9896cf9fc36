// State: one loaded configuration, compiled for serving. The server holds the
// current State in a std::atomic<std::shared_ptr<const State>>; a request
// takes one copy of the pointer when its header has been read and uses that
// State until it is answered, so it sees one whole config even if a reload
// swaps the pointer meanwhile (docs/DESIGN.md §5: a reload changes all of it or nothing).
//
// Besides the Policy, a State carries the metric series of its routes and
// named policies, resolved once at load so the hot path increments counters
// through pointers and never looks a series up by its label strings.
//
// Thread-safety: immutable after build_state(); share it freely.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/ssl/context.hpp>

#include "http/upstream_group.h"
#include "observe/denial_log.h"
#include "observe/metrics.h"
#include "observe/route_metrics.h"
#include "policy/config.h"
#include "policy/policy.h"

namespace sluice::http {

// The series and decision observer of one route, named policy or plan.
using RouteMetrics = observe::RouteMetrics;

struct State {
  explicit State(policy::Config config) : policy(std::move(config)) {}

  policy::Policy policy;
  uint64_t generation = 0;  // 1 for the first config, +1 per successful reload

  // Indexed like policy.config().routes; `default_route` for the default.
  std::vector<RouteMetrics> routes;
  RouteMetrics default_route;
  RouteMetrics unmatched;  // no route and no default: counted, never limited
  // One per named policy (config().policies order): /v1/check decisions.
  std::vector<RouteMetrics> policies;
  // Each named policy as a RouteLimit, for building Verdicts of /v1/check.
  std::vector<policy::RouteLimit> policy_limits;
  // One per plan (config().plans order): /v1/check {"consumer": ...}
  // decisions, under route "plan:<name>".
  std::vector<RouteMetrics> plans;
  // The `listen` port's TLS context (null: plain HTTP). New connections take
  // it from the State in force when they are accepted.
  std::shared_ptr<boost::asio::ssl::context> tls;
  // Decisions are logged at most logging.denial_log_per_second, keys shown
  // as logging.redact_keys says (a fresh gate per config; the pointer is
  // const, the gate is not). Every RouteMetrics above logs through it.
  std::unique_ptr<observe::DecisionLog> decision_log;
  // Failed TLS handshakes on `listen`, at the same rate with a gate of their own.
  std::unique_ptr<observe::DenialLogGate> handshake_log;

  // The gateway's upstreams (none without `upstream`): the default, and
  // one per named upstream a route names, shared by the routes naming it.
  std::vector<std::shared_ptr<UpstreamGroup>> upstream_groups;
  UpstreamGroup* default_upstream = nullptr;
  std::vector<UpstreamGroup*> route_upstreams;  // indexed like config().routes

  // The upstream of the route a Plan matched (the default for nullptr).
  UpstreamGroup* upstream_for(const policy::Route* route) const;
  // The metrics of the route a Plan matched (nullptr = unmatched).
  const RouteMetrics& metrics_for(const policy::Route* route) const;
  // Index of a named policy in config().policies, or -1.
  long policy_index(const policy::NamedPolicy* p) const;
  // The metrics of a plan's /v1/check decisions (unmatched for nullptr).
  const RouteMetrics& metrics_for_plan(const policy::ConsumerPlan* plan) const;
};

// Builds the State of `config`, registering its series in `registry` (its
// decisions counted also in `sinks`, which must outlive it). Throws
// std::runtime_error when OpenSSL refuses its TLS certificate (make_tls_context).
std::shared_ptr<const State> build_state(policy::Config config, uint64_t generation,
                                         observe::Registry& registry,
                                         const observe::DecisionSinks& sinks);

}  // namespace sluice::http
