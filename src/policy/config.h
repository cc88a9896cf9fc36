// The server's configuration model: what the YAML file (docs/CONFIG.md) means
// once loaded and validated. Plain data; the loader (config_loader.h) builds it,
// the policy (policy.h) compiles it for matching, and config_yaml.h writes it
// back as YAML. Two configs compare equal when they mean the same: where a
// value was written in its file (SourceMark, Route::line) is not compared.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/error.h"
#include "config/values/values.h"
#include "policy/consumer_table.h"
#include "policy/jwt.h"
#include "policy/path.h"
#include "policy/upstreams.h"
#include "policy/route_cost.h"
#include "sluice/limit.h"

namespace sluice::policy {

using Millis = std::chrono::milliseconds;

using HostPort = config::HostPort;

// store.redis.tls: TLS to Redis, on with a rediss:// url (or a `tls:` block
// beside `addresses`). Paths are resolved against the config file's folder.
struct RedisTlsConfig {
  bool enabled = false;
  std::string ca_file;  // "" = the system's CAs
  std::string cert_file;
  std::string key_file;
  std::string server_name;  // "" = each node's host
  friend bool operator==(const RedisTlsConfig&, const RedisTlsConfig&) = default;
};

// store.redis.sentinel: Redis Sentinel names the master (and follows its
// failovers); the master's credentials, database and TLS are the redis
// section's.
struct RedisSentinelConfig {
  std::string master;                  // "" = no sentinel
  std::vector<std::string> addresses;  // as written: host:port or a redis[s]:// URL
  std::string password_file;           // resolved; "" = none
  std::string password;                // its content: AUTH to the sentinels
  friend bool operator==(const RedisSentinelConfig&, const RedisSentinelConfig&) = default;
};

struct RedisConfig {
  std::vector<HostPort> addresses{{"127.0.0.1", 6379}};  // none with a sentinel
  bool cluster = false;
  RedisSentinelConfig sentinel;
  Millis timeout{5};
  bool on_failure_allow = true;  // on_failure: allow | deny
  std::string username;          // `username`, or a redis:// URL's; "" = the default user
  std::string password;
  int database = 0;
  // url_file, resolved: the URL above (address, user, password, database,
  // TLS) was read from it. "" = written in the config.
  std::string url_file;
  bool time_source_redis = true;  // time_source: redis | local
  bool deny_cache = true;         // deny locally what Redis just denied, until its retry_after
  bool mode_cached = false;       // mode: exact | cached (local decisions, hits synced)
  Millis sync_interval{50};       // cached mode: how often hits go to Redis
  RedisTlsConfig tls;
  friend bool operator==(const RedisConfig&, const RedisConfig&) = default;
};

struct StoreConfig {
  enum class Backend { kMemory, kRedis };
  Backend backend = Backend::kMemory;
  size_t max_keys = 1'000'000;
  RedisConfig redis;
  friend bool operator==(const StoreConfig&, const StoreConfig&) = default;
};

// A CIDR block; addresses are 16 bytes (IPv4 as IPv4-mapped IPv6).
struct Cidr {
  uint8_t address[16] = {};
  int prefix_length = 0;  // 0..128 over the 16 bytes (an IPv4 /24 is stored as /120)
  std::string text;       // as written
  friend bool operator==(const Cidr&, const Cidr&) = default;
};

struct ClientIpConfig {
  // The one header the client address is read from (policy/ip.h); the
  // others are ignored, whichever a request carries.
  enum class Header { kXForwardedFor, kXRealIp, kForwarded };
  Header header = Header::kXForwardedFor;
  std::vector<Cidr> trusted_proxies;  // `header` is read only from these peers
  int ipv6_prefix = 64;               // IPv6 clients are keyed by this prefix
  friend bool operator==(const ClientIpConfig&, const ClientIpConfig&) = default;
};

struct HeaderModes {
  bool legacy = true;  // X-RateLimit-*
  bool draft = false;  // RateLimit / RateLimit-Policy (draft-ietf-httpapi-ratelimit-headers-10)
  friend bool operator==(const HeaderModes&, const HeaderModes&) = default;
};

// How a request's client key is formed: "ip", "header:x-api-key",
// "cookie:session", "query:api_key", "jwt:sub", "global", or a combination
// joined by '+', e.g. "ip+header:x-api-key".
struct KeyPart {
  enum class Kind { kIp, kHeader, kCookie, kQuery, kJwt, kGlobal };
  Kind kind = Kind::kIp;
  std::string name;  // the header (lower-case), cookie, query parameter or claim name
  friend bool operator==(const KeyPart&, const KeyPart&) = default;
};
struct KeySpec {
  std::vector<KeyPart> parts{KeyPart{}};  // default: ip
  std::string text = "ip";
  friend bool operator==(const KeySpec&, const KeySpec&) = default;
};

// One limit of a route: either a named policy or an inline limit.
struct RouteLimit {
  // What a denial names (access log, 429 body, sluice_limit_denials_total,
  // RateLimit-Policy items): the policy name, an inline limit's `name:`, or
  // by default its counter's name (below).
  std::string name;
  bool named_policy = false;
  Limit limit;
  config::SourceMark mark{};  // where the limit is defined (the policy's, for a named one)
  // count_status: the upstream statuses that count (ascending). Empty: every
  // request counts. Otherwise the gateway charges before proxying and gives
  // the charge back when the upstream answers with another status.
  std::vector<int> count_status{};
  // What its store keys are made of (policy.h's scopes): the policy name, or
  // for an inline limit "<route name>", "<route name>#<index in the list>"
  // when the route has several ("<plan>#<index>" in a plan). Empty: `name`
  // (a limit without `name:`). Never `name:`, so renaming keeps the counts.
  std::string counter{};
  // `key:` of an inline limit of a route (quotas in layers: an org's limit
  // beside a user's): the client key this limit is counted under. Empty: the
  // route's key. Its store key is "<scope>|<this key's client key>".
  std::optional<KeySpec> key{};
  const std::string& counter_name() const { return counter.empty() ? name : counter; }
  // Equal when they mean the same: where they are written (mark) is not compared.
  friend bool operator==(const RouteLimit& a, const RouteLimit& b) {
    return a.name == b.name && a.named_policy == b.named_policy && a.limit == b.limit &&
           a.count_status == b.count_status && a.counter_name() == b.counter_name() &&
           a.key == b.key;
  }
};

// `name:` of a limit: 1 to kMaxLimitNameLength letters, digits, '_', '-',
// '.' and ':' (as policy names), so it is safe in logs, JSON and metric labels.
inline constexpr size_t kMaxLimitNameLength = 64;

struct Route {
  std::string name;     // "GET /api/users/{id}" as written after `match:`, or "default"
  std::string method;   // upper-case, or "*"
  std::string pattern;  // "/api/users/{id}", "/static/*"
  KeySpec key;
  std::vector<RouteLimit> limits;
  // `plan` in the limits list: the consumer's plan's limits apply too (after
  // `limits`). The value is where `plan` was written in the list, so the
  // YAML writer puts it back there.
  std::optional<size_t> plan_at;
  // Decided and counted, never denied (a denial is counted as shadow_denied
  // and the request goes on): a new limit tried on live traffic.
  bool shadow = false;
  // `delay` (queueing, as nginx's limit_req burst without nodelay): a request
  // that refill within this long would allow is held until its turn and then
  // goes on; only what no wait up to `delay` could allow is denied. 0: none.
  // Every limit of the route is a bucket (token_bucket, gcra) on the memory
  // store (the loader checks).
  Nanos delay{0};
  std::string upstream;  // `upstream: NAME` (one of Config::upstreams); "" = the default
  // `cost:` (policy/route_cost.h): charged by estimate, settled after the response.
  std::optional<RouteCost> cost;
  int line = 0;  // in the config file, for messages
  // Equal when they mean the same: the line is not compared.
  friend bool operator==(const Route& a, const Route& b) {
    return a.name == b.name && a.method == b.method && a.pattern == b.pattern && a.key == b.key &&
           a.limits == b.limits && a.plan_at == b.plan_at && a.shadow == b.shadow &&
           a.delay == b.delay && a.upstream == b.upstream && a.cost == b.cost;
  }
};

struct NamedPolicy {
  std::string name;
  Limit limit;
  config::SourceMark mark{};        // where its limit block is
  std::vector<int> count_status{};  // as RouteLimit::count_status
  // Equal when they mean the same: the mark is not compared.
  friend bool operator==(const NamedPolicy& a, const NamedPolicy& b) {
    return a.name == b.name && a.limit == b.limit && a.count_status == b.count_status;
  }
};

// A plan under `plans:`: the limits of one consumer tier. Its limits are
// named "<plan>#<i>" and stored under "plan:<plan>#<i>|<consumer key>",
// shared by every route that lists `plan`.
struct ConsumerPlan {
  std::string name;
  std::vector<RouteLimit> limits;  // named_policy = false
  config::SourceMark mark{};       // where the plan is defined
  friend bool operator==(const ConsumerPlan& a, const ConsumerPlan& b) {
    return a.name == b.name && a.limits == b.limits;
  }
};

// `consumers:`: who is on which plan.
struct ConsumersConfig {
  // Where the consumer id comes from: one header:, cookie:, query: or jwt: part.
  KeySpec key;
  std::string file;  // resolved path of the consumers file
  // The plan (index in Config::plans) of ids not in the file and of
  // requests without one; nullopt: `unknown: reject` (401).
  std::optional<size_t> unknown_plan;
  // The file's consumers as loaded (plan indices into Config::plans). A
  // Policy takes the table over (its config() holds null here) and serves
  // it, with the changes made at runtime (PUT /admin/consumers), from its
  // ConsumerDirectory.
  std::shared_ptr<const ConsumerTable> table;
  friend bool operator==(const ConsumersConfig& a, const ConsumersConfig& b) {
    const bool same_table = a.table == b.table || (a.table && b.table && *a.table == *b.table);
    return a.key == b.key && a.file == b.file && a.unknown_plan == b.unknown_plan && same_table;
  }
};

struct ServerLimits {
  // Client connections open at once (listen, decision_api and admin ports);
  // above it new ones are closed at once. 0 = derived from the open-file limit.
  size_t max_connections = 0;
  // Requests held by routes' `delay` at once, on every route and key; past
  // it a request that would be held is answered at once as if the route had
  // no delay. 0 = derived: a quarter of max_connections in force
  // (connection_limits.h).
  size_t max_held = 0;
  // TLS handshakes in progress at once on `listen`: a new one past it closes
  // the oldest unfinished one (each costs ~90 KB until it finishes).
  size_t max_tls_handshakes = 512;
  size_t max_header_bytes = 16 * 1024;  // 431 above
  size_t max_body_bytes = 1024 * 1024;  // 413 above (check/auth; proxied bodies stream)
  Millis header_timeout{10000};         // slow clients: 408 / close
  Millis idle_timeout{60000};           // keep-alive idle
  size_t threads = 0;                   // 0 = one per core
  Millis shutdown_grace{10000};         // drain in-flight requests on SIGTERM
  friend bool operator==(const ServerLimits&, const ServerLimits&) = default;
};

// What the gateway answers a request it denies (`deny:`; nginx's
// limit_req_status). The rate-limit headers and Retry-After come with it.
struct DenyResponse {
  int status = 429;
  std::string body_file;  // resolved path; "" = the built-in JSON body
  std::string body;       // the file's content, read at load and reload
  std::string content_type = "application/json";
  friend bool operator==(const DenyResponse&, const DenyResponse&) = default;
};

struct LoggingConfig {
  std::string level = "info";   // trace debug info warn error
  std::string format = "text";  // text | json: every line one JSON object
  bool access_log = false;
  bool redact_keys = true;  // header-derived key values hashed in logs, stats, dashboard
  double denial_log_per_second =
      1.0;  // denials logged at most this often (plus a count of the rest)
  friend bool operator==(const LoggingConfig&, const LoggingConfig&) = default;
};

// The Envoy RLS v3 gRPC API (served on `grpc`): where its envoyproxy/ratelimit
// descriptor files are and how it answers. The descriptor folder itself is
// loaded by src/rls (the `sluice serve` and `sluice validate` commands).
struct RlsSettings {
  std::string config_dir;  // resolved against the config file's folder when relative
  // response_headers: off | ratelimit (RateLimit-Limit/-Remaining/-Reset, as
  // envoyproxy/ratelimit) | draft (draft-ietf-httpapi-ratelimit-headers-10).
  enum class ResponseHeaders { kOff, kRateLimit, kDraft };
  ResponseHeaders response_headers = ResponseHeaders::kOff;
  bool dynamic_metadata = false;  // domain and descriptors in dynamic_metadata
  bool shadow_mode = false;       // every call answered OK; over-limit only counted
  bool merge_domains = false;     // several files may define one domain
  // detailed_metric: an allowed descriptor past this share of its limit
  // counts as near_limit.
  double near_limit_ratio = 0.8;
  // Connections open at once on the `grpc` port; 0 = derived from the
  // open-file limit.
  size_t max_connections = 0;
  friend bool operator==(const RlsSettings&, const RlsSettings&) = default;
};

// Who may ask for decisions (/v1/check, /v1/auth): a port of their own, and a
// bearer token. Without `listen` they are served on the main `listen` port
// only when no upstream is set (a pure decision service): a gateway's public
// port never answers them, so no public client can spend another's limits.
struct DecisionApi {
  std::optional<HostPort> listen;
  std::string token_file;  // as resolved; empty = no token
  std::string token;       // the file's content without its trailing newline
  friend bool operator==(const DecisionApi&, const DecisionApi&) = default;
};

// The `access:` lists, matched against the client address (as resolved
// through trusted_proxies). deny wins over allow.
struct AccessLists {
  std::vector<Cidr> allow;  // never limited (still counted)
  std::vector<Cidr> deny;   // 403 before any limit
  friend bool operator==(const AccessLists&, const AccessLists&) = default;
};

// The `paths:` keys: how request paths are read where frameworks disagree
// (PathReading), and which path the upstream gets.
struct PathsConfig {
  PathReading::EscapedSlashes escaped_slashes = PathReading::EscapedSlashes::kReject;
  PathReading::Backslash backslash = PathReading::Backslash::kReject;
  bool strip_matrix_params = true;
  // The upstream gets the path that was matched (normalised, case kept) and
  // the query as sent; false: the request target as sent.
  bool forward_normalized = true;
  friend bool operator==(const PathsConfig&, const PathsConfig&) = default;
};

// Who may use the admin port (besides binding it to loopback).
struct AdminAccess {
  std::string token_file;  // admin_token_file, resolved; empty = no token
  std::string token;
  // Host names the admin port answers besides its own address and localhost
  // (any other Host gets 421: DNS rebinding).
  std::vector<std::string> hosts;
  bool token_all = false;  // the token also guards the GET endpoints
  // Every POST, PUT and DELETE gets 403, token or not: probes and metrics
  // on an address other hosts reach, with nothing there to change state.
  bool read_only = false;
  friend bool operator==(const AdminAccess&, const AdminAccess&) = default;
};

// `tls:`: TLS on `listen` (and on `grpc` with grpc_tls). The files are read
// (and checked: config/values/tls_files.h) at load, so a reload swaps them as one
// with the rest of the config.
struct TlsSettings {
  std::string cert_file;  // resolved paths
  std::string key_file;
  std::string cert_pem;  // their content
  std::string key_pem;
  bool min_tls13 = false;  // min_version "1.3" (else "1.2")
  friend bool operator==(const TlsSettings&, const TlsSettings&) = default;
};

struct Config {
  std::string source;  // file path it was loaded from
  HostPort listen{"127.0.0.1", 8080};
  std::optional<TlsSettings> tls;
  bool grpc_tls = false;  // the gRPC port speaks TLS too (with `tls:`'s certificate)
  HostPort admin{"127.0.0.1", 9090};
  AdminAccess admin_access;
  DecisionApi decision_api;
  std::optional<HostPort> grpc;
  std::optional<RlsSettings> rls;  // set iff grpc is set (the loader checks)
  // The default upstream (`upstream:`): a URL, or one of `upstreams`.
  std::optional<Upstream> upstream;
  std::vector<Upstream> upstreams;  // `upstreams:`, in file order
  StoreConfig store;
  ClientIpConfig client_ip;
  AccessLists access;
  HeaderModes headers;
  bool case_insensitive_paths = false;
  PathsConfig paths;
  int auth_deny_status = 429;
  DenyResponse deny;
  std::optional<JwtSettings> jwt;  // for `jwt:CLAIM` keys
  std::vector<NamedPolicy> policies;
  std::vector<ConsumerPlan> plans;
  std::optional<ConsumersConfig> consumers;  // set iff plans is not empty (the loader checks)
  std::optional<Route> default_route;        // applies when no route matches; none = unlimited
  std::vector<Route> routes;                 // first match wins
  ServerLimits server;
  LoggingConfig logging;
  // Reload when the config file or a file it names changes on disk.
  bool watch_config = false;
  // HTTP/2 to clients: h2 by ALPN on `tls:`, h2c with prior knowledge on
  // plain ports (http/h2_connection.h); HTTP/1.1 stays served beside it.
  bool http2 = false;
  friend bool operator==(const Config&, const Config&) = default;
};

}  // namespace sluice::policy
