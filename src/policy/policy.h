// Policy: a loaded Config compiled for matching, and the planning of one
// request: which route applies, which limits, and under which store keys.
//
// A Policy is immutable once built; the server holds it in a shared_ptr and
// swaps the pointer atomically on reload, so a request sees one whole config.
// Thread-safety: all const methods may be called concurrently.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "policy/config.h"
#include "policy/consumer_directory.h"
#include "policy/request.h"

namespace sluice::policy {

// One limit of a request, with the store key it applies to.
struct PlannedLimit {
  const RouteLimit* limit = nullptr;
  // "<scope>|<client key>": the scope is "policy:<name>" for a named policy
  // (shared by every route that names it) or "route:<route name>#<i>" for an
  // inline limit, so equal limit definitions on different routes never share state.
  // The client key is the route's, or the limit's own `key:` (RouteLimit::key).
  std::string store_key;
};

// Why front doors answer a request without deciding it; the first reason
// found when there are several.
enum class Refusal : uint8_t {
  kNone,
  // The path is refused (normalize_path: a separator paths: rejects, %00,
  // escapes that are not UTF-8): 400 BAD_PATH. The rest of the plan is
  // still filled.
  kBadPath,
  // access.deny holds the client: 403. (A client in access.allow gets a
  // plan without limits.)
  kAccessDenied,
  // The route lists `plan` (or /v1/check names a consumer), the consumer is
  // unknown (or sent no id) and `consumers.unknown` is reject: 401
  // UNKNOWN_CONSUMER.
  kUnknownConsumer,
};

struct Plan {
  const Route* route = nullptr;  // nullptr: no route and no default -> not limited
  std::string normalized_path;
  Refusal refusal = Refusal::kNone;
  // With paths.forward: normalized, the target the upstream gets when the
  // path was not sent normalised: the normalised path with its case as sent,
  // then the query as sent. Empty: forward the request target as it came
  // (its path is the one matched, or paths.forward is original).
  std::string forward_target;
  IpAddress client;
  std::string client_key;  // "ip:192.0.2.1", "h:x-api-key=abc", "global", joined by '+'
  std::vector<PlannedLimit> limits;
  // The route lists `plan`: the consumer's plan, whose limits follow the
  // route's own in `limits`. Null when the route does not list it.
  const ConsumerPlan* consumer_plan = nullptr;
};

class Policy {
 public:
  explicit Policy(Config config);

  const Config& config() const { return config_; }

  // The first route matching (method, normalised path), else the default
  // route, else nullptr. A route's method matches when it is `*` or equal
  // (methods are case-sensitive); a GET route matches HEAD too.
  const Route* match(std::string_view method, std::string_view normalized_path) const;

  // A named policy, for /v1/check. nullptr when unknown.
  const NamedPolicy* find_policy(std::string_view name) const;

  // The RouteLimit of a named policy (name = the policy's name,
  // named_policy = true), for /v1/check. nullptr when unknown.
  const RouteLimit* find_policy_limit(std::string_view name) const;

  // Normalises the path, matches a route, finds the client address and key.
  // Route patterns use the same normalisation. A trailing "/*" matches the
  // prefix itself and anything below it: "/static/*" matches "/static",
  // "/static/a/b", but not "/staticfiles". {param} matches one non-empty segment.
  //
  // Client keys: "ip" -> "ip:" + client_key_text(); "header:NAME" ->
  // "h:NAME=" + the value with '%', '+', '|', space, controls and non-ASCII
  // bytes percent-escaped (so a value can never forge another part or scope),
  // or the "ip:" part when the header is missing or empty; "cookie:NAME" ->
  // "c:NAME=...", "query:NAME" -> "q:NAME=..." likewise (key_sources.h says
  // when a value is unusable); "jwt:CLAIM" -> "j:CLAIM=..." from the
  // Authorization bearer token when it verifies at request.now (jwt.h), else
  // the "ip:" part; "global" -> "global"; parts joined by '+'. A value
  // longer than 256 bytes once escaped is kept as its digest (key_bound.h).
  Plan plan(const RequestInfo& request) const;

  // A plan for /v1/check: the named policy applied to a caller-given key
  // (store key policy_store_key(name, key); client_key the key as stored,
  // bounded_key_part(key)); route = nullptr, client unset.
  // No limits (so decide() says "not limited") when the policy is unknown.
  Plan plan_policy(std::string_view policy_name, std::string_view key) const;

  // The consumers in force (the file's, with the changes made at runtime),
  // shared by every copy of this Policy; null without `consumers:`.
  ConsumerDirectory* consumers() const { return consumers_.get(); }

  // A plan under `plans:` and its index, or nullptr.
  const ConsumerPlan* find_plan(std::string_view name, size_t* index = nullptr) const;

  // A plan for /v1/check {"consumer": id}: the consumer's plan's limits,
  // keyed by the consumer as the gateway keys it (so both spend one quota).
  // An unknown id gets the `unknown` plan keyed by `unknown_key` (the
  // caller's "key", bounded as key_bound.h says; "unknown" when empty, one key for all, so ids
  // never mint fresh state), or Refusal::kUnknownConsumer with `unknown: reject`. No limits without
  // `consumers:`.
  Plan plan_consumer(std::string_view id, std::string_view unknown_key) const;

  // The client key `route` forms for a client as an operator writes it
  // (/admin/reset): a client key as plan() forms it ("ip:192.0.2.1",
  // "h:x-api-key=abc", "global", parts joined by '+') is taken as it is
  // (a value longer than 256 bytes replaced by its digest, as plan() does); an
  // IP address is keyed as plan() keys it (IPv6 by its prefix) when the
  // route is keyed by ip; any other text is the header value of a route
  // keyed by one header. Nothing when the route's key has several parts and
  // `client` is not already a client key (it cannot be guessed).
  std::optional<std::string> client_key_of(const Route& route, std::string_view client) const;

  // The store keys of every limit of `route` for `client_key` (as plan()
  // forms them). A limit with its own `key:` gets `client_key` too: an
  // operator resets it by giving the client key that limit forms.
  std::vector<std::string> store_keys(const Route& route, std::string_view client_key) const;

  // The store key for a named policy and a caller-given key (/v1/check,
  // /admin/reset): "policy:<name>|<key>", the key bounded (key_bound.h).
  static std::string policy_store_key(std::string_view policy_name, std::string_view key);

 private:
  // Routes compiled for matching (segments, store key prefixes). Refers to
  // routes by index, never by pointer, so a copied Policy stays valid.
  struct Compiled;
  const Route* match_index(std::string_view method, std::string_view normalized_path,
                           size_t* index) const;
  Config config_;
  std::vector<RouteLimit> policy_limits_;  // one per named policy, for /v1/check
  std::optional<std::string> jwt_claim(const RequestInfo& request, std::string_view claim) const;
  // The client key `spec` forms for `request` (plan() says how), `ip_part`
  // standing for a part without a usable value.
  std::string client_key(const KeySpec& spec, const RequestInfo& request,
                         std::string_view ip_part) const;
  // The value of a header:, cookie:, query: or jwt: part in the request.
  std::optional<std::string> part_value(const RequestInfo& request, const KeyPart& part) const;
  // Appends the limits of plan `index` keyed by `consumer_key` to `plan`.
  void add_plan_limits(Plan& plan, size_t index, std::string_view consumer_key) const;
  // The consumer's plan for a route that lists `plan` (`ip_part` keys the
  // unknown ones).
  void add_consumer_plan(Plan& plan, const RequestInfo& request, std::string_view ip_part) const;
  std::shared_ptr<ConsumerDirectory> consumers_;

  std::shared_ptr<const Compiled> compiled_;
};

}  // namespace sluice::policy
