#include "rls/service.h"

#include <google/protobuf/struct.pb.h>

#include <algorithm>
#include <charconv>
#include <limits>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "policy/decider.h"
#include "policy/key_bound.h"
#include "render/rate_headers.h"
#include "rls/matcher.h"

namespace sluice::rls {
namespace {

constexpr uint32_t kUnlimitedRemaining = std::numeric_limits<uint32_t>::max();

enum class Kind {
  kNoLimit,    // unknown domain, no match, whitelisted, replaced
  kUnlimited,  // rate_limit: {unlimited: true}
  kBlocked,    // requests_per_unit 0: every request is over
  kCheckOnly,  // hits_addend 0: nothing charged, nothing refused
  kStore,      // decided by the store, through the decision step
};

// Until the end of the current window (windows aligned to the epoch).
Nanos aligned_reset(Nanos window, Nanos now) {
  const int64_t w = window.count();
  if (w <= 0) return Nanos{0};
  int64_t into = now.count() % w;
  if (into < 0) into += w;
  return Nanos{w - into};
}

void append_field(std::string* out, std::string_view s) {
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof digits, s.size()).ptr;
  out->append(digits, end);
  out->push_back(':');
  out->append(s);
}

// "rls", the domain, then each entry's key and value (or shared pattern),
// every part prefixed by its length: no request can spell another's key.
// Past 256 bytes what follows "rls|" is kept as its digest
// (policy/key_bound.h): what a request sends never sizes what the store keeps.
std::string store_key(
    std::string_view domain,
    const google::protobuf::RepeatedPtrField<
        ::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor::Entry>& entries,
    const std::vector<const std::string*>* shared) {
  std::string key = "rls|";
  append_field(&key, domain);
  for (int i = 0; i < entries.size(); ++i) {
    append_field(&key, entries[i].key());
    const std::string* pattern =
        shared != nullptr && !shared->empty() ? (*shared)[static_cast<size_t>(i)] : nullptr;
    if (pattern != nullptr) {
      key.push_back('*');
      append_field(&key, *pattern);
    } else {
      key.push_back('=');
      append_field(&key, entries[i].value());
    }
  }
  policy::bound_key_part(key, 4);
  return key;
}

// The metric name envoyproxy/ratelimit gives a limit override: domain.k1_v1.k2_v2.
std::string override_stat_key(const rlspb::RateLimitRequest& request, int index) {
  std::string key = request.domain();
  for (const auto& e : request.descriptors(index).entries()) {
    key.push_back('.');
    key.append(e.key());
    if (!e.value().empty()) {
      key.push_back('_');
      key.append(e.value());
    }
  }
  return key;
}

}  // namespace

// A descriptor's outcome once decided, whatever decided it.
struct Outcome {
  bool over = false;          // over its limit (shadow and quota mode included)
  bool store_failed = false;  // the store could not decide; on_failure answered
  bool claims_quota = false;  // `decision` says what is left (not a failure)
  Decision decision;          // limit = requests_per_unit; see finish_item()
};

// One request descriptor on its way through the call.
struct RlsService::Item {
  Kind kind = Kind::kNoLimit;
  const DescriptorNode* node = nullptr;  // the matched config node; null for an override
  std::string_view name;                 // rate_limit.name (the config outlives the call)
  uint32_t requests_per_unit = 0;
  Unit unit = Unit::kUnknown;
  Nanos window{0};
  bool window_aligned = true;  // fixed windows end on multiples of `window`
  bool shadow_mode = false;
  bool quota_mode = false;
  std::string stat_key;   // only for draft headers and detailed_metric
  bool detailed = false;  // a detailed_metric node, reported to on_detailed_result
  uint64_t hits = 1;
  // The plan of a kStore item: its limit (the rule's, or the override's)
  // under its store key, as every front door plans one (policy/policy.h).
  std::optional<policy::RouteLimit> limit;
  policy::Plan plan;
  policy::Verdict verdict;
  Outcome outcome;

  bool has_limit() const {
    return kind == Kind::kBlocked || kind == Kind::kCheckOnly || kind == Kind::kStore;
  }
};

struct RlsService::Call {
  std::shared_ptr<const RlsConfig> config;
  const rlspb::RateLimitRequest* request = nullptr;
  rlspb::RateLimitResponse* response = nullptr;
  Done done;
  Nanos now{0};
  std::vector<Item> items;
  OnStoreFailure on_store_failure = OnStoreFailure::kError;  // as the call started
  // Store calls in flight, plus one held while they are being issued.
  std::atomic<size_t> pending{1};
  std::vector<size_t> quota_over;  // quota_mode descriptors over their quota
  std::optional<Error> failure;    // the first store failure on_failure answered
  // Where the decisions are reported; `observing` counts the call while it
  // holds one (RlsService::stop_observing).
  const policy::DecisionObserver* observer = nullptr;
  std::atomic<size_t>* observing = nullptr;

  Call() = default;
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;
  ~Call() {
    if (observing != nullptr) observing->fetch_sub(1, std::memory_order_seq_cst);
  }
};

namespace {

// The observer of calls made while none is set.
class NoObserver final : public policy::DecisionObserver {
 public:
  void decided(const policy::Decided&) const override {}
};
const NoObserver kNoObserver;

}  // namespace

// A descriptor's limit under its store key: the one-limit plan of the
// shared decision path.
void RlsService::plan_store(Item& item, Limit limit, std::string key) {
  item.limit =
      policy::RouteLimit{std::string(item.node != nullptr ? std::string_view(limit_name(*item.node))
                                                          : kOverrideLimitName),
                         false,
                         std::move(limit),
                         {}};
  item.plan.limits.push_back(policy::PlannedLimit{&*item.limit, std::move(key)});
  item.kind = Kind::kStore;
}

RlsService::RlsService(Store& store, const Clock& clock, std::shared_ptr<const RlsConfig> config,
                       RlsOptions options)
    : step_(store, clock),
      config_(std::move(config)),
      options_(std::move(options)),
      on_store_failure_(options_.on_store_failure) {}

void RlsService::set_on_store_failure(OnStoreFailure on_failure) {
  on_store_failure_.store(on_failure, std::memory_order_relaxed);
}

void RlsService::set_config(std::shared_ptr<const RlsConfig> config) {
  config_.store(std::move(config), std::memory_order_release);
}

std::shared_ptr<const RlsConfig> RlsService::config() const {
  return config_.load(std::memory_order_acquire);
}

void RlsService::set_observer(const policy::DecisionObserver* observer) {
  observer_.store(observer, std::memory_order_seq_cst);
}

void RlsService::stop_observing() {
  // A call counts itself before it reads observer_ (both seq_cst): it either
  // reads null here or is seen in observing_.
  observer_.store(nullptr, std::memory_order_seq_cst);
  while (observing_.load(std::memory_order_seq_cst) > 0) std::this_thread::yield();
}

// A unary reactor that counts the call in flight until gRPC is done with it
// (the answer sent, or the call cancelled).
class RlsService::Reactor final : public grpc::ServerUnaryReactor {
 public:
  explicit Reactor(std::atomic<size_t>& in_flight) : in_flight_(in_flight) {
    in_flight_.fetch_add(1, std::memory_order_relaxed);
  }
  void OnDone() override {
    in_flight_.fetch_sub(1, std::memory_order_release);
    delete this;
  }
  // OnDone and OnCancel neither block nor take a lock, so gRPC may run them
  // on the thread that completes the call, as it does for its own default
  // reactor. Otherwise it hands every OnDone to its executor thread: a
  // thread hop per call, which took ShouldRateLimit from about 1.1x to 1.4x
  // the CPU of an empty call (docs/BENCHMARKS.md, "Envoy RLS"). gRPC's
  // header reserves the hook for its own reactors; it is a public virtual
  // of the C++ API (1.51), and the rls tests cover OnDone and cancellation.
  bool InternalInlineable() override { return true; }

 private:
  std::atomic<size_t>& in_flight_;
};

grpc::ServerUnaryReactor* RlsService::ShouldRateLimit(grpc::CallbackServerContext* /*context*/,
                                                      const rlspb::RateLimitRequest* request,
                                                      rlspb::RateLimitResponse* response) {
  grpc::ServerUnaryReactor* reactor = new Reactor(in_flight_);
  // `request` and `response` live until Finish().
  if (!options_.executor) {
    decide(*request, response, [reactor](grpc::Status status) { reactor->Finish(status); });
    return reactor;
  }
  // Answers the call if the executor destroys the task without running it,
  // so that no call is left unanswered (gRPC's shutdown would wait for it).
  struct Posted {
    explicit Posted(grpc::ServerUnaryReactor* r) : reactor(r) {}
    Posted(const Posted&) = delete;
    Posted& operator=(const Posted&) = delete;
    grpc::ServerUnaryReactor* reactor;
    bool ran = false;
    ~Posted() {
      if (!ran) reactor->Finish({grpc::StatusCode::UNAVAILABLE, "rate limit service stopping"});
    }
  };
  auto posted = std::make_shared<Posted>(reactor);
  options_.executor([this, posted, request, response] {
    posted->ran = true;
    decide(*request, response,
           [reactor = posted->reactor](grpc::Status status) { reactor->Finish(status); });
  });
  return reactor;
}

// ---------------------------------------------------------------- deciding

void RlsService::decide(const rlspb::RateLimitRequest& request, rlspb::RateLimitResponse* response,
                        Done done) {
  counters_.calls.fetch_add(1, std::memory_order_relaxed);
  auto call = std::make_shared<Call>();
  call->config = config();
  call->request = &request;
  call->response = response;
  call->done = std::move(done);
  const grpc::Status valid = plan(*call);
  if (!valid.ok()) return fail(*call, valid);
  observing_.fetch_add(1, std::memory_order_seq_cst);
  call->observing = &observing_;
  call->observer = observer_.load(std::memory_order_seq_cst);
  const policy::DecisionObserver& observer =
      call->observer != nullptr ? *call->observer : kNoObserver;
  const policy::OnFailure on_failure = call->on_store_failure == OnStoreFailure::kDeny
                                           ? policy::OnFailure::kDeny
                                           : policy::OnFailure::kAllow;
  for (size_t i = 0; i < call->items.size(); ++i) {
    Item& item = call->items[i];
    if (item.kind != Kind::kStore) continue;
    call->pending.fetch_add(1, std::memory_order_relaxed);
    // Every descriptor is decided on its own, as envoyproxy/ratelimit does:
    // one over its limit does not stop the others from being charged.
    // on_failure error (no verdict at all) is answered in finish().
    const policy::Ask ask{item.plan, call->now,  item.hits,
                          Nanos{0},  on_failure, item.shadow_mode || options_.global_shadow_mode};
    step_.decide(ask, observer, [this, call, i](policy::Verdict verdict) {
      call->items[i].verdict = std::move(verdict);
      if (call->pending.fetch_sub(1, std::memory_order_acq_rel) == 1) finish(*call);
    });
  }
  if (call->pending.fetch_sub(1, std::memory_order_acq_rel) == 1) finish(*call);
}

void RlsService::fail(Call& call, const grpc::Status& status) {
  counters_.call_errors.fetch_add(1, std::memory_order_relaxed);
  call.done(status);
}

grpc::Status RlsService::plan(Call& call) {
  const rlspb::RateLimitRequest& request = *call.request;
  if (request.domain().empty()) {
    return {grpc::StatusCode::INVALID_ARGUMENT, "rate limit domain must not be empty"};
  }
  if (request.descriptors().empty()) {
    return {grpc::StatusCode::INVALID_ARGUMENT, "rate limit descriptor list must not be empty"};
  }
  if (call.config == nullptr) {
    return {grpc::StatusCode::UNAVAILABLE, "no rate limit configuration loaded"};
  }
  call.now = step_.clock().now();
  call.on_store_failure = on_store_failure_.load(std::memory_order_relaxed);
  const Domain* domain = call.config->find_domain(request.domain());
  call.items.resize(static_cast<size_t>(request.descriptors_size()));
  std::vector<std::string_view> replaced;  // rule names; usually none
  for (int i = 0; i < request.descriptors_size(); ++i) {
    Item& item = call.items[static_cast<size_t>(i)];
    const auto& d = request.descriptors(i);
    item.hits = d.has_hits_addend() ? d.hits_addend().value()
                                    : std::max<uint64_t>(1, request.hits_addend());
    if (domain == nullptr) continue;
    const grpc::Status planned =
        d.has_limit() ? plan_override(request, i, item) : plan_match(*domain, request, i, item);
    if (!planned.ok()) return planned;
    if (item.node != nullptr && item.node->rule) {
      for (const std::string& r : item.node->rule->replaces) replaced.push_back(r);
    }
  }
  // A rule named by another matched rule's `replaces` does not apply; a
  // descriptor asking for no hits is checked, never charged.
  for (Item& item : call.items) {
    if (item.node != nullptr && !item.name.empty() &&
        std::find(replaced.begin(), replaced.end(), item.name) != replaced.end()) {
      item.kind = Kind::kNoLimit;
      item.node = nullptr;
    }
    if ((item.kind == Kind::kStore || item.kind == Kind::kBlocked) && item.hits == 0) {
      item.kind = Kind::kCheckOnly;
    }
  }
  return grpc::Status::OK;
}

// A descriptor's `limit` override: a fixed window of requests_per_unit per
// unit, whatever the entries match.
grpc::Status RlsService::plan_override(const rlspb::RateLimitRequest& request, int index,
                                       Item& item) const {
  const auto& d = request.descriptors(index);
  const int unit = d.limit().unit();
  if (unit < static_cast<int>(Unit::kSecond) || unit > static_cast<int>(Unit::kWeek)) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            "descriptor " + std::to_string(index) + ": the limit override has no unit"};
  }
  item.unit = static_cast<Unit>(unit);
  item.requests_per_unit = d.limit().requests_per_unit();
  item.window = unit_length(item.unit);
  if (options_.response_headers == ResponseHeaders::kDraft10) {
    item.stat_key = override_stat_key(request, index);
  }
  if (item.requests_per_unit == 0) {
    item.kind = Kind::kBlocked;
    return grpc::Status::OK;
  }
  Result<Limit> limit = Limit::fixed_window(item.requests_per_unit, item.window);
  if (!limit.ok()) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            "descriptor " + std::to_string(index) + ": " + limit.error().message};
  }
  plan_store(item, *limit, store_key(request.domain(), d.entries(), nullptr));
  return grpc::Status::OK;
}

// A descriptor matched against the domain's descriptor tree (matcher.h).
grpc::Status RlsService::plan_match(const Domain& domain, const rlspb::RateLimitRequest& request,
                                    int index, Item& item) const {
  const auto& d = request.descriptors(index);
  std::vector<EntryView> entries;
  entries.reserve(static_cast<size_t>(d.entries_size()));
  for (const auto& e : d.entries()) entries.push_back(EntryView{e.key(), e.value()});
  const bool want_stat_key = options_.response_headers == ResponseHeaders::kDraft10;
  std::optional<Match> match = match_descriptor(domain, entries, want_stat_key);
  if (!match) return grpc::Status::OK;
  item.detailed = match->node->detailed_metric && options_.on_detailed_result;
  // The detailed key is only built when asked for: match again for it (the
  // rare detailed_metric node pays, not every descriptor).
  if (item.detailed && !want_stat_key) match = match_descriptor(domain, entries, true);
  const RateLimitRule& rule = match->rule();
  item.node = match->node;
  item.name = rule.name;
  item.requests_per_unit = rule.requests_per_unit;
  item.unit = rule.unit;
  item.window = rule.window;
  item.window_aligned = !rule.limit || rule.limit->algorithm() == Algorithm::kFixedWindow;
  item.shadow_mode = match->node->shadow_mode;
  item.quota_mode = match->node->quota_mode;
  item.stat_key = std::move(match->stat_key);
  if (rule.unlimited) {
    item.kind = Kind::kUnlimited;
  } else if (!rule.limit) {
    item.kind = Kind::kBlocked;
  } else {
    plan_store(item, *rule.limit,
               store_key(request.domain(), d.entries(), &match->shared_patterns));
  }
  return grpc::Status::OK;
}

// ---------------------------------------------------------------- answering

void RlsService::finish(Call& call) {
  for (const Item& item : call.items) {
    if (item.kind != Kind::kStore || !item.verdict.store_failed()) continue;
    // No on_failure configured: the call fails and Envoy applies its own
    // failure_mode_deny.
    if (call.on_store_failure == OnStoreFailure::kError) {
      return fail(call, grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                     "rate limit store: " + item.verdict.error));
    }
    if (!call.failure) call.failure = Error{ErrorCode::kStoreUnavailable, item.verdict.error};
  }
  for (size_t i = 0; i < call.items.size(); ++i) finish_item(call, i);
  const bool over = apply_modes(call);
  rlspb::RateLimitResponse& response = *call.response;
  if (over) counters_.calls_over_limit.fetch_add(1, std::memory_order_relaxed);
  response.set_overall_code(over && !options_.global_shadow_mode
                                ? rlspb::RateLimitResponse::OVER_LIMIT
                                : rlspb::RateLimitResponse::OK);
  add_headers(call);
  fill_metadata(call);
  if (call.failure && options_.on_store_error) {
    options_.on_store_error(*call.failure, call.on_store_failure == OnStoreFailure::kAllow);
  }
  call.done(grpc::Status::OK);
}

// The status of one descriptor, and its outcome: the decision that
// headers are rendered from (for a limit the store did not decide, one that
// says the same as the status: nothing left until the window ends).
void RlsService::finish_item(Call& call, size_t i) {
  Item& item = call.items[i];
  auto* status = call.response->add_statuses();
  status->set_code(rlspb::RateLimitResponse::OK);
  if (item.kind == Kind::kNoLimit) {
    counters_.no_limit.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (item.kind == Kind::kUnlimited) {
    counters_.unlimited.fetch_add(1, std::memory_order_relaxed);
    status->set_limit_remaining(kUnlimitedRemaining);
    return;
  }
  auto* current = status->mutable_current_limit();
  current->set_name(std::string(item.name));
  current->set_requests_per_unit(item.requests_per_unit);
  current->set_unit(static_cast<rlspb::RateLimitResponse::RateLimit::Unit>(item.unit));
  if (item.kind == Kind::kCheckOnly) return;

  Outcome& out = item.outcome;
  out.decision.limit = item.requests_per_unit;
  const policy::Verdict& v = item.verdict;
  if (item.kind == Kind::kStore && v.store_failed()) {
    // The verdict on_failure gave, as the HTTP doors answer it: allowed
    // with nothing left, or denied with its retry; no quota is claimed.
    counters_.store_errors.fetch_add(1, std::memory_order_relaxed);
    out.store_failed = true;
    out.over = !v.allowed();
    out.decision.retry_after = v.decision.retry_after;
  } else if (item.kind == Kind::kBlocked || v.invalid()) {
    // Refused without a store decision (requests_per_unit 0, or more hits
    // than the limit holds): the window (or the period) has to pass.
    out.over = true;
    out.claims_quota = true;
    out.decision.retry_after =
        item.window_aligned ? aligned_reset(item.window, call.now) : item.window;
  } else {
    out.over = !v.allowed();
    out.claims_quota = true;
    out.decision = v.decision;
    out.decision.limit = item.requests_per_unit;
    if (v.allowed()) counters_.hits.fetch_add(item.hits, std::memory_order_relaxed);
  }
  out.decision.allowed = !out.over;
  if (out.over) out.decision.remaining = 0;
  status->set_limit_remaining(
      static_cast<uint32_t>(std::min<uint64_t>(out.decision.remaining, kUnlimitedRemaining)));
  // A failure that allowed claims nothing, not even when the limit resets.
  if (out.store_failed && !out.over) return;
  const Nanos until = out.over ? out.decision.retry_after : out.decision.reset_after;
  status->mutable_duration_until_reset()->set_seconds(render::seconds_rounded_up(until));
  if (out.store_failed) return;
  (out.over ? counters_.over_limit : counters_.within_limit)
      .fetch_add(1, std::memory_order_relaxed);
  if (item.detailed) report_detailed(call, item);
}

// envoyproxy/ratelimit's near limit: allowed, and the hits used after this
// one pass floor(near_limit_ratio * limit).
void RlsService::report_detailed(const Call& call, const Item& item) const {
  const Outcome& out = item.outcome;
  DetailedResult r;
  r.domain = call.request->domain();
  r.descriptor = item.stat_key;
  if (r.descriptor.starts_with(r.domain) && r.descriptor.size() > r.domain.size()) {
    r.descriptor.remove_prefix(r.domain.size() + 1);  // "domain."
  }
  if (out.over) {
    r.result = DetailedResult::Kind::kOverLimit;
  } else {
    const uint64_t limit = item.requests_per_unit;
    const uint64_t used = limit - std::min<uint64_t>(out.decision.remaining, limit);
    const auto threshold =
        static_cast<uint64_t>(options_.near_limit_ratio * static_cast<double>(limit));
    r.result = used > threshold ? DetailedResult::Kind::kNearLimit : DetailedResult::Kind::kOk;
  }
  options_.on_detailed_result(r);
}

// Shadow and quota mode turn over-limit descriptors into OK; returns whether
// the call is over its limits.
bool RlsService::apply_modes(Call& call) {
  rlspb::RateLimitResponse& response = *call.response;
  bool any_over = false;
  size_t quota_limits = 0;  // quota_mode descriptors with a limit
  std::vector<size_t>& quota_over = call.quota_over;
  for (size_t i = 0; i < call.items.size(); ++i) {
    const Item& item = call.items[i];
    if (!item.has_limit() || item.kind == Kind::kCheckOnly) continue;
    if (item.quota_mode) ++quota_limits;
    if (!item.outcome.over) continue;
    if (item.shadow_mode) {
      if (!item.outcome.store_failed) counters_.shadow_mode.fetch_add(1, std::memory_order_relaxed);
    } else if (item.quota_mode) {
      if (!item.outcome.store_failed) {
        counters_.quota_mode_over.fetch_add(1, std::memory_order_relaxed);
      }
      quota_over.push_back(i);
    } else {
      response.mutable_statuses(static_cast<int>(i))
          ->set_code(rlspb::RateLimitResponse::OVER_LIMIT);
      any_over = true;
    }
  }
  // Quota mode: over quota is allowed while another quota still has room.
  if (quota_limits > 0 && quota_over.size() == quota_limits) {
    for (size_t i : quota_over) {
      response.mutable_statuses(static_cast<int>(i))
          ->set_code(rlspb::RateLimitResponse::OVER_LIMIT);
    }
    any_over = true;
  }
  return any_over;
}

// response_headers: the same fields the HTTP doors write, rendered by
// render/rate_headers.h from the descriptors' decisions.
void RlsService::add_headers(Call& call) const {
  if (options_.response_headers == ResponseHeaders::kOff) return;
  std::vector<Decision> decisions;
  std::vector<render::DraftItem> items;
  for (const Item& item : call.items) {
    if (!item.has_limit() || item.kind == Kind::kCheckOnly || !item.outcome.claims_quota) {
      continue;
    }
    decisions.push_back(item.outcome.decision);
    render::DraftItem draft;
    draft.name = item.name.empty() ? std::string_view(item.stat_key) : item.name;
    if (item.limit) {
      draft = render::draft_item(draft.name, item.limit->limit, item.outcome.decision);
    } else {
      draft.window_s = render::seconds_rounded_up(item.window);
      draft.until_s = render::seconds_rounded_up(item.outcome.decision.retry_after);
    }
    draft.quota = item.requests_per_unit;
    items.push_back(draft);
  }
  if (decisions.empty()) return;
  render::RateHeaders headers;
  if (options_.response_headers == ResponseHeaders::kRateLimit) {
    render::append_envoy_fields(most_restrictive(decisions), headers);
  } else {
    render::append_draft_fields(items, headers);
  }
  for (const render::RateHeaders::Field& f : headers) {
    auto* h = call.response->add_response_headers_to_add();
    h->set_key(std::string(f.name));
    h->set_value(std::string(f.value));
  }
}

// Dynamic metadata, when the options or the config ask for it.
void RlsService::fill_metadata(Call& call) const {
  bool quota_enabled = false;
  bool with_metadata = false;
  for (const Item& item : call.items) {
    quota_enabled = quota_enabled || (item.quota_mode && item.has_limit());
    with_metadata = with_metadata || (item.node != nullptr && item.node->metadata != nullptr);
  }
  if (!options_.dynamic_metadata && !quota_enabled && !with_metadata) return;
  google::protobuf::Struct metadata;
  auto& fields = *metadata.mutable_fields();
  if (options_.dynamic_metadata) {
    fields["domain"].set_string_value(call.request->domain());
    auto* list = fields["descriptors"].mutable_list_value();
    for (const auto& d : call.request->descriptors()) {
      auto* entries = (*list->add_values()->mutable_struct_value()->mutable_fields())["entries"]
                          .mutable_list_value();
      for (const auto& e : d.entries())
        entries->add_values()->set_string_value(e.key() + "=" + e.value());
    }
  }
  if (options_.dynamic_metadata || quota_enabled) {
    fields["quotaModeEnabled"].set_bool_value(quota_enabled);
    if (!call.quota_over.empty()) {
      auto* violations = fields["quotaModeViolations"].mutable_list_value();
      for (size_t i : call.quota_over) {
        violations->add_values()->set_number_value(static_cast<double>(i));
      }
    }
  }
  for (const Item& item : call.items) {
    if (item.node == nullptr || item.node->metadata == nullptr || item.outcome.over) continue;
    for (const auto& [key, value] : item.node->metadata->fields()) fields.insert({key, value});
  }
  if (!fields.empty()) *call.response->mutable_dynamic_metadata() = std::move(metadata);
}

}  // namespace sluice::rls
