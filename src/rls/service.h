// RlsService: envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit,
// wire compatible with Envoy's global rate limit filter and a drop-in for
// envoyproxy/ratelimit, deciding with any Sluice store.
//
// Semantics (envoyproxy/ratelimit's, see matcher.h for matching):
// - An unknown domain, a descriptor that matches no rule, a whitelisted value
//   (a matched descriptor without rate_limit) and a rule replaced by another
//   matched rule's `replaces` give OK with no limit.
// - `unlimited` gives OK with limit_remaining 4294967295 and no limit.
// - A descriptor's `limit` override replaces the configured rule with a fixed
//   window of requests_per_unit per unit, whatever the entries match (as long
//   as the domain is known).
// - Hits: the descriptor's hits_addend when set (0 = check only: OK, nothing
//   charged), else the request's hits_addend, 0 meaning 1.
// - requests_per_unit 0 refuses every request.
// - Every descriptor is decided and charged on its own, in its own store call
//   through the HTTP doors' decision path (a one-limit policy::Plan decided by
//   policy::decide_async): one over its limit does not stop the others from
//   being charged (as in envoyproxy/ratelimit). Unlike envoyproxy/ratelimit, an over-limit
//   descriptor is not charged, so refused hits never eat into the next ones
//   (with hits_addend > 1 a smaller request may still pass).
// - overall_code is OVER_LIMIT when any descriptor is over its limit, except
//   shadow_mode descriptors (reported OK with limit_remaining 0, counted as
//   over) and quota_mode descriptors (reported OK and listed in
//   dynamic_metadata.quotaModeViolations, unless every quota_mode descriptor
//   of the request is over: then they are OVER_LIMIT and so is the request).
// - DescriptorStatus: current_limit (name, requests_per_unit, unit),
//   limit_remaining, and duration_until_reset in whole seconds rounded up (the
//   end of the window; for buckets, until full when allowed, until the request
//   could pass when refused).
// - A store that fails is answered per on_store_failure as the HTTP doors
//   answer it: allow = OK with nothing left, deny = over with a retry in 1 s;
//   either way no quota is claimed in the response headers. More hits than a
//   limit holds are refused until its window (or period) passes.
// - response_headers are rendered by render/rate_headers.h, as the HTTP doors
//   render theirs: ratelimit = envoyproxy/ratelimit's RateLimit-Limit,
//   -Remaining, -Reset of the most restrictive descriptor (sluice::most_restrictive);
//   draft = RateLimit-Policy and RateLimit, one item per limited descriptor
//   (t: seconds until more quota, as on the HTTP side).
// - Store keys are built from the domain and every entry (lengths prefixed, so
//   no value can spell another key); a share_threshold wildcard puts its
//   pattern in place of the value, so all values matching it share a counter.
//   The store adds the limit's definition, so a changed rule starts afresh.
//   A key longer than 256 bytes after "rls|" is kept as its digest
//   (policy/key_bound.h), so long values never size what the store keeps.
// - Every descriptor is decided by the decision step every front door calls
//   (policy/step.h), which reports it to the observer set with
//   set_observer(): the server's decision series, store latency and errors,
//   denial log and top denied keys count RLS decisions as they count HTTP's.
//
// Thread-safety: all methods may be called from any thread; set_config swaps
// the whole config atomically (a call in flight keeps the config it started with).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "policy/observer.h"
#include "policy/step.h"
#include "rls/config.h"
#include "sluice/clock.h"
#include "sluice/store.h"

namespace sluice::rls {

namespace rlspb = ::envoy::service::ratelimit::v3;

enum class ResponseHeaders {
  kOff,
  // envoyproxy/ratelimit's LIMIT_RESPONSE_HEADERS_ENABLED: RateLimit-Limit,
  // RateLimit-Remaining, RateLimit-Reset of the most restrictive descriptor.
  kRateLimit,
  // IETF draft-ietf-httpapi-ratelimit-headers-10: RateLimit-Policy and
  // RateLimit, one item per limited descriptor.
  kDraft10,
};

// What a descriptor gets when its store call fails (Redis down, timed out,
// overloaded).
enum class OnStoreFailure {
  // The whole call is answered with gRPC UNAVAILABLE (Envoy then applies its
  // own failure_mode_deny).
  kError,
  // store.redis.on_failure: allow: the descriptor is OK, limit_remaining 0.
  kAllow,
  // store.redis.on_failure: deny: the descriptor is over its limit
  // (OVER_LIMIT unless shadow_mode / quota_mode say otherwise),
  // limit_remaining 0, duration_until_reset 1 s.
  kDeny,
};

// One descriptor of a detailed_metric node, as it was decided: for
// sluice_rls_descriptor_total{domain,descriptor,result}.
struct DetailedResult {
  enum class Kind { kOk, kNearLimit, kOverLimit };
  std::string_view domain;
  // The stat key after the domain: every entry with its value
  // ("remote_address_10.0.0.1"), shared wildcards with their pattern.
  std::string_view descriptor;
  Kind result = Kind::kOk;
};

struct RlsOptions {
  ResponseHeaders response_headers = ResponseHeaders::kOff;
  OnStoreFailure on_store_failure = OnStoreFailure::kError;
  // Called once per call in which a store call failed and on_store_failure
  // (allow or deny) answered for it, with the first error and whether the
  // failed descriptors were allowed. From the thread that completes the call;
  // must be thread-safe. For a log line (rate limited by the caller).
  std::function<void(const Error&, bool allowed)> on_store_error;
  // Fill dynamic_metadata with the domain and descriptors (as
  // envoyproxy/ratelimit's RESPONSE_DYNAMIC_METADATA). Quota mode results and
  // descriptor `metadata` are sent whenever the config uses them.
  bool dynamic_metadata = false;
  // Every request gets OK; over-limit decisions are only counted.
  bool global_shadow_mode = false;
  // Called for every descriptor of a detailed_metric node that a limit
  // decided (not check-only hits_addend 0, not a failed store call): ok,
  // near_limit (allowed, with more than near_limit_ratio of the limit used,
  // envoyproxy/ratelimit's NEAR_LIMIT_RATIO) or over_limit (shadow_mode and
  // quota_mode included). From the thread that completes the call; must be
  // thread-safe.
  std::function<void(const DetailedResult&)> on_detailed_result;
  double near_limit_ratio = 0.8;
  // Where ShouldRateLimit runs its decision. Unset: inline, on the gRPC
  // thread (right for the memory store). A store bound to event loops
  // (Redis) wants it posted to one, e.g. [&io](auto task) { asio::post(io, std::move(task)); }.
  // The executor runs the task once, or destroys it unrun (a loop that
  // stopped): the call is then answered UNAVAILABLE.
  std::function<void(std::function<void()>)> executor;
};

// Monotonic counters for metrics. Descriptors are counted once per request.
struct RlsCounters {
  std::atomic<uint64_t> calls{0};
  std::atomic<uint64_t> call_errors{0};       // calls answered with a gRPC error
  std::atomic<uint64_t> calls_over_limit{0};  // overall_code OVER_LIMIT
  std::atomic<uint64_t> within_limit{0};      // descriptors decided by a limit and allowed
  std::atomic<uint64_t> over_limit{0};        // descriptors over their limit (shadow included)
  std::atomic<uint64_t> shadow_mode{0};       // over, but allowed by shadow_mode
  std::atomic<uint64_t> quota_mode_over{0};   // quota_mode descriptors over their quota
  std::atomic<uint64_t> unlimited{0};
  std::atomic<uint64_t> no_limit{0};  // unknown domain, no match, whitelisted or replaced
  std::atomic<uint64_t> hits{0};      // hits applied to limits
  // Descriptors whose store call failed and were answered per on_store_failure.
  std::atomic<uint64_t> store_errors{0};
};

class RlsService final : public rlspb::RateLimitService::CallbackService {
 public:
  // `store` and `clock` must outlive the service. `config` may be null until
  // set_config(); calls then fail with UNAVAILABLE.
  RlsService(Store& store, const Clock& clock, std::shared_ptr<const RlsConfig> config,
             RlsOptions options = {});

  void set_config(std::shared_ptr<const RlsConfig> config);
  // Changes options().on_store_failure for the calls that start afterwards
  // (store.redis.on_failure is reloadable).
  void set_on_store_failure(OnStoreFailure on_failure);
  std::shared_ptr<const RlsConfig> config() const;
  const RlsCounters& counters() const { return counters_; }

  // The calls that start afterwards report every decided descriptor to
  // `observer` (null: to nobody), which must stay alive until
  // stop_observing() returns.
  void set_observer(const policy::DecisionObserver* observer);
  // Once this returns no call reports to the observer any more: it waits
  // for the calls in flight that took it (each ends within the store's
  // timeout, or at once with the memory store).
  void stop_observing();

  // ShouldRateLimit calls received and not yet done (their answer not yet
  // sent): shutdown waits for this to reach 0, not for idle connections.
  size_t calls_in_flight() const { return in_flight_.load(std::memory_order_acquire); }

  // Decides `request` into `response`, then calls `done` exactly once (before
  // returning with the memory store; later with a network store). `request`
  // and `response` must stay alive until `done` runs. Errors: INVALID_ARGUMENT
  // (empty domain or descriptor list, a limit override without a unit),
  // UNAVAILABLE (no config, or the store failed).
  using Done = std::function<void(grpc::Status)>;
  void decide(const rlspb::RateLimitRequest& request, rlspb::RateLimitResponse* response,
              Done done);

  grpc::ServerUnaryReactor* ShouldRateLimit(grpc::CallbackServerContext* context,
                                            const rlspb::RateLimitRequest* request,
                                            rlspb::RateLimitResponse* response) override;

 private:
  struct Item;
  struct Call;
  class Reactor;
  // The steps of a call: plan every descriptor, decide the planned ones
  // through the decision step (the HTTP doors' path), then answer.
  grpc::Status plan(Call& call);
  grpc::Status plan_override(const rlspb::RateLimitRequest& request, int index, Item& item) const;
  grpc::Status plan_match(const Domain& domain, const rlspb::RateLimitRequest& request, int index,
                          Item& item) const;
  static void plan_store(Item& item, Limit limit, std::string key);
  void fail(Call& call, const grpc::Status& status);
  void finish(Call& call);
  void finish_item(Call& call, size_t i);
  void report_detailed(const Call& call, const Item& item) const;
  bool apply_modes(Call& call);
  void add_headers(Call& call) const;
  void fill_metadata(Call& call) const;

  const policy::DecisionStep step_;
  std::atomic<std::shared_ptr<const RlsConfig>> config_;
  const RlsOptions options_;
  std::atomic<OnStoreFailure> on_store_failure_;
  RlsCounters counters_;
  std::atomic<size_t> in_flight_{0};
  std::atomic<const policy::DecisionObserver*> observer_{nullptr};
  std::atomic<size_t> observing_{0};  // calls that took observer_
};

}  // namespace sluice::rls
