#include "policy/config_yaml.h"

#include <yaml-cpp/yaml.h>

#include <array>
#include <charconv>
#include <chrono>
#include <string_view>

#include "policy/ip.h"
#include "policy/route_syntax.h"
#include "util/ascii.h"
#include "util/utf8.h"

namespace sluice::policy {
namespace {

// A duration in the largest unit that divides it exactly ("90s", "1500ms"):
// every duration the loader reads is a whole number of milliseconds.
std::string duration_text(Nanos d) {
  struct Unit {
    int64_t ns;
    const char* suffix;
  };
  constexpr Unit kUnits[] = {{604'800'000'000'000, "w"}, {86'400'000'000'000, "d"},
                             {3'600'000'000'000, "h"},   {60'000'000'000, "m"},
                             {1'000'000'000, "s"},       {1'000'000, "ms"}};
  const int64_t ns = d.count();
  for (const Unit& u : kUnits) {
    if (ns != 0 && ns % u.ns == 0) return std::to_string(ns / u.ns) + u.suffix;
  }
  return std::to_string(ns / 1'000'000) + "ms";
}

std::string millis_text(Millis d) {
  return duration_text(std::chrono::duration_cast<Nanos>(d));
}

// The shortest text that reads back as exactly `v` (std::from_chars, as the loader).
std::string double_text(double v) {
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : "0";
}

// user info of a redis:// URL: every byte but the unreserved ones escaped, so
// '@', ':' and '%' in a password read back as themselves.
std::string url_escape(std::string_view s) {
  constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (util::is_unreserved(c)) {
      out += c;
    } else {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 0xf];
    }
  }
  return out;
}

void quoted(YAML::Emitter& out, const std::string& s) {
  out << YAML::DoubleQuoted << s;
}

// `name`: the limit's `name:`, "" when it has its default name; `key`: its
// own `key:`, if any.
void limit_block(YAML::Emitter& out, const Limit& limit, const std::vector<int>& count_status = {},
                 const std::string& name = {}, const KeySpec* key = nullptr) {
  const LimitSpec& spec = limit.spec();
  out << YAML::Flow << YAML::BeginMap;
  if (!name.empty()) {
    out << YAML::Key << "name" << YAML::Value;
    quoted(out, name);
  }
  if (key != nullptr) {
    out << YAML::Key << "key" << YAML::Value;
    quoted(out, key->text);
  }
  out << YAML::Key << "algorithm" << YAML::Value << std::string(algorithm_name(spec.algorithm));
  if (spec.algorithm == Algorithm::kTokenBucket || spec.algorithm == Algorithm::kGcra) {
    out << YAML::Key << "capacity" << YAML::Value << spec.capacity;
    out << YAML::Key << "refill_rate" << YAML::Value
        << std::to_string(spec.refill_tokens) + "/" + duration_text(spec.refill_period);
  } else if (spec.algorithm == Algorithm::kConcurrency) {
    out << YAML::Key << "max" << YAML::Value << spec.limit;
    out << YAML::Key << "lease" << YAML::Value << duration_text(spec.window);
  } else {
    out << YAML::Key << "limit" << YAML::Value << spec.limit;
    out << YAML::Key << "window" << YAML::Value << duration_text(spec.window);
  }
  if (limit.block_grows()) {
    out << YAML::Key << "block" << YAML::Value << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "first" << YAML::Value << duration_text(spec.block);
    out << YAML::Key << "factor" << YAML::Value << spec.block_factor;
    out << YAML::Key << "max" << YAML::Value << duration_text(spec.block_max);
    out << YAML::Key << "forget_after" << YAML::Value << duration_text(spec.block_forget_after);
    out << YAML::EndMap;
  } else if (spec.block.count() != 0) {
    out << YAML::Key << "block" << YAML::Value << duration_text(spec.block);
  }
  if (!count_status.empty()) {
    out << YAML::Key << "count_status" << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (int status : count_status) out << status;
    out << YAML::EndSeq;
  }
  out << YAML::EndMap;
}

void host_port(YAML::Emitter& out, const char* key, const HostPort& hp) {
  out << YAML::Key << key << YAML::Value;
  quoted(out, hp.text());
}

// An inline limit's `name:` as written: "" for its default name (its
// counter's, config.h).
std::string own_name(const RouteLimit& limit) {
  return limit.name == limit.counter_name() ? std::string() : limit.name;
}

// `plan_at`: where `plan` (the consumer's plan) goes in the list.
void limits(YAML::Emitter& out, const std::vector<RouteLimit>& list,
            std::optional<size_t> plan_at) {
  out << YAML::Key << "limits" << YAML::Value << YAML::BeginSeq;
  for (size_t i = 0; i <= list.size(); ++i) {
    if (plan_at == i) out << "plan";
    if (i == list.size()) break;
    const RouteLimit& l = list[i];
    if (l.named_policy) {
      quoted(out, l.name);
    } else {
      limit_block(out, l.limit, l.count_status, own_name(l), l.key ? &*l.key : nullptr);
    }
  }
  // A position past the end (a config built by hand) still writes `plan`.
  if (plan_at && *plan_at > list.size()) out << "plan";
  out << YAML::EndSeq;
}

void access(YAML::Emitter& out, const Config& c) {
  const AdminAccess& a = c.admin_access;
  if (!a.token_file.empty()) {
    out << YAML::Key << "admin_token_file" << YAML::Value;
    quoted(out, a.token_file);
  }
  out << YAML::Key << "admin_token_all" << YAML::Value << a.token_all;
  out << YAML::Key << "admin_hosts" << YAML::Value << YAML::BeginSeq;
  for (const std::string& h : a.hosts) quoted(out, h);
  out << YAML::EndSeq;
  out << YAML::Key << "admin_read_only" << YAML::Value << a.read_only;
  if (c.decision_api.listen || !c.decision_api.token_file.empty()) {
    out << YAML::Key << "decision_api" << YAML::Value << YAML::BeginMap;
    if (c.decision_api.listen) host_port(out, "listen", *c.decision_api.listen);
    if (!c.decision_api.token_file.empty()) {
      out << YAML::Key << "token_file" << YAML::Value;
      quoted(out, c.decision_api.token_file);
    }
    out << YAML::EndMap;
  }
}

void rls(YAML::Emitter& out, const Config& c) {
  if (c.grpc) host_port(out, "grpc", *c.grpc);
  if (!c.rls) return;
  const RlsSettings& r = *c.rls;
  constexpr const char* kHeaders[] = {"off", "ratelimit", "draft"};
  out << YAML::Key << "rls" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "config_dir" << YAML::Value;
  quoted(out, r.config_dir);
  out << YAML::Key << "response_headers" << YAML::Value
      << kHeaders[static_cast<int>(r.response_headers)];
  out << YAML::Key << "dynamic_metadata" << YAML::Value << r.dynamic_metadata;
  out << YAML::Key << "shadow_mode" << YAML::Value << r.shadow_mode;
  out << YAML::Key << "merge_domains" << YAML::Value << r.merge_domains;
  // The shortest text that reads back as the same double ("0.8").
  std::array<char, 32> ratio{};
  const auto written = std::to_chars(ratio.data(), ratio.data() + ratio.size(), r.near_limit_ratio);
  out << YAML::Key << "near_limit_ratio" << YAML::Value << std::string(ratio.data(), written.ptr);
  // 0 (derived from the open-file limit) is the default and cannot be written.
  if (r.max_connections != 0) {
    out << YAML::Key << "max_connections" << YAML::Value << r.max_connections;
  }
  out << YAML::EndMap;
}

void upstream(YAML::Emitter& out, const Config& c) {
  if (!c.upstream) return;
  const Upstream& u = *c.upstream;
  out << YAML::Key << "upstream" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "url" << YAML::Value;
  quoted(out, u.url);
  out << YAML::Key << "connect_timeout" << YAML::Value << millis_text(u.connect_timeout);
  out << YAML::Key << "timeout" << YAML::Value << millis_text(u.timeout);
  out << YAML::Key << "max_idle_connections" << YAML::Value << u.max_idle_connections;
  out << YAML::EndMap;
}

void sentinel(YAML::Emitter& out, const RedisSentinelConfig& s) {
  out << YAML::Key << "sentinel" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "master" << YAML::Value;
  quoted(out, s.master);
  out << YAML::Key << "addresses" << YAML::Value << YAML::BeginSeq;
  for (const std::string& a : s.addresses) quoted(out, a);
  out << YAML::EndSeq;
  if (!s.password_file.empty()) {
    out << YAML::Key << "password_file" << YAML::Value;
    quoted(out, s.password_file);
  }
  out << YAML::EndMap;
}

// username, password and database (without a url).
void credentials(YAML::Emitter& out, const RedisConfig& r) {
  if (!r.username.empty()) {
    out << YAML::Key << "username" << YAML::Value;
    quoted(out, r.username);
  }
  if (!r.password.empty()) {
    out << YAML::Key << "password" << YAML::Value;
    quoted(out, r.password);
  }
  out << YAML::Key << "database" << YAML::Value << r.database;
}

// A URL read from url_file is written as that file. A password that is not
// UTF-8 can only be written in a redis:// URL (which
// names one address; only the URL's %-escapes put such bytes in it, and YAML
// text cannot hold them), and so is a user name with one address, as it was
// most likely given; otherwise the addresses (or sentinel), username,
// password and database keys.
void redis(YAML::Emitter& out, const RedisConfig& r) {
  out << YAML::Key << "redis" << YAML::Value << YAML::BeginMap;
  const bool needs_url =
      !r.username.empty() || util::invalid_utf8(r.password) != std::string_view::npos;
  if (!r.url_file.empty()) {  // the file, not the password it keeps
    out << YAML::Key << "url_file" << YAML::Value;
    quoted(out, r.url_file);
  } else if (!r.sentinel.master.empty()) {
    sentinel(out, r.sentinel);
    credentials(out, r);
  } else if (needs_url && r.addresses.size() == 1) {
    out << YAML::Key << "url" << YAML::Value;
    quoted(out, std::string(r.tls.enabled ? "rediss://" : "redis://") + url_escape(r.username) +
                    ":" + url_escape(r.password) + "@" + r.addresses.front().text() + "/" +
                    std::to_string(r.database));
  } else {
    out << YAML::Key << "addresses" << YAML::Value << YAML::BeginSeq;
    for (const HostPort& hp : r.addresses) quoted(out, hp.text());
    out << YAML::EndSeq;
    credentials(out, r);
  }
  out << YAML::Key << "cluster" << YAML::Value << r.cluster;
  out << YAML::Key << "timeout" << YAML::Value << millis_text(r.timeout);
  out << YAML::Key << "on_failure" << YAML::Value << (r.on_failure_allow ? "allow" : "deny");
  out << YAML::Key << "time_source" << YAML::Value << (r.time_source_redis ? "redis" : "local");
  out << YAML::Key << "deny_cache" << YAML::Value << r.deny_cache;
  out << YAML::Key << "mode" << YAML::Value << (r.mode_cached ? "cached" : "exact");
  if (r.mode_cached)
    out << YAML::Key << "sync_interval" << YAML::Value << millis_text(r.sync_interval);
  if (r.tls.enabled) {  // the block turns TLS on beside addresses, and goes with rediss://
    out << YAML::Key << "tls" << YAML::Value << YAML::BeginMap;
    for (const auto& [key, value] :
         {std::pair{"ca_file", &r.tls.ca_file}, std::pair{"cert_file", &r.tls.cert_file},
          std::pair{"key_file", &r.tls.key_file}, std::pair{"server_name", &r.tls.server_name}}) {
      if (value->empty()) continue;
      out << YAML::Key << key << YAML::Value;
      quoted(out, *value);
    }
    out << YAML::EndMap;
  }
  out << YAML::EndMap;
}

void store(YAML::Emitter& out, const StoreConfig& s) {
  out << YAML::Key << "store" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "backend" << YAML::Value
      << (s.backend == StoreConfig::Backend::kMemory ? "memory" : "redis");
  out << YAML::Key << "max_keys" << YAML::Value << s.max_keys;
  redis(out, s.redis);
  out << YAML::EndMap;
}

void client_ip(YAML::Emitter& out, const ClientIpConfig& c) {
  out << YAML::Key << "client_ip" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "header" << YAML::Value << std::string(client_ip_header_name(c.header));
  out << YAML::Key << "trusted_proxies" << YAML::Value << YAML::BeginSeq;
  for (const Cidr& cidr : c.trusted_proxies) quoted(out, cidr.text);
  out << YAML::EndSeq;
  out << YAML::Key << "ipv6_prefix" << YAML::Value << c.ipv6_prefix;
  out << YAML::EndMap;
}

void access(YAML::Emitter& out, const AccessLists& a) {
  out << YAML::Key << "access" << YAML::Value << YAML::BeginMap;
  for (const auto& [name, list] : {std::pair{"allow", &a.allow}, std::pair{"deny", &a.deny}}) {
    out << YAML::Key << name << YAML::Value << YAML::BeginSeq;
    for (const Cidr& cidr : *list) quoted(out, cidr.text);
    out << YAML::EndSeq;
  }
  out << YAML::EndMap;
}

void headers(YAML::Emitter& out, const HeaderModes& h) {
  out << YAML::Key << "headers" << YAML::Value;
  if (!h.legacy && !h.draft) {
    out << "none";
    return;
  }
  out << YAML::Flow << YAML::BeginSeq;
  if (h.legacy) out << "legacy";
  if (h.draft) out << "draft";
  out << YAML::EndSeq;
}

// content_type is refused without body_file (it is the file's type).
void deny(YAML::Emitter& out, const DenyResponse& d) {
  out << YAML::Key << "deny" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "status" << YAML::Value << d.status;
  if (!d.body_file.empty()) {
    out << YAML::Key << "body_file" << YAML::Value;
    quoted(out, d.body_file);
    out << YAML::Key << "content_type" << YAML::Value;
    quoted(out, d.content_type);
  }
  out << YAML::EndMap;
}

void paths(YAML::Emitter& out, const PathsConfig& p) {
  constexpr const char* kEscaped[] = {"reject", "decode", "keep"};
  out << YAML::Key << "paths" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "escaped_slashes" << YAML::Value
      << kEscaped[static_cast<int>(p.escaped_slashes)];
  out << YAML::Key << "backslash" << YAML::Value
      << (p.backslash == PathReading::Backslash::kReject ? "reject" : "as_slash");
  out << YAML::Key << "matrix_params" << YAML::Value << (p.strip_matrix_params ? "strip" : "keep");
  out << YAML::Key << "forward" << YAML::Value
      << (p.forward_normalized ? "normalized" : "original");
  out << YAML::EndMap;
}

// The key files by path: loading the text reads them again.
void tls(YAML::Emitter& out, const Config& c) {
  if (!c.tls) return;
  out << YAML::Key << "tls" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "cert" << YAML::Value;
  quoted(out, c.tls->cert_file);
  out << YAML::Key << "key" << YAML::Value;
  quoted(out, c.tls->key_file);
  out << YAML::Key << "min_version" << YAML::Value;
  quoted(out, c.tls->min_tls13 ? "1.3" : "1.2");
  out << YAML::EndMap;
  if (c.grpc_tls) out << YAML::Key << "grpc_tls" << YAML::Value << true;
}

void jwt(YAML::Emitter& out, const std::optional<JwtSettings>& jwt) {
  if (!jwt) return;
  out << YAML::Key << "jwt" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << (jwt->jwks_file.empty() ? "secret_file" : "jwks_file") << YAML::Value;
  quoted(out, jwt->jwks_file.empty() ? jwt->secret_file : jwt->jwks_file);
  if (!jwt->issuer.empty()) {
    out << YAML::Key << "issuer" << YAML::Value;
    quoted(out, jwt->issuer);
  }
  if (!jwt->audience.empty()) {
    out << YAML::Key << "audience" << YAML::Value;
    quoted(out, jwt->audience);
  }
  out << YAML::EndMap;
}

void policies(YAML::Emitter& out, const std::vector<NamedPolicy>& list) {
  out << YAML::Key << "policies" << YAML::Value << YAML::BeginMap;
  for (const NamedPolicy& p : list) {
    out << YAML::Key << p.name << YAML::Value;
    limit_block(out, p.limit, p.count_status);
  }
  out << YAML::EndMap;
}

void plans(YAML::Emitter& out, const Config& c) {
  if (c.plans.empty()) return;
  out << YAML::Key << "plans" << YAML::Value << YAML::BeginMap;
  for (const ConsumerPlan& p : c.plans) {
    out << YAML::Key << p.name << YAML::Value << YAML::BeginSeq;
    for (const RouteLimit& l : p.limits) limit_block(out, l.limit, l.count_status, own_name(l));
    out << YAML::EndSeq;
  }
  out << YAML::EndMap;
}

// The file by path: loading the text reads it again.
void consumers(YAML::Emitter& out, const Config& c) {
  if (!c.consumers) return;
  const ConsumersConfig& k = *c.consumers;
  out << YAML::Key << "consumers" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "key" << YAML::Value;
  quoted(out, k.key.text);
  out << YAML::Key << "file" << YAML::Value;
  quoted(out, k.file);
  out << YAML::Key << "unknown" << YAML::Value;
  const bool known_plan = k.unknown_plan && *k.unknown_plan < c.plans.size();
  quoted(out, known_plan ? c.plans[*k.unknown_plan].name : std::string("reject"));
  out << YAML::EndMap;
}

// `match:` as the route's own name when that reads back as the same method
// and pattern (so "GET /a/" keeps its name without a `name:`), else the
// method and pattern with the name given apart.
void route(YAML::Emitter& out, const Route& r) {
  out << YAML::BeginMap;
  const Result<RouteMatch> own = parse_route_match(r.name);
  const bool name_is_match = own.ok() && own->method == r.method && own->pattern == r.pattern;
  out << YAML::Key << "match" << YAML::Value;
  quoted(out, name_is_match ? r.name : r.method + " " + r.pattern);
  if (!name_is_match) {
    out << YAML::Key << "name" << YAML::Value;
    quoted(out, r.name);
  }
  out << YAML::Key << "key" << YAML::Value;
  quoted(out, r.key.text);
  limits(out, r.limits, r.plan_at);
  if (r.shadow) out << YAML::Key << "shadow" << YAML::Value << true;
  if (r.delay.count() != 0) out << YAML::Key << "delay" << YAML::Value << duration_text(r.delay);
  out << YAML::EndMap;
}

void routes(YAML::Emitter& out, const Config& c) {
  if (c.default_route) {
    out << YAML::Key << "default" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "key" << YAML::Value;
    quoted(out, c.default_route->key.text);
    limits(out, c.default_route->limits, c.default_route->plan_at);
    if (c.default_route->shadow) out << YAML::Key << "shadow" << YAML::Value << true;
    if (c.default_route->delay.count() != 0)
      out << YAML::Key << "delay" << YAML::Value << duration_text(c.default_route->delay);
    out << YAML::EndMap;
  }
  out << YAML::Key << "routes" << YAML::Value << YAML::BeginSeq;
  for (const Route& r : c.routes) route(out, r);
  out << YAML::EndSeq;
}

void server(YAML::Emitter& out, const ServerLimits& s) {
  out << YAML::Key << "server" << YAML::Value << YAML::BeginMap;
  // 0 (derived from the open-file limit) is the default and cannot be written.
  if (s.max_connections != 0) {
    out << YAML::Key << "max_connections" << YAML::Value << s.max_connections;
  }
  // The same for max_held (derived from max_connections in force).
  if (s.max_held != 0) out << YAML::Key << "max_held" << YAML::Value << s.max_held;
  out << YAML::Key << "max_tls_handshakes" << YAML::Value << s.max_tls_handshakes;
  out << YAML::Key << "max_header_bytes" << YAML::Value << s.max_header_bytes;
  out << YAML::Key << "max_body_bytes" << YAML::Value << s.max_body_bytes;
  out << YAML::Key << "header_timeout" << YAML::Value << millis_text(s.header_timeout);
  out << YAML::Key << "idle_timeout" << YAML::Value << millis_text(s.idle_timeout);
  out << YAML::Key << "threads" << YAML::Value << s.threads;
  out << YAML::Key << "shutdown_grace" << YAML::Value << millis_text(s.shutdown_grace);
  out << YAML::EndMap;
}

void logging(YAML::Emitter& out, const LoggingConfig& l) {
  out << YAML::Key << "logging" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "level" << YAML::Value << l.level;
  out << YAML::Key << "format" << YAML::Value << l.format;
  out << YAML::Key << "access_log" << YAML::Value << l.access_log;
  out << YAML::Key << "redact_keys" << YAML::Value << l.redact_keys;
  out << YAML::Key << "denial_log_per_second" << YAML::Value
      << double_text(l.denial_log_per_second);
  out << YAML::EndMap;
}

}  // namespace

std::string limit_to_yaml(const Limit& limit) {
  YAML::Emitter out;
  limit_block(out, limit);
  return out.c_str();
}

std::string to_yaml(const Config& c) {
  YAML::Emitter out;
  out.SetBoolFormat(YAML::TrueFalseBool);
  out << YAML::BeginMap;
  host_port(out, "listen", c.listen);
  tls(out, c);
  host_port(out, "admin", c.admin);
  access(out, c);
  rls(out, c);
  upstream(out, c);
  store(out, c.store);
  client_ip(out, c.client_ip);
  access(out, c.access);
  headers(out, c.headers);
  out << YAML::Key << "case_insensitive_paths" << YAML::Value << c.case_insensitive_paths;
  paths(out, c.paths);
  out << YAML::Key << "auth_deny_status" << YAML::Value << c.auth_deny_status;
  deny(out, c.deny);
  jwt(out, c.jwt);
  policies(out, c.policies);
  plans(out, c);
  consumers(out, c);
  routes(out, c);
  server(out, c.server);
  logging(out, c.logging);
  out << YAML::Key << "watch_config" << YAML::Value << c.watch_config;
  out << YAML::Key << "http2" << YAML::Value << c.http2;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace sluice::policy
