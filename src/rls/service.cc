#include "rls/service.h"

#include <google/protobuf/struct.pb.h>

#include <algorithm>
#include <charconv>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "rls/matcher.h"

namespace sluice::rls {
namespace {

constexpr uint32_t kUnlimitedRemaining = std::numeric_limits<uint32_t>::max();
constexpr int64_t kSecondNs = 1'000'000'000;

enum class Kind {
  kNoLimit,    // unknown domain, no match, whitelisted, replaced
  kUnlimited,  // rate_limit: {unlimited: true}
  kBlocked,    // requests_per_unit 0: every request is over
  kCheckOnly,  // hits_addend 0: nothing charged, nothing refused
  kStore,      // decided by the store
};

// One request descriptor on its way through the call.
struct Item {
  Kind kind = Kind::kNoLimit;
  const DescriptorNode* node = nullptr;  // the matched config node; null for an override
  const Limit* limit = nullptr;          // the limit the store applies
  std::optional<Limit> override_limit;   // owns the limit of a `limit` override
  std::string_view name;                 // rate_limit.name (the config outlives the call)
  uint32_t requests_per_unit = 0;
  Unit unit = Unit::kUnknown;
  Nanos window{0};
  bool window_aligned = true;  // fixed windows end on multiples of `window`
  bool shadow_mode = false;
  bool quota_mode = false;
  std::string stat_key;  // only for draft-10 headers
  std::string store_key;
  uint64_t hits = 1;
  Decision decision;
  Status store_status;

  bool has_limit() const {
    return kind == Kind::kBlocked || kind == Kind::kCheckOnly || kind == Kind::kStore;
  }
};

// Until the end of the current window (windows aligned to the epoch).
Nanos aligned_reset(Nanos window, Nanos now) {
  const int64_t w = window.count();
  if (w <= 0) return Nanos{0};
  int64_t into = now.count() % w;
  if (into < 0) into += w;
  return Nanos{w - into};
}

int64_t ceil_seconds(Nanos d) {
  if (d.count() <= 0) return 0;
  return (d.count() + kSecondNs - 1) / kSecondNs;
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

// A structured-field string: printable ASCII, '"' and '\' escaped.
std::string sf_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c >= 0x20 && c < 0x7f) {
      out.push_back(c);
    } else {
      out.push_back('?');
    }
  }
  out.push_back('"');
  return out;
}

void add_header(rlspb::RateLimitResponse* response, std::string key, std::string value) {
  auto* h = response->add_response_headers_to_add();
  h->set_key(std::move(key));
  h->set_value(std::move(value));
}

}  // namespace

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
};

RlsService::RlsService(Store& store, const Clock& clock, std::shared_ptr<const RlsConfig> config,
                       RlsOptions options)
    : store_(store),
      clock_(clock),
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

 private:
  std::atomic<size_t>& in_flight_;
};

grpc::ServerUnaryReactor* RlsService::ShouldRateLimit(grpc::CallbackServerContext* /*context*/,
                                                      const rlspb::RateLimitRequest* request,
                                                      rlspb::RateLimitResponse* response) {
  grpc::ServerUnaryReactor* reactor = new Reactor(in_flight_);
  // `request` and `response` live until Finish().
  auto run = [this, reactor, request, response] {
    decide(*request, response, [reactor](grpc::Status status) { reactor->Finish(status); });
  };
  if (options_.executor) {
    options_.executor(std::move(run));
  } else {
    run();
  }
  return reactor;
}

void RlsService::decide(const rlspb::RateLimitRequest& request, rlspb::RateLimitResponse* response,
                        Done done) {
  counters_.calls.fetch_add(1, std::memory_order_relaxed);
  auto fail = [&](grpc::StatusCode code, std::string message) {
    counters_.call_errors.fetch_add(1, std::memory_order_relaxed);
    done(grpc::Status(code, std::move(message)));
  };
  if (request.domain().empty()) {
    return fail(grpc::StatusCode::INVALID_ARGUMENT, "rate limit domain must not be empty");
  }
  if (request.descriptors().empty()) {
    return fail(grpc::StatusCode::INVALID_ARGUMENT, "rate limit descriptor list must not be empty");
  }
  auto call = std::make_shared<Call>();
  call->config = config();
  if (call->config == nullptr) {
    return fail(grpc::StatusCode::UNAVAILABLE, "no rate limit configuration loaded");
  }
  call->request = &request;
  call->response = response;
  call->now = clock_.now();
  call->on_store_failure = on_store_failure_.load(std::memory_order_relaxed);
  const Domain* domain = call->config->find_domain(request.domain());
  const int n = request.descriptors_size();
  call->items.resize(static_cast<size_t>(n));

  // Pass 1: find each descriptor's rule.
  std::vector<EntryView> entries;
  std::vector<std::string_view> replaced;  // names; usually none
  const bool want_stat_key = options_.response_headers == ResponseHeaders::kDraft10;
  for (int i = 0; i < n; ++i) {
    const auto& d = request.descriptors(i);
    Item& item = call->items[static_cast<size_t>(i)];
    item.hits = d.has_hits_addend() ? d.hits_addend().value()
                                    : std::max<uint64_t>(1, request.hits_addend());
    if (domain == nullptr) continue;
    if (d.has_limit()) {
      const int unit = d.limit().unit();
      if (unit < static_cast<int>(Unit::kSecond) || unit > static_cast<int>(Unit::kWeek)) {
        return fail(grpc::StatusCode::INVALID_ARGUMENT,
                    "descriptor " + std::to_string(i) + ": the limit override has no unit");
      }
      item.unit = static_cast<Unit>(unit);
      item.requests_per_unit = d.limit().requests_per_unit();
      item.window = unit_length(item.unit);
      if (want_stat_key) item.stat_key = override_stat_key(request, i);
      item.store_key = store_key(request.domain(), d.entries(), nullptr);
      if (item.requests_per_unit == 0) {
        item.kind = Kind::kBlocked;
        continue;
      }
      Result<Limit> limit = Limit::fixed_window(item.requests_per_unit, item.window);
      if (!limit.ok()) {
        return fail(grpc::StatusCode::INVALID_ARGUMENT,
                    "descriptor " + std::to_string(i) + ": " + limit.error().message);
      }
      item.override_limit = *limit;
      item.limit = &*item.override_limit;
      item.kind = Kind::kStore;
      continue;
    }
    entries.clear();
    for (const auto& e : d.entries()) entries.push_back(EntryView{e.key(), e.value()});
    std::optional<Match> match = match_descriptor(*domain, entries, want_stat_key);
    if (!match) continue;
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
    for (const std::string& r : rule.replaces) replaced.push_back(r);
    if (rule.unlimited) {
      item.kind = Kind::kUnlimited;
    } else if (!rule.limit) {
      item.kind = Kind::kBlocked;
    } else {
      item.kind = Kind::kStore;
      item.limit = &*rule.limit;
      item.store_key = store_key(request.domain(), d.entries(), &match->shared_patterns);
    }
  }

  // Pass 2: drop replaced rules, then ask the store for the rest.
  for (Item& item : call->items) {
    if (item.node != nullptr && !item.name.empty() &&
        std::find(replaced.begin(), replaced.end(), item.name) != replaced.end()) {
      item.kind = Kind::kNoLimit;
      item.node = nullptr;
    }
    if ((item.kind == Kind::kStore || item.kind == Kind::kBlocked) && item.hits == 0) {
      item.kind = Kind::kCheckOnly;
    }
  }
  for (size_t i = 0; i < call->items.size(); ++i) {
    Item& item = call->items[i];
    if (item.kind != Kind::kStore) continue;
    const AcquireRequest acquire{item.limit, item.store_key, item.hits};
    call->pending.fetch_add(1, std::memory_order_relaxed);
    store_.acquire_async(std::span<const AcquireRequest>(&acquire, 1), call->now,
                         std::span<Decision>(&item.decision, 1), [this, call, i](Status status) {
                           call->items[i].store_status = std::move(status);
                           if (call->pending.fetch_sub(1, std::memory_order_acq_rel) == 1) {
                             finish(*call);
                           }
                         });
  }
  call->done = std::move(done);
  if (call->pending.fetch_sub(1, std::memory_order_acq_rel) == 1) finish(*call);
}

namespace {

// A failure on_store_failure answers for (the store could not decide), as
// opposed to a request the store refuses whatever its state.
bool store_failed(const Status& status) {
  return !status.ok() && status.error().code != ErrorCode::kCostExceedsLimit &&
         status.error().code != ErrorCode::kInvalidArgument;
}

}  // namespace

void RlsService::finish(Call& call) {
  const Error* first_failure = nullptr;
  for (const Item& item : call.items) {
    if (item.store_status.ok() || item.store_status.error().code == ErrorCode::kCostExceedsLimit) {
      continue;
    }
    if (call.on_store_failure == OnStoreFailure::kError || !store_failed(item.store_status)) {
      counters_.call_errors.fetch_add(1, std::memory_order_relaxed);
      call.done(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                             "rate limit store: " + item.store_status.error().message));
      return;
    }
    if (first_failure == nullptr) first_failure = &item.store_status.error();
  }
  const bool failure_allows = call.on_store_failure == OnStoreFailure::kAllow;

  rlspb::RateLimitResponse& response = *call.response;
  const size_t n = call.items.size();
  std::vector<bool> over(n, false);
  bool any_over = false;    // an enforced descriptor over its limit
  size_t quota_limits = 0;  // quota_mode descriptors with a limit
  std::vector<size_t> quota_over;
  for (size_t i = 0; i < n; ++i) {
    Item& item = call.items[i];
    auto* status = response.add_statuses();
    status->set_code(rlspb::RateLimitResponse::OK);
    if (item.kind == Kind::kNoLimit) {
      counters_.no_limit.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    if (item.kind == Kind::kUnlimited) {
      counters_.unlimited.fetch_add(1, std::memory_order_relaxed);
      status->set_limit_remaining(kUnlimitedRemaining);
      continue;
    }
    auto* current = status->mutable_current_limit();
    current->set_name(std::string(item.name));
    current->set_requests_per_unit(item.requests_per_unit);
    current->set_unit(static_cast<rlspb::RateLimitResponse::RateLimit::Unit>(item.unit));
    if (item.kind == Kind::kCheckOnly) continue;

    if (store_failed(item.store_status)) {
      // on_failure: allow answers OK with nothing left; deny answers as over
      // the limit, to be retried in a second (as the HTTP side's Retry-After: 1).
      counters_.store_errors.fetch_add(1, std::memory_order_relaxed);
      status->set_limit_remaining(0);
      if (item.quota_mode) ++quota_limits;
      if (failure_allows) continue;
      over[i] = true;
      status->mutable_duration_until_reset()->set_seconds(1);
      if (item.shadow_mode) continue;
      if (item.quota_mode) {
        quota_over.push_back(i);
        continue;
      }
      status->set_code(rlspb::RateLimitResponse::OVER_LIMIT);
      any_over = true;
      continue;
    }
    Nanos until_reset;
    uint64_t remaining = 0;
    if (item.kind == Kind::kBlocked || !item.store_status.ok()) {
      // Refused without a store decision: the window (or the period) has to pass.
      over[i] = true;
      until_reset = item.window_aligned ? aligned_reset(item.window, call.now) : item.window;
    } else {
      over[i] = !item.decision.allowed;
      remaining = item.decision.remaining;
      until_reset = item.decision.allowed ? item.decision.reset_after : item.decision.retry_after;
      if (item.decision.allowed) counters_.hits.fetch_add(item.hits, std::memory_order_relaxed);
    }
    status->set_limit_remaining(
        static_cast<uint32_t>(std::min<uint64_t>(remaining, kUnlimitedRemaining)));
    status->mutable_duration_until_reset()->set_seconds(ceil_seconds(until_reset));
    if (item.quota_mode) ++quota_limits;
    if (!over[i]) {
      counters_.within_limit.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    counters_.over_limit.fetch_add(1, std::memory_order_relaxed);
    status->set_limit_remaining(0);
    if (item.shadow_mode) {
      counters_.shadow_mode.fetch_add(1, std::memory_order_relaxed);
    } else if (item.quota_mode) {
      counters_.quota_mode_over.fetch_add(1, std::memory_order_relaxed);
      quota_over.push_back(i);
    } else {
      status->set_code(rlspb::RateLimitResponse::OVER_LIMIT);
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
  if (any_over) counters_.calls_over_limit.fetch_add(1, std::memory_order_relaxed);
  response.set_overall_code(any_over && !options_.global_shadow_mode
                                ? rlspb::RateLimitResponse::OVER_LIMIT
                                : rlspb::RateLimitResponse::OK);

  // Response headers.
  if (options_.response_headers == ResponseHeaders::kRateLimit) {
    // The most restrictive descriptor: when refused, the refusing one with the
    // longest wait; else the one with the least remaining.
    int pick = -1;
    for (int i = 0; i < response.statuses_size(); ++i) {
      const auto& s = response.statuses(i);
      if (!s.has_current_limit() || call.items[static_cast<size_t>(i)].kind == Kind::kCheckOnly) {
        continue;
      }
      if (pick < 0) {
        pick = i;
        continue;
      }
      const auto& p = response.statuses(pick);
      const bool s_over = s.code() == rlspb::RateLimitResponse::OVER_LIMIT;
      const bool p_over = p.code() == rlspb::RateLimitResponse::OVER_LIMIT;
      if (s_over != p_over) {
        if (s_over) pick = i;
      } else if (s_over ? s.duration_until_reset().seconds() > p.duration_until_reset().seconds()
                        : s.limit_remaining() < p.limit_remaining()) {
        pick = i;
      }
    }
    if (pick >= 0) {
      const auto& s = response.statuses(pick);
      add_header(&response, "RateLimit-Limit",
                 std::to_string(s.current_limit().requests_per_unit()));
      add_header(&response, "RateLimit-Remaining", std::to_string(s.limit_remaining()));
      add_header(&response, "RateLimit-Reset", std::to_string(s.duration_until_reset().seconds()));
    }
  } else if (options_.response_headers == ResponseHeaders::kDraft10) {
    std::string policy, state;
    for (int i = 0; i < response.statuses_size(); ++i) {
      const Item& item = call.items[static_cast<size_t>(i)];
      const auto& s = response.statuses(i);
      if (!s.has_current_limit() || item.kind == Kind::kCheckOnly) continue;
      const std::string name =
          sf_string(item.name.empty() ? std::string_view(item.stat_key) : item.name);
      if (!policy.empty()) {
        policy += ", ";
        state += ", ";
      }
      policy += name + ";q=" + std::to_string(item.requests_per_unit) +
                ";w=" + std::to_string(ceil_seconds(item.window));
      state += name + ";r=" + std::to_string(s.limit_remaining()) +
               ";t=" + std::to_string(s.duration_until_reset().seconds());
    }
    if (!policy.empty()) {
      add_header(&response, "RateLimit-Policy", policy);
      add_header(&response, "RateLimit", state);
    }
  }

  // Dynamic metadata, when the options or the config ask for it.
  bool quota_enabled = false;
  bool with_metadata = false;
  for (size_t i = 0; i < n; ++i) {
    const Item& item = call.items[i];
    quota_enabled = quota_enabled || (item.quota_mode && item.has_limit());
    with_metadata = with_metadata || (item.node != nullptr && item.node->metadata != nullptr);
  }
  if (options_.dynamic_metadata || quota_enabled || with_metadata) {
    fill_metadata(call, quota_enabled, quota_over, over);
  }

  if (first_failure != nullptr && options_.on_store_error) {
    options_.on_store_error(*first_failure, failure_allows);
  }
  call.done(grpc::Status::OK);
}

void RlsService::fill_metadata(Call& call, bool quota_enabled,
                               const std::vector<size_t>& quota_over,
                               const std::vector<bool>& over) const {
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
    if (!quota_over.empty()) {
      auto* violations = fields["quotaModeViolations"].mutable_list_value();
      for (size_t i : quota_over)
        violations->add_values()->set_number_value(static_cast<double>(i));
    }
  }
  for (size_t i = 0; i < call.items.size(); ++i) {
    const Item& item = call.items[i];
    if (item.node == nullptr || item.node->metadata == nullptr || over[i]) continue;
    for (const auto& [key, value] : item.node->metadata->fields()) fields.insert({key, value});
  }
  if (!fields.empty()) *call.response->mutable_dynamic_metadata() = std::move(metadata);
}

}  // namespace sluice::rls
