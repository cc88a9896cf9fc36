#include "policy/policy.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>

#include "policy/ip.h"
#include "policy/jwt.h"
#include "policy/key_bound.h"
#include "policy/key_sources.h"
#include "policy/path.h"

namespace sluice::policy {
namespace {

struct Segment {
  std::string text;  // normalised literal; unused for a parameter
  bool param = false;
};

struct CompiledRoute {
  std::string method;  // upper-case; unused when any_method
  bool any_method = false;
  // A pattern without parameters or wildcard compares as one string.
  bool exact = false;
  std::string exact_path;
  std::vector<Segment> segments;
  bool wildcard = false;  // the pattern ended in "/*"
  // One per limit, "policy:<name>|" or "route:<route name>[#<i>]|"
  // (RouteLimit::counter_name): the store key is this plus the client key.
  std::vector<std::string> scopes;
};

bool is_param(std::string_view segment) {
  return segment.size() >= 3 && segment.front() == '{' && segment.back() == '}';
}

std::vector<std::string> scopes_of(const Route& route) {
  std::vector<std::string> scopes;
  scopes.reserve(route.limits.size());
  for (const RouteLimit& limit : route.limits) {
    scopes.push_back((limit.named_policy ? "policy:" : "route:") + limit.counter_name() + "|");
  }
  return scopes;
}

CompiledRoute compile(const Route& route, const PathReading& reading) {
  CompiledRoute c;
  c.any_method = route.method == "*";
  c.method = route.method;
  c.scopes = scopes_of(route);

  std::string_view pattern = route.pattern;
  if (pattern == "*" || pattern == "/*") {
    c.wildcard = true;
    return c;
  }
  if (pattern.size() >= 2 && pattern.substr(pattern.size() - 2) == "/*") {
    c.wildcard = true;
    pattern.remove_suffix(2);
  }
  // Literal segments get the request's normalisation (decoding, escapes,
  // lower case), so "/API/%7Euser/" and "/api/~user" name the same route when
  // paths are case-insensitive; parameters are kept as they are.
  bool has_param = false;
  while (!pattern.empty()) {
    const size_t slash = pattern.find('/');
    const std::string_view piece = pattern.substr(0, slash);
    pattern = slash == std::string_view::npos ? std::string_view() : pattern.substr(slash + 1);
    if (is_param(piece)) {
      has_param = true;
      c.segments.push_back({"", true});
      continue;
    }
    // Built by appending: `"/" + std::string(...)` trips GCC 12's false
    // -Wrestrict in Release builds.
    std::string slashed(1, '/');
    slashed.append(piece);
    std::string literal = normalize_path(slashed, reading);
    if (literal == "/") {
      // "", "." or "..": a ".." removes the segment before it, as in requests
      // (whatever its spelling: "%2e%2e", "..;params").
      std::string probe = "/x/";
      probe.append(piece);
      if (normalize_path(probe, reading) == "/" && !c.segments.empty()) c.segments.pop_back();
      continue;
    }
    c.segments.push_back({literal.substr(1), false});
  }
  if (!has_param && !c.wildcard) {
    c.exact = true;
    c.exact_path.assign(1, '/');
    for (size_t i = 0; i < c.segments.size(); ++i) {
      if (i > 0) c.exact_path += '/';
      c.exact_path += c.segments[i].text;
    }
  }
  return c;
}

// No allocation: walks the path's segments in place.
bool path_matches(const CompiledRoute& route, std::string_view path) {
  if (route.exact) return path == route.exact_path;
  std::string_view rest = path.empty() ? path : path.substr(1);  // after the leading '/'
  bool more = !rest.empty();
  for (const Segment& segment : route.segments) {
    if (!more) return false;
    const size_t slash = rest.find('/');
    const std::string_view piece = rest.substr(0, slash);
    if (slash == std::string_view::npos) {
      more = false;
      rest = {};
    } else {
      rest = rest.substr(slash + 1);
    }
    if (segment.param ? piece.empty() : piece != segment.text) return false;
  }
  return route.wildcard || !more;
}

bool is_key_char(unsigned char c) {
  return c > 0x20 && c < 0x7f && c != '%' && c != '+' && c != '|';
}

// Header values are escaped so that no value can contain the part separator
// '+' or the scope separator '|': a client key then splits into its parts in
// exactly one way, and different values always give different keys.
void append_escaped(std::string& out, std::string_view value) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (char ch : value) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (is_key_char(c)) {
      out.push_back(ch);
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xf]);
    }
  }
}

constexpr size_t kDefaultRoute = static_cast<size_t>(-1);

// HEAD is GET without the body (RFC 9110 9.3.2), and every framework runs a
// GET handler for it: a HEAD request matches GET routes as well as HEAD and
// `*` ones, so it spends the GET route's limits under the same store keys.
// First match wins: a HEAD route takes HEAD requests only when it is listed
// before the GET route of its path (the loader refuses one listed after).
bool method_matches(const CompiledRoute& route, std::string_view method) {
  if (route.any_method || route.method == method) return true;
  return method == "HEAD" && route.method == "GET";
}

// "?..." of a request target as sent (without a fragment), or "".
std::string_view query_of(std::string_view target) {
  target = target.substr(0, target.find('#'));
  const size_t q = target.find('?');
  return q == std::string_view::npos ? std::string_view() : target.substr(q);
}

// "h:", "c:", "q:": what a key part's value was read from.
std::string_view value_prefix(KeyPart::Kind kind) {
  switch (kind) {
    case KeyPart::Kind::kCookie:
      return "c:";
    case KeyPart::Kind::kQuery:
      return "q:";
    case KeyPart::Kind::kJwt:
      return "j:";
    default:
      return "h:";
  }
}

// A part read from the request: "h:NAME=value" (escaped, and hashed when
// long: key_bound.h), or `ip_part` when the request has no usable value
// (missing, empty or ambiguous).
void append_value_part(std::string& key, const KeyPart& part, std::string_view value,
                       std::string_view ip_part) {
  if (value.empty()) {
    key += ip_part;
    return;
  }
  key += value_prefix(part.kind);
  key += part.name;
  key += '=';
  const size_t from = key.size();
  append_escaped(key, value);
  bound_key_part(key, from);
}

// A client key an operator wrote as plan() forms it, with each value longer
// than a store key holds replaced by its digest, as plan() replaces it. (A
// digest copied from a log is kept: it is short.)
std::string with_long_values_hashed(std::string_view client_key) {
  std::string out;
  out.reserve(client_key.size());
  for (size_t at = 0; at <= client_key.size();) {
    const size_t end = std::min(client_key.find('+', at), client_key.size());
    const std::string_view part = client_key.substr(at, end - at);
    const size_t equals = part.find('=');
    if (at > 0) out += '+';
    if (equals != std::string_view::npos && part.size() - equals - 1 > kMaxKeyPartBytes) {
      out.append(part.substr(0, equals + 1));
      out += hashed_key_part(part.substr(equals + 1));
    } else {
      out.append(part);
    }
    at = end + 1;
  }
  return out;
}

}  // namespace

struct Policy::Compiled {
  PathReading reading;                     // paths: and case_insensitive_paths
  std::vector<CompiledRoute> routes;       // parallel to config_.routes
  std::shared_ptr<const JwtVerifier> jwt;  // null without a jwt: section
  std::vector<std::string> default_scopes;
  std::map<std::string, size_t, std::less<>> policies;  // name -> index in config_.policies
  // Per plan, per limit: "plan:<plan>#<i>|", the scope of its store keys.
  std::vector<std::vector<std::string>> plan_scopes;
};

Policy::Policy(Config config) : config_(std::move(config)) {
  auto compiled = std::make_shared<Compiled>();
  compiled->reading.escaped_slashes = config_.paths.escaped_slashes;
  compiled->reading.backslash = config_.paths.backslash;
  compiled->reading.strip_matrix_params = config_.paths.strip_matrix_params;
  compiled->reading.case_insensitive = config_.case_insensitive_paths;
  compiled->routes.reserve(config_.routes.size());
  for (const Route& route : config_.routes) {
    compiled->routes.push_back(compile(route, compiled->reading));
  }
  if (config_.default_route) compiled->default_scopes = scopes_of(*config_.default_route);
  // The loader checked the keys; a config built otherwise with bad keys keys
  // jwt: parts by the client address, as for a token that does not verify.
  if (config_.jwt) {
    Result<std::shared_ptr<const JwtVerifier>> verifier = JwtVerifier::make(*config_.jwt);
    if (verifier.ok()) compiled->jwt = std::move(verifier).value();
  }
  policy_limits_.reserve(config_.policies.size());
  for (size_t i = 0; i < config_.policies.size(); ++i) {
    const NamedPolicy& p = config_.policies[i];
    policy_limits_.push_back(RouteLimit{p.name, true, p.limit, p.mark, p.count_status});
    compiled->policies.emplace(p.name, i);  // the first of duplicate names wins
  }
  for (const ConsumerPlan& p : config_.plans) {
    std::vector<std::string>& scopes = compiled->plan_scopes.emplace_back();
    for (const RouteLimit& limit : p.limits) scopes.push_back("plan:" + limit.counter_name() + "|");
  }
  // The directory takes the table over: after a fold of runtime changes the
  // old table would otherwise stay alive here, twice the memory.
  if (config_.consumers) {
    consumers_ = std::make_shared<ConsumerDirectory>(std::move(config_.consumers->table));
  }
  compiled_ = std::move(compiled);
}

const Route* Policy::match_index(std::string_view method, std::string_view normalized_path,
                                 size_t* index) const {
  const std::vector<CompiledRoute>& routes = compiled_->routes;
  for (size_t i = 0; i < routes.size(); ++i) {
    const CompiledRoute& route = routes[i];
    if (!method_matches(route, method)) continue;
    if (!path_matches(route, normalized_path)) continue;
    *index = i;
    return &config_.routes[i];
  }
  *index = kDefaultRoute;
  return config_.default_route ? &*config_.default_route : nullptr;
}

const Route* Policy::match(std::string_view method, std::string_view normalized_path) const {
  size_t index = 0;
  return match_index(method, normalized_path, &index);
}

const NamedPolicy* Policy::find_policy(std::string_view name) const {
  const auto it = compiled_->policies.find(name);
  return it == compiled_->policies.end() ? nullptr : &config_.policies[it->second];
}

const RouteLimit* Policy::find_policy_limit(std::string_view name) const {
  const auto it = compiled_->policies.find(name);
  return it == compiled_->policies.end() ? nullptr : &policy_limits_[it->second];
}

// The claim of the request's bearer token, when the token verifies.
std::optional<std::string> Policy::jwt_claim(const RequestInfo& request,
                                             std::string_view claim) const {
  if (compiled_->jwt == nullptr || request.headers == nullptr) return std::nullopt;
  const std::optional<std::string_view> authorization = request.headers->get("authorization");
  if (!authorization) return std::nullopt;
  const std::string_view token = bearer_token(*authorization);
  if (token.empty()) return std::nullopt;
  const int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(request.now).count();
  return compiled_->jwt->claim(token, claim, now_s);
}

std::optional<std::string> Policy::part_value(const RequestInfo& request,
                                              const KeyPart& part) const {
  switch (part.kind) {
    case KeyPart::Kind::kHeader: {
      if (request.headers == nullptr) return std::nullopt;
      const std::optional<std::string_view> value = request.headers->get(part.name);
      if (!value) return std::nullopt;
      return std::string(*value);
    }
    case KeyPart::Kind::kCookie:
      return cookie_value(request.headers, part.name);
    case KeyPart::Kind::kQuery:
      return query_value(request.target, part.name);
    case KeyPart::Kind::kJwt:
      return jwt_claim(request, part.name);
    case KeyPart::Kind::kIp:
    case KeyPart::Kind::kGlobal:
      break;
  }
  return std::nullopt;
}

const ConsumerPlan* Policy::find_plan(std::string_view name, size_t* index) const {
  for (size_t i = 0; i < config_.plans.size(); ++i) {
    if (config_.plans[i].name != name) continue;
    if (index != nullptr) *index = i;
    return &config_.plans[i];
  }
  return nullptr;
}

void Policy::add_plan_limits(Plan& plan, size_t index, std::string_view consumer_key) const {
  if (index >= config_.plans.size()) return;
  const ConsumerPlan& p = config_.plans[index];
  const std::vector<std::string>& scopes = compiled_->plan_scopes[index];
  plan.consumer_plan = &p;
  plan.limits.reserve(plan.limits.size() + p.limits.size());
  for (size_t i = 0; i < p.limits.size(); ++i) {
    PlannedLimit& planned = plan.limits.emplace_back();
    planned.limit = &p.limits[i];
    planned.store_key.reserve(scopes[i].size() + consumer_key.size());
    planned.store_key = scopes[i];
    planned.store_key += consumer_key;
  }
}

// A known consumer's limits are keyed by the consumer, wherever it comes
// from; an unknown or missing id never is: the `unknown` plan is keyed by the
// client address, or a client could mint fresh state with every made-up id.
void Policy::add_consumer_plan(Plan& plan, const RequestInfo& request,
                               std::string_view ip_part) const {
  const ConsumersConfig& consumers = *config_.consumers;
  if (consumers.key.parts.size() != 1) return;
  const KeyPart& part = consumers.key.parts[0];
  const std::optional<std::string> id = part_value(request, part);
  const std::optional<uint16_t> known =
      id && !id->empty() ? consumers_->find(*id) : std::optional<uint16_t>();
  if (known) {
    std::string consumer_key;
    append_value_part(consumer_key, part, *id, "");
    return add_plan_limits(plan, *known, consumer_key);
  }
  if (!consumers.unknown_plan) {
    // A shadow route never refuses: it lets the unknown consumer through.
    if (!plan.route->shadow && plan.refusal == Refusal::kNone) {
      plan.refusal = Refusal::kUnknownConsumer;
    }
    return;
  }
  add_plan_limits(plan, *consumers.unknown_plan, ip_part);
}

Plan Policy::plan_consumer(std::string_view id, std::string_view unknown_key) const {
  Plan plan;
  if (!consumers_ || config_.consumers->key.parts.size() != 1) return plan;
  const ConsumersConfig& consumers = *config_.consumers;
  if (const std::optional<uint16_t> known = consumers_->find(id)) {
    append_value_part(plan.client_key, consumers.key.parts[0], id, "");
    add_plan_limits(plan, *known, plan.client_key);
    return plan;
  }
  if (!consumers.unknown_plan) {
    plan.refusal = Refusal::kUnknownConsumer;
    return plan;
  }
  plan.client_key = unknown_key.empty() ? std::string("unknown") : bounded_key_part(unknown_key);
  add_plan_limits(plan, *consumers.unknown_plan, plan.client_key);
  return plan;
}

std::string Policy::client_key(const KeySpec& spec, const RequestInfo& request,
                               std::string_view ip_part) const {
  std::string key;
  if (spec.parts.empty()) key = ip_part;
  for (size_t i = 0; i < spec.parts.size(); ++i) {
    const KeyPart& part = spec.parts[i];
    if (i > 0) key += '+';
    switch (part.kind) {
      case KeyPart::Kind::kIp:
        key += ip_part;
        break;
      case KeyPart::Kind::kGlobal:
        key += "global";
        break;
      case KeyPart::Kind::kHeader: {
        std::optional<std::string_view> value;
        if (request.headers != nullptr) value = request.headers->get(part.name);
        append_value_part(key, part, value.value_or(std::string_view()), ip_part);
        break;
      }
      case KeyPart::Kind::kCookie:
        append_value_part(key, part, cookie_value(request.headers, part.name).value_or(""),
                          ip_part);
        break;
      case KeyPart::Kind::kQuery:
        append_value_part(key, part, query_value(request.target, part.name).value_or(""), ip_part);
        break;
      case KeyPart::Kind::kJwt:
        append_value_part(key, part, jwt_claim(request, part.name).value_or(""), ip_part);
        break;
    }
  }
  return key;
}

Plan Policy::plan(const RequestInfo& request) const {
  Plan plan;
  const PathReading& reading = compiled_->reading;
  bool bad_path = false;
  plan.normalized_path = normalize_path(request.target, reading, &bad_path);
  if (bad_path) plan.refusal = Refusal::kBadPath;
  if (config_.paths.forward_normalized && !bad_path) {
    std::string as_sent_case;
    if (reading.case_insensitive) {
      PathReading as_sent = reading;
      as_sent.case_insensitive = false;
      as_sent_case = normalize_path(request.target, as_sent);
    }
    const std::string& matched = reading.case_insensitive ? as_sent_case : plan.normalized_path;
    // Most targets are sent normalised: then they go on as they came, with
    // no copy.
    if (matched != target_path(request.target)) {
      plan.forward_target = matched;
      plan.forward_target += query_of(request.target);
    }
  }
  size_t index = kDefaultRoute;
  plan.route = match_index(request.method, plan.normalized_path, &index);

  // The one configured forwarding header, read only from trusted peers;
  // anyone else is keyed by the TCP address whatever it writes.
  const ClientIpConfig& ip_config = config_.client_ip;
  plan.client = request.peer;
  if (request.headers != nullptr && is_trusted_proxy(ip_config, request.peer)) {
    plan.client = client_ip(ip_config, request.peer,
                            request.headers->get_all(client_ip_header_name(ip_config.header)));
  }
  auto listed = [&](const std::vector<Cidr>& list) {
    return std::any_of(list.begin(), list.end(),
                       [&](const Cidr& c) { return cidr_contains(c, plan.client); });
  };
  if (listed(config_.access.deny)) {
    if (plan.refusal == Refusal::kNone) plan.refusal = Refusal::kAccessDenied;
    return plan;
  }
  if (plan.route == nullptr) return plan;
  if (listed(config_.access.allow)) return plan;  // no limits: allowed, counted

  const std::string ip_part = "ip:" + client_key_text(plan.client, ip_config.ipv6_prefix);
  plan.client_key = client_key(plan.route->key, request, ip_part);
  const std::string& key = plan.client_key;

  const std::vector<std::string>& scopes =
      index == kDefaultRoute ? compiled_->default_scopes : compiled_->routes[index].scopes;
  plan.limits.reserve(plan.route->limits.size());
  for (size_t i = 0; i < plan.route->limits.size(); ++i) {
    PlannedLimit& planned = plan.limits.emplace_back();
    planned.limit = &plan.route->limits[i];
    const std::optional<KeySpec>& own = planned.limit->key;
    // A limit with its own key (quotas in layers) is counted under the
    // client that key names; the others, the route's.
    const std::string own_key = own && own->parts != plan.route->key.parts
                                    ? client_key(*own, request, ip_part)
                                    : std::string();
    const std::string& limit_key = own_key.empty() ? key : own_key;
    planned.store_key.reserve(scopes[i].size() + limit_key.size());
    planned.store_key = scopes[i];
    planned.store_key += limit_key;
  }
  if (plan.route->plan_at && consumers_) add_consumer_plan(plan, request, ip_part);
  return plan;
}

std::optional<std::string> Policy::client_key_of(const Route& route,
                                                 std::string_view client) const {
  const std::vector<KeyPart>& parts = route.key.parts;
  // Already a client key: every '+'-separated part is one plan() forms.
  bool formed = !client.empty();
  for (size_t at = 0; formed && at <= client.size();) {
    const size_t end = std::min(client.find('+', at), client.size());
    const std::string_view part = client.substr(at, end - at);
    formed = part.starts_with("ip:") || part.starts_with("h:") || part.starts_with("c:") ||
             part.starts_with("q:") || part.starts_with("j:") || part == "global";
    at = end + 1;
  }
  if (formed || client.empty()) return with_long_values_hashed(client);
  if (parts.size() != 1) return std::nullopt;
  switch (parts[0].kind) {
    case KeyPart::Kind::kGlobal:
      return std::string("global");
    case KeyPart::Kind::kIp: {
      const std::optional<IpAddress> ip = parse_ip(client);
      if (!ip) return std::nullopt;
      return "ip:" + client_key_text(*ip, config_.client_ip.ipv6_prefix);
    }
    case KeyPart::Kind::kHeader:
    case KeyPart::Kind::kCookie:
    case KeyPart::Kind::kQuery:
    case KeyPart::Kind::kJwt: {
      std::string key;
      append_value_part(key, parts[0], client, "");
      return key;
    }
  }
  return std::nullopt;
}

std::vector<std::string> Policy::store_keys(const Route& route, std::string_view client_key) const {
  std::vector<std::string> keys = scopes_of(route);
  for (std::string& key : keys) key += client_key;
  return keys;
}

Plan Policy::plan_policy(std::string_view policy_name, std::string_view key) const {
  Plan plan;
  plan.client_key = bounded_key_part(key);
  const RouteLimit* limit = find_policy_limit(policy_name);
  if (limit == nullptr) return plan;
  plan.limits.push_back(PlannedLimit{limit, policy_store_key(policy_name, key)});
  return plan;
}

std::string Policy::policy_store_key(std::string_view policy_name, std::string_view key) {
  std::string out;
  out.reserve(7 + policy_name.size() + 1 + std::min(key.size(), kMaxKeyPartBytes));
  out += "policy:";
  out += policy_name;
  out += '|';
  const size_t from = out.size();
  out += key;
  bound_key_part(out, from);
  return out;
}

}  // namespace sluice::policy
