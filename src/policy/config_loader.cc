#include "policy/config_loader.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <ctime>
#include <map>
#include <set>
#include <utility>

#include "config/files.h"
#include "config/limit_block.h"
#include "config/values/tls_files.h"
#include "config/values/values.h"
#include "config/walker.h"
#include "core/step.h"
#include "policy/consumers_file.h"
#include "policy/cost_loader.h"
#include "policy/ip.h"
#include "policy/route_syntax.h"
#include "policy/upstreams_loader.h"

namespace sluice::policy {

namespace {

using config::closest_match;
using config::host_problem;
using config::Item;
using config::join;
using config::Keys;
using config::Mapping;
using config::parse_host_port;
using config::parse_redis_url;
using config::parse_size;
using config::quoted;
using config::RedisUrl;
using config::to_lower;
using config::Walker;

constexpr size_t kMaxConfigBytes = 16 * 1024 * 1024;

const Keys kTopKeys = {"listen",
                       "tls",
                       "grpc_tls",
                       "admin",
                       "admin_token_file",
                       "admin_token_all",
                       "admin_hosts",
                       "admin_read_only",
                       "decision_api",
                       "grpc",
                       "rls",
                       "upstream",
                       "upstreams",
                       "store",
                       "client_ip",
                       "access",
                       "headers",
                       "case_insensitive_paths",
                       "paths",
                       "auth_deny_status",
                       "deny",
                       "jwt",
                       "policies",
                       "plans",
                       "consumers",
                       "default",
                       "routes",
                       "server",
                       "logging",
                       "watch_config",
                       "http2"};
// A limit block of the server config: config::kLimitKeys (written out: a
// namespace-scope copy of another file's vector would depend on the order
// of static initialisation) and count_status.
const Keys kServerLimitKeys = {"algorithm", "capacity", "refill_rate",  "limit", "window", "max",
                               "lease",     "block",    "count_status", "name",  "key"};
const Keys kDecisionApiKeys = {"listen", "token_file"};
const Keys kDenyKeys = {"status", "body_file", "content_type"};
const Keys kJwtKeys = {"jwks_file", "secret_file", "issuer", "audience"};
const Keys kTlsKeys = {"cert", "key", "min_version"};
// A certificate chain or a key is a few kilobytes.
constexpr size_t kMaxPemBytes = 1024 * 1024;
const Keys kPathsKeys = {"escaped_slashes", "backslash", "matrix_params", "forward"};
// A JWKS is a handful of public keys.
constexpr size_t kMaxJwksBytes = 1024 * 1024;
// A deny body is sent with every denied request: small.
constexpr size_t kMaxDenyBodyBytes = 64 * 1024;
const Keys kRlsKeys = {"config_dir",    "response_headers", "dynamic_metadata", "shadow_mode",
                       "merge_domains", "near_limit_ratio", "max_connections"};
const Keys kUpstreamKeys = {"url", "connect_timeout", "timeout", "max_idle_connections"};
const Keys kStoreKeys = {"backend", "max_keys", "redis"};
const Keys kRedisKeys = {"addresses",   "url",      "url_file",   "cluster",  "timeout",
                         "on_failure",  "username", "password",   "database", "sentinel",
                         "time_source", "tls",      "deny_cache", "mode",     "sync_interval"};
const Keys kRedisSentinelKeys = {"master", "addresses", "password_file"};
const Keys kRedisTlsKeys = {"ca_file", "cert_file", "key_file", "server_name"};
const Keys kClientIpKeys = {"header", "trusted_proxies", "ipv6_prefix"};
const Keys kAccessKeys = {"allow", "deny"};
const Keys kConsumersKeys = {"key", "file", "unknown"};
// In a limits list: the consumer's plan (so no policy may be named so).
constexpr std::string_view kPlanWord = "plan";
// `unknown: reject` (so no plan may be named so).
constexpr std::string_view kRejectWord = "reject";
// A route's `delay`: longer holds are a client timeout, not a queue.
constexpr Nanos kMaxDelay = std::chrono::hours(1);
const Keys kDefaultKeys = {"key", "limits", "shadow", "delay"};
const Keys kRouteKeys = {"match", "name", "key", "limits", "shadow", "delay", "upstream", "cost"};
const Keys kServerKeys = {"max_connections",  "max_held",       "max_tls_handshakes",
                          "max_header_bytes", "max_body_bytes", "header_timeout",
                          "idle_timeout",     "threads",        "shutdown_grace"};
const Keys kLoggingKeys = {"level", "format", "access_log", "redact_keys", "denial_log_per_second"};

Result<Upstream> parse_upstream(std::string_view text) {
  Result<config::HttpUrl> url = config::parse_http_url(text);
  if (!url.ok()) return url.error();
  Upstream upstream;
  upstream.url = std::move(url->url);
  upstream.address = std::move(url->address);
  upstream.base_path = std::move(url->base_path);
  upstream.servers = {UpstreamServer{upstream.url, upstream.address, false}};
  return upstream;
}

// Walks the document, filling a Config and collecting every error. Each
// check reports and carries on, so one run shows every problem in the file.
class Loader {
 public:
  Loader(std::string file, const ConfigOverrides& overrides)
      : walker_(file, diagnostics_), overrides_(overrides) {
    config_.source = file;
  }

  LoadResult load(std::string_view text) {
    const std::optional<Item> doc = walker_.document(text);
    if (doc && doc->node.IsNull()) {
      walker_.error(YAML::Mark::null_mark(), "",
                    "the file is empty; expected a mapping of settings such as listen:, policies: "
                    "and routes: (see docs/CONFIG.md)");
    } else if (doc) {
      root(*doc);
    }
    LoadResult result;
    config::sort_by_position(diagnostics_.errors);
    // The consumers file's own errors come after the config's, in its order.
    diagnostics_.errors.insert(diagnostics_.errors.end(), consumers_file_errors_.begin(),
                               consumers_file_errors_.end());
    result.errors = std::move(diagnostics_.errors);
    result.files.push_back(config_.source);
    for (const std::string& p : walker_.named_paths()) {
      if (p != config_.source) result.files.push_back(p);
    }
    if (result.errors.empty()) result.config = std::move(config_);
    return result;
  }

 private:
  void host_port(const Item* item, HostPort* out) {
    if (item == nullptr) return;
    if (auto hp = walker_.host_port(*item, true)) *out = *hp;
  }

  // A command-line value in place of the file's; its error names the option.
  void override_address(std::string_view option, const std::optional<std::string>& value,
                        HostPort* out) {
    if (!value) return;
    Result<HostPort> hp = parse_host_port(*value, true);
    if (!hp.ok()) return option_error(option, hp.error().message);
    *out = *hp;
  }

  // --upstream replaces the URL and keeps the file's other upstream settings.
  void override_upstream() {
    if (!overrides_.upstream) return;
    Result<Upstream> u = parse_upstream(*overrides_.upstream);
    if (!u.ok()) return option_error("--upstream", u.error().message);
    if (!config_.upstream) config_.upstream = Upstream{};
    config_.upstream->url = u->url;
    config_.upstream->address = u->address;
    config_.upstream->base_path = u->base_path;
    config_.upstream->name.clear();  // the URL replaces a named default's servers
    config_.upstream->servers = u->servers;
  }

  void option_error(std::string_view option, const std::string& message) {
    diagnostics_.errors.emplace_back(std::string(option), 0, 0, message);
  }

  void millis(const Item* item, bool allow_zero, Millis* out) {
    if (item == nullptr) return;
    if (auto d = walker_.duration(*item, allow_zero)) *out = std::chrono::duration_cast<Millis>(*d);
  }

  // ---- sections --------------------------------------------------------

  void root(const Item& item) {
    if (!item.node.IsMap()) {
      walker_.error(item,
                    "the top level must be a mapping of settings (listen:, routes:, ...), got " +
                        Walker::describe(item.node));
      return;
    }
    if (const YAML::Node& top = item.node; top["domain"] && top["descriptors"]) {
      walker_.error(item,
                    "this is an envoyproxy/ratelimit descriptor file (domain:, descriptors:), not "
                    "a Sluice config: put it in a folder and name that folder in a Sluice "
                    "config's `rls: {config_dir: ...}` (see docs/ENVOY.md)");
      return;
    }
    const std::optional<Mapping> m = walker_.mapping(item, &kTopKeys, "a mapping");
    if (!m) return;
    host_port(m->get("listen"), &config_.listen);
    host_port(m->get("admin"), &config_.admin);
    override_address("--listen", overrides_.listen, &config_.listen);
    override_address("--admin", overrides_.admin, &config_.admin);
    admin_access(*m);
    if (const Item* d = m->get("decision_api")) decision_api(*d);
    const Item* grpc_item = m->get("grpc");
    if (grpc_item != nullptr) {
      HostPort hp;
      const size_t errors_before = walker_.error_count();
      host_port(grpc_item, &hp);
      if (walker_.error_count() == errors_before) config_.grpc = hp;
    }
    if (const Item* t = m->get("tls")) tls(*t);
    if (const Item* g = m->get("grpc_tls")) {
      if (auto b = walker_.boolean(*g)) config_.grpc_tls = *b;
      if (config_.grpc_tls && grpc_item == nullptr) {
        walker_.error(*g, "needs `grpc:`, the address of the port to serve with TLS");
      } else if (config_.grpc_tls && m->get("tls") == nullptr) {
        walker_.error(*g, "needs `tls:` (cert and key), the certificate the gRPC port presents");
      }
    }
    const Item* rls_item = m->get("rls");
    if (rls_item != nullptr) rls(*rls_item);
    // The gRPC port serves the RLS API only: one without the other is a mistake.
    if (config_.grpc && rls_item == nullptr) {
      walker_.error(
          *grpc_item,
          "the Envoy RLS API on this address needs `rls:` with `config_dir:`, the folder of "
          "its envoyproxy/ratelimit descriptor files");
    }
    if (rls_item != nullptr && grpc_item == nullptr) {
      walker_.error(*rls_item, "needs `grpc:`, the address the Envoy RLS API listens on");
    }
    const Item* upstreams_item = m->get("upstreams");
    if (upstreams_item != nullptr) load_upstreams(walker_, *upstreams_item, &config_.upstreams);
    if (const Item* u = m->get("upstream")) {
      upstream(*u);
    } else if (upstreams_item != nullptr) {
      walker_.error(*upstreams_item,
                    "needs `upstream: NAME`, the upstream of the routes that "
                    "name none");
    }
    override_upstream();
    if (const Item* s = m->get("store")) store(*s);
    if (const Item* c = m->get("client_ip")) client_ip(*c);
    if (const Item* a = m->get("access")) access(*a);
    if (const Item* h = m->get("headers")) headers(*h);
    if (const Item* c = m->get("case_insensitive_paths")) {
      if (auto b = walker_.boolean(*c)) config_.case_insensitive_paths = *b;
    }
    if (const Item* a = m->get("auth_deny_status")) {
      if (auto s = walker_.integer(*a, 400, 599, "an HTTP status from 400 to 599"))
        config_.auth_deny_status = static_cast<int>(*s);
    }
    if (const Item* p = m->get("paths")) paths(*p);
    if (const Item* d = m->get("deny")) deny(*d);
    if (const Item* j = m->get("jwt")) jwt(*j);
    // Before routes: a route's delay is held to server.idle_timeout.
    if (const Item* s = m->get("server")) server(*s);
    // Policies first: routes refer to them wherever they are in the file.
    if (const Item* p = m->get("policies")) policies(*p);
    if (const Item* p = m->get("plans")) plans(*p);
    if (const Item* c = m->get("consumers")) consumers(*c);
    if (const Item* d = m->get("default")) default_route(*d);
    if (const Item* r = m->get("routes")) routes(*r);
    plans_need_consumers(*m);
    if (const Item* l = m->get("logging")) logging(*l);
    if (const Item* w = m->get("watch_config")) {
      if (auto b = walker_.boolean(*w)) config_.watch_config = *b;
    }
    if (const Item* h = m->get("http2")) {
      if (auto b = walker_.boolean(*h)) config_.http2 = *b;
    }
    // Only the gateway sees the upstream's status.
    if (!config_.upstream) {
      for (const Item& c : count_status_items_) {
        walker_.error(c,
                      "count_status needs `upstream:`: only the gateway learns the status of the "
                      "response (/v1/check and /v1/auth count every request they decide)");
      }
      for (const Item& c : concurrency_items_) {
        walker_.error(c,
                      "a concurrency limit on a route needs `upstream:`: only the gateway sees "
                      "when a response has been sent (/v1/check takes one from a policy and "
                      "answers a lease to release)");
      }
    }
    // A jwt: key needs the keys its tokens are checked with.
    if (!config_.jwt && m->get("jwt") == nullptr) {
      for (const Item& key : jwt_keys_) {
        walker_.error(key,
                      "a jwt: key needs the `jwt:` section (jwks_file or secret_file) to verify "
                      "tokens with");
      }
    }
  }

  // admin_token_file, admin_token_all, admin_hosts, admin_read_only; and the
  // rule that an admin port reachable from other hosts must have a token or
  // refuse every change.
  void admin_access(const Mapping& top) {
    AdminAccess& access = config_.admin_access;
    const Item* token_file = top.get("admin_token_file");
    if (token_file != nullptr) {
      if (auto secret = walker_.secret_file(*token_file)) {
        access.token_file = secret->path;
        access.token = secret->value;
      }
    }
    if (const Item* all = top.get("admin_token_all")) {
      if (auto b = walker_.boolean(*all)) access.token_all = *b;
      if (access.token_all && token_file == nullptr) {
        walker_.error(*all, "needs `admin_token_file`: the token that guards every admin endpoint");
      }
    }
    if (const Item* hosts = top.get("admin_hosts")) {
      if (auto items =
              walker_.sequence(*hosts, "a list of host names like [sluice-admin.internal]")) {
        for (const Item& i : *items) {
          const std::optional<std::string> name = walker_.scalar(i, "a host name");
          if (!name) continue;
          if (!host_problem(*name, false).empty()) {
            walker_.error(
                i, "must be a host name like sluice-admin.internal (no port, no scheme), got " +
                       quoted(*name));
            continue;
          }
          access.hosts.push_back(to_lower(*name));
        }
      }
    }
    if (const Item* read_only = top.get("admin_read_only")) {
      if (auto b = walker_.boolean(*read_only)) access.read_only = *b;
    }
    // Reachable from other hosts, the admin port can reload and reset limits:
    // never without a token, unless it refuses every change.
    if (token_file == nullptr && !access.read_only && !is_loopback_host(config_.admin.host)) {
      const Item* admin = top.get("admin");
      walker_.error(
          admin != nullptr ? *admin : top.self,
          "an admin port on " + quoted(config_.admin.host) +
              " is reachable from other hosts and can reload the config and reset limits: set "
              "`admin_token_file` (a bearer token for it), `admin_read_only: true` (no POST, PUT "
              "or DELETE), or bind it to 127.0.0.1");
    }
  }

  void decision_api(const Item& item) {
    const std::optional<Mapping> m =
        walker_.mapping(item, &kDecisionApiKeys, "a mapping with listen: and token_file:");
    if (!m) return;
    DecisionApi& api = config_.decision_api;
    if (const Item* l = m->get("listen")) {
      HostPort hp;
      const size_t errors_before = walker_.error_count();
      host_port(l, &hp);
      if (walker_.error_count() == errors_before) api.listen = hp;
    }
    if (const Item* t = m->get("token_file")) {
      if (auto secret = walker_.secret_file(*t)) {
        api.token_file = secret->path;
        api.token = secret->value;
      }
    }
  }

  void rls(const Item& item) {
    const std::optional<Mapping> m = walker_.mapping(item, &kRlsKeys, "a mapping with config_dir:");
    if (!m) return;
    RlsSettings settings;
    bool ok = true;
    if (const Item* d = m->get("config_dir")) {
      if (auto dir = walker_.path(*d, "a folder path")) {
        settings.config_dir = *dir;
      } else {
        ok = false;
      }
    } else {
      walker_.error(
          item, "`config_dir` is required: the folder of envoyproxy/ratelimit descriptor files");
      ok = false;
    }
    if (const Item* h = m->get("response_headers")) {
      if (auto c = walker_.choice(*h, {"off", "ratelimit", "draft"})) {
        settings.response_headers = *c == 0   ? RlsSettings::ResponseHeaders::kOff
                                    : *c == 1 ? RlsSettings::ResponseHeaders::kRateLimit
                                              : RlsSettings::ResponseHeaders::kDraft;
      }
    }
    auto flag = [&](const char* key, bool* out) {
      if (const Item* i = m->get(key)) {
        if (auto b = walker_.boolean(*i)) *out = *b;
      }
    };
    flag("dynamic_metadata", &settings.dynamic_metadata);
    flag("shadow_mode", &settings.shadow_mode);
    flag("merge_domains", &settings.merge_domains);
    if (const Item* r = m->get("near_limit_ratio")) {
      if (auto ratio = walker_.parsed<double>(*r, "a number like 0.8", config::parse_ratio)) {
        settings.near_limit_ratio = *ratio;
      }
    }
    if (const Item* c = m->get("max_connections")) {
      if (auto v = walker_.integer(*c, 1, 10'000'000, "a whole number from 1 to 10000000"))
        settings.max_connections = *v;
    }
    if (ok) config_.rls = settings;
  }

  void upstream(const Item& item) {
    const std::string_view what = "an http:// URL like http://127.0.0.1:3000";
    if (item.node.IsScalar() && item.node.Scalar().find("://") == std::string::npos) {
      if (const Upstream* u = find_upstream(walker_, item, item.node.Scalar(), config_.upstreams)) {
        config_.upstream = *u;
      }
      return;
    }
    if (item.node.IsScalar()) {
      if (auto u = walker_.parsed<Upstream>(item, what, parse_upstream)) config_.upstream = *u;
      return;
    }
    if (!item.node.IsMap()) {
      walker_.error(item, "must be " + std::string(what) + " or a mapping with url:, got " +
                              Walker::describe(item.node));
      return;
    }
    const std::optional<Mapping> m = walker_.mapping(item, &kUpstreamKeys, "a mapping");
    if (!m) return;
    Upstream upstream;
    bool ok = false;
    if (const Item* url = m->get("url")) {
      if (auto u = walker_.parsed<Upstream>(*url, what, parse_upstream)) {
        upstream = *u;
        ok = true;
      }
    } else {
      walker_.error(item, "`url` is required");
    }
    millis(m->get("connect_timeout"), false, &upstream.connect_timeout);
    millis(m->get("timeout"), false, &upstream.timeout);
    if (const Item* n = m->get("max_idle_connections")) {
      if (auto v = walker_.integer(*n, 0, 100'000, "a whole number from 0 to 100000"))
        upstream.max_idle_connections = *v;
    }
    if (ok) config_.upstream = upstream;
  }

  void store(const Item& item) {
    const std::optional<Mapping> m = walker_.mapping(item, &kStoreKeys, "a mapping");
    if (!m) return;
    if (const Item* b = m->get("backend")) {
      if (auto c = walker_.choice(*b, {"memory", "redis"}))
        config_.store.backend =
            *c == 0 ? StoreConfig::Backend::kMemory : StoreConfig::Backend::kRedis;
    }
    if (const Item* k = m->get("max_keys")) {
      if (auto v = walker_.integer(*k, 1, uint64_t{1} << 40, "a positive whole number"))
        config_.store.max_keys = *v;
    }
    if (const Item* r = m->get("redis")) redis(*r);
  }

  void redis(const Item& item) {
    const std::optional<Mapping> m = walker_.mapping(item, &kRedisKeys, "a mapping");
    if (!m) return;
    RedisConfig& redis = config_.store.redis;
    const Item* url_file = m->get("url_file");
    if (url_file != nullptr && m->get("url") != nullptr)
      walker_.error(*url_file, "set either `url` or `url_file`, not both");
    // `url` or `url_file` (the URL in a file: a Kubernetes Secret).
    const Item* url = url_file != nullptr ? url_file : m->get("url");
    const std::string url_key = url_file != nullptr ? "url_file" : "url";
    bool plain_url = false;  // a redis:// url, read without error
    if (url != nullptr) {
      for (std::string_view other : {"addresses", "username", "password", "database"}) {
        if (const Item* o = m->get(other))
          walker_.error(*o,
                        "set either `" + url_key + "` or `" + std::string(other) + "`, not both");
      }
      std::optional<RedisUrl> u;
      if (url_file != nullptr) {
        u = redis_url_from_file(*url_file, &redis.url_file);
      } else {
        u = walker_.parsed<RedisUrl>(*url, "a redis:// URL",
                                     [](std::string_view t) { return parse_redis_url(t); });
      }
      if (u) {
        redis.addresses = {u->address};
        redis.username = u->username;
        redis.password = u->password;
        redis.database = u->database < 0 ? 0 : u->database;
        redis.tls.enabled = u->tls;
        plain_url = !u->tls;
      }
    }
    if (const Item* a = m->get("addresses"); a != nullptr && url == nullptr) {
      if (auto items = walker_.sequence(*a, "a list of host:port addresses")) {
        if (items->empty()) walker_.error(*a, "must list at least one address");
        std::vector<HostPort> addresses;
        for (const Item& i : *items) {
          if (auto hp = walker_.parsed<HostPort>(
                  i, "host:port like 127.0.0.1:6379",
                  [](std::string_view t) { return parse_host_port(t, false); }))
            addresses.push_back(*hp);
        }
        if (!addresses.empty()) redis.addresses = addresses;
      }
    }
    if (const Item* c = m->get("cluster")) {
      if (auto b = walker_.boolean(*c)) redis.cluster = *b;
    }
    millis(m->get("timeout"), false, &redis.timeout);
    if (const Item* f = m->get("on_failure")) {
      if (auto c = walker_.choice(*f, {"allow", "deny"})) redis.on_failure_allow = *c == 0;
    }
    if (const Item* u = m->get("username"); u != nullptr && url == nullptr) {
      if (auto s = walker_.scalar(*u, "an ACL user name")) {
        if (s->empty()) walker_.error(*u, "must not be empty (leave it out for the default user)");
        redis.username = *s;
      }
    }
    if (const Item* p = m->get("password"); p != nullptr && url == nullptr) {
      if (auto s = walker_.scalar(*p, "a string")) redis.password = *s;
    }
    if (const Item* d = m->get("database"); d != nullptr && url == nullptr) {
      if (auto v = walker_.integer(*d, 0, 1'000'000, "a database number (0, 1, ...)"))
        redis.database = static_cast<int>(*v);
    }
    if (const Item* t = m->get("time_source")) {
      if (auto c = walker_.choice(*t, {"redis", "local"})) redis.time_source_redis = *c == 0;
    }
    if (const Item* d = m->get("deny_cache")) {
      if (auto b = walker_.boolean(*d)) redis.deny_cache = *b;
    }
    const Item* mode = m->get("mode");
    if (mode != nullptr) {
      if (auto c = walker_.choice(*mode, {"exact", "cached"})) redis.mode_cached = *c == 1;
    }
    if (const Item* s = m->get("sync_interval")) {
      millis(s, false, &redis.sync_interval);
      if (!redis.mode_cached) walker_.error(*s, "sync_interval is read only with `mode: cached`");
    }
    if (redis.cluster && redis.database != 0) {
      const Item* where = m->get("database") ? m->get("database") : url;
      walker_.error(where ? *where : item, "Redis Cluster has only database 0");
    }
    if (const Item* sentinel = m->get("sentinel")) {
      redis_sentinel(*sentinel, &redis, &plain_url);
      for (std::string_view other : {"addresses", "url", "url_file"}) {
        if (const Item* o = m->get(other))
          walker_.error(*o, "with `sentinel` the sentinels name the master: leave out `" +
                                std::string(other) +
                                "` (username, password, database and tls are the master's)");
      }
      if (redis.cluster)
        walker_.error(*sentinel,
                      "`sentinel` and `cluster: true` cannot go together: a Redis Cluster fails "
                      "over by itself");
    }
    if (const Item* t = m->get("tls")) redis_tls(*t, plain_url, &redis.tls);
  }

  // store.redis.url_file: the file's one line is read as `url` is. Its
  // errors show the URL without its user info: the file is where the
  // password is kept so that it is seen nowhere else.
  std::optional<RedisUrl> redis_url_from_file(const Item& item, std::string* path) {
    const std::optional<config::Secret> secret = walker_.secret_file(item, "Redis URL");
    if (!secret) return std::nullopt;
    *path = secret->path;
    Result<RedisUrl> u = parse_redis_url(secret->value);
    if (u.ok()) return *u;
    const std::string& text = secret->value;
    std::string shown = text;
    const size_t scheme_end = text.find("://");
    const size_t at = text.rfind('@');
    if (scheme_end != std::string::npos && at != std::string::npos && at > scheme_end)
      shown = text.substr(0, scheme_end + 3) + "***" + text.substr(at);
    std::string message = u.error().message;
    if (const size_t echoed = message.find(quoted(text)); echoed != std::string::npos)
      message.replace(echoed, quoted(text).size(), quoted(shown));
    walker_.error(item, "the Redis URL in " + secret->path + " " + message);
    return std::nullopt;
  }

  // store.redis.sentinel. A sentinel written rediss:// turns TLS on for the
  // master and the sentinels alike; one written redis:// then is an error
  // (`plain_url`, as for a redis:// url beside a tls block). Whether the
  // sentinels know the master can only be asked of them: at start.
  void redis_sentinel(const Item& item, RedisConfig* redis, bool* plain_url) {
    const std::optional<Mapping> m =
        walker_.mapping(item, &kRedisSentinelKeys, "a mapping with master: and addresses:");
    if (!m) return;
    RedisSentinelConfig& sentinel = redis->sentinel;
    redis->addresses.clear();
    if (const Item* name = m->get("master")) {
      if (auto s = walker_.scalar(*name, "the master's name, as the sentinels monitor it")) {
        const bool printable = std::all_of(s->begin(), s->end(), [](char c) {
          return static_cast<unsigned char>(c) > 0x20 && static_cast<unsigned char>(c) < 0x7f;
        });
        if (s->empty() || !printable) {
          walker_.error(*name,
                        "must be the master's name as in `sentinel monitor <name> ...`: visible "
                        "characters, no spaces");
        } else {
          sentinel.master = *s;
        }
      }
    } else {
      walker_.error(item, "`master` is required: the name the sentinels monitor the master by");
    }
    const Item* list = m->get("addresses");
    if (list == nullptr) {
      walker_.error(item, "`addresses` is required: the sentinels' host:port (26379 is theirs)");
    } else if (auto items = walker_.sequence(*list, "a list of host:port addresses")) {
      if (items->empty()) walker_.error(*list, "must list at least one sentinel");
      const Item* tls_at = nullptr;    // a rediss:// address
      const Item* plain_at = nullptr;  // a redis:// address
      for (const Item& i : *items) {
        std::optional<std::string> text = walker_.scalar(i, "host:port or a redis:// URL");
        if (!text) continue;
        Result<RedisUrl> u = parse_redis_url(*text, /*url_only=*/false);
        if (!u.ok()) {
          walker_.error(i, u.error().message);
          continue;
        }
        if (u->database >= 0) {
          walker_.error(
              i, "a sentinel has no database: leave out the /" + std::to_string(u->database));
          continue;
        }
        if (u->tls) tls_at = &i;
        if (!u->tls && text->find("://") != std::string::npos) plain_at = &i;
        sentinel.addresses.push_back(std::move(*text));
      }
      if (tls_at != nullptr && plain_at != nullptr) {
        walker_.error(*plain_at,
                      "TLS is all or nothing: this sentinel is redis://, another rediss://");
      } else if (tls_at != nullptr) {
        redis->tls.enabled = true;
      } else if (plain_at != nullptr) {
        *plain_url = true;
      }
    }
    if (const Item* p = m->get("password_file")) {
      if (auto secret = walker_.secret_file(*p, "password")) {
        sentinel.password_file = secret->path;
        sentinel.password = secret->value;
      }
    }
  }

  // store.redis.tls. With a redis:// url it is an error, not a warning: the
  // settings would be ignored and the connection plain, which their author
  // did not mean. The files are loaded as the store will load them, so a
  // missing file or a key that does not match its certificate is reported here.
  void redis_tls(const Item& item, bool plain_url, RedisTlsConfig* tls) {
    const std::optional<Mapping> m = walker_.mapping(item, &kRedisTlsKeys, "a mapping");
    if (!m) return;
    if (plain_url) {
      walker_.error(item, "needs a rediss:// url: with redis:// the connection is plain TCP");
      return;
    }
    tls->enabled = true;  // with `addresses`, which have no scheme to say so
    bool files_ok = true;
    const auto file = [&](const char* key, std::string* out) -> const Item* {
      const Item* i = m->get(key);
      if (i == nullptr) return nullptr;
      if (auto p = walker_.path(*i)) {
        *out = *p;
      } else {
        files_ok = false;
      }
      return i;
    };
    const Item* ca = file("ca_file", &tls->ca_file);
    const Item* cert = file("cert_file", &tls->cert_file);
    const Item* key = file("key_file", &tls->key_file);
    if ((cert == nullptr) != (key == nullptr)) {
      walker_.error(cert != nullptr ? *cert : *key,
                    "`cert_file` and `key_file` go together: give both or neither");
      files_ok = false;
    }
    if (const Item* n = m->get("server_name")) {
      if (auto s = walker_.scalar(*n, "a host name or IP address")) {
        if (s->empty()) walker_.error(*n, "must not be empty");
        tls->server_name = *s;
      }
    }
    if (!files_ok) return;
    if (auto e = config::check_tls_files({tls->ca_file, tls->cert_file, tls->key_file})) {
      using Key = config::TlsFilesError::Key;
      const Item* at = e->key == Key::kCaFile ? ca : e->key == Key::kCertFile ? cert : key;
      walker_.error(at != nullptr ? *at : item, e->message);
    }
  }

  void client_ip(const Item& item) {
    const std::optional<Mapping> m = walker_.mapping(item, &kClientIpKeys, "a mapping");
    if (!m) return;
    if (const Item* h = m->get("header")) {
      // In the order of ClientIpConfig::Header.
      if (auto c = walker_.choice(*h, {"x-forwarded-for", "x-real-ip", "forwarded"}))
        config_.client_ip.header = static_cast<ClientIpConfig::Header>(*c);
    }
    if (const Item* t = m->get("trusted_proxies")) cidrs(*t, &config_.client_ip.trusted_proxies);
    if (const Item* p = m->get("ipv6_prefix")) {
      if (auto v = walker_.integer(*p, 1, 128, "a prefix length from 1 to 128"))
        config_.client_ip.ipv6_prefix = static_cast<int>(*v);
    }
  }

  void cidrs(const Item& item, std::vector<Cidr>* out) {
    const auto items = walker_.sequence(item, "a list of CIDR blocks like [10.0.0.0/8]");
    if (!items) return;
    for (const Item& i : *items) {
      const std::optional<std::string> text =
          walker_.scalar(i, "a CIDR block like 10.0.0.0/8 or 2001:db8::/32");
      if (!text) continue;
      if (std::optional<Cidr> cidr = parse_cidr(*text)) {
        out->push_back(*cidr);
      } else {
        walker_.error(
            i, "must be a CIDR block like 10.0.0.0/8 or 2001:db8::/32, got " + quoted(*text));
      }
    }
  }

  void access(const Item& item) {
    const std::optional<Mapping> m = walker_.mapping(item, &kAccessKeys, "a mapping");
    if (!m) return;
    if (const Item* a = m->get("allow")) cidrs(*a, &config_.access.allow);
    if (const Item* d = m->get("deny")) cidrs(*d, &config_.access.deny);
  }

  void headers(const Item& item) {
    const Keys names = {"legacy", "draft"};
    HeaderModes modes{false, false};
    auto enable = [&](const Item& i, size_t which) {
      bool& flag = which == 0 ? modes.legacy : modes.draft;
      if (flag) walker_.error(i, std::string(names[which]) + " is listed twice");
      flag = true;
    };
    if (item.node.IsScalar()) {  // one mode, or none
      if (auto c = walker_.choice(item, {"legacy", "draft", "none"})) {
        if (*c < 2) enable(item, *c);
      }
    } else if (auto items = walker_.sequence(item,
                                             "a list of header styles: [legacy], [draft] or "
                                             "[legacy, draft]")) {
      for (const Item& i : *items) {
        if (auto c = walker_.choice(i, names)) enable(i, *c);
      }
    }
    config_.headers = modes;
  }

  // ---- limits ----------------------------------------------------------

  // A limit of the server config: a limit block (config/limit_block.h) and
  // its count_status.
  struct ServerLimit {
    Limit limit;
    std::vector<int> count_status;
    std::optional<Item> name;    // `name:`, valid, where written; absent: the default name
    std::optional<KeySpec> key;  // `key:` (a route's inline limit only)
    std::optional<Item> key_item;
  };

  // An inline limit mapping. `nameable`: it may carry `name:` (a policy's
  // limit is named by the policy). `keyable`: it may carry `key:` (only a
  // route's own limits: a policy is keyed by whoever applies it, a plan by
  // its consumer).
  std::optional<ServerLimit> limit(const Item& item, bool nameable, bool keyable = false) {
    const std::optional<Mapping> m =
        walker_.mapping(item, &kServerLimitKeys, "a limit like {capacity: 10, refill_rate: 2/s}");
    if (!m) return std::nullopt;
    std::optional<std::vector<int>> statuses = std::vector<int>{};
    if (const Item* c = m->get("count_status")) statuses = count_status(*c);
    std::optional<Item> name;
    bool name_ok = true;
    if (const Item* n = m->get("name")) {
      name_ok = nameable ? limit_name(*n) : false;
      if (!nameable) {
        walker_.error(*n, "a policy's limit is named by the policy: remove `name`");
      } else if (name_ok) {
        name = *n;
      }
    }
    std::optional<KeySpec> key;
    bool key_ok = true;
    if (const Item* k = m->get("key")) {
      key_ok = limit_key(*k, keyable, &key);
    }
    std::optional<Limit> l = config::read_limit(walker_, item, config::LimitBlock::of(*m));
    if (!l || !statuses || !name_ok || !key_ok) return std::nullopt;
    if (l->algorithm() == Algorithm::kConcurrency && !statuses->empty()) {
      walker_.error(*m->get("count_status"),
                    "a concurrency slot is given back when the response has been sent, whatever "
                    "its status: count_status does not apply");
      return std::nullopt;
    }
    std::optional<Item> key_item;
    if (key) key_item = *m->get("key");
    return ServerLimit{std::move(*l), std::move(*statuses), std::move(name), std::move(key),
                       std::move(key_item)};
  }

  // A limit's own `key:` (quotas in layers), where `keyable` says it may be.
  bool limit_key(const Item& item, bool keyable, std::optional<KeySpec>* out) {
    if (!keyable) {
      walker_.error(item,
                    "only a route's own limits take `key:` (a policy is keyed by the route or "
                    "/v1/check call that applies it, a plan's limits by the consumer)");
      return false;
    }
    KeySpec spec;
    const size_t errors = walker_.error_count();
    key_spec(&item, &spec);
    if (walker_.error_count() != errors) return false;
    *out = std::move(spec);
    return true;
  }

  // A limit's `name:`: checked as RouteLimit's name says (config.h).
  bool limit_name(const Item& item) {
    const std::optional<std::string> s = walker_.scalar(item, "a limit name like per-minute");
    if (!s) return false;
    if (s->empty() || s->size() > kMaxLimitNameLength || !valid_policy_name(*s)) {
      walker_.error(item, "a limit name is 1 to " + std::to_string(kMaxLimitNameLength) +
                              " letters, digits, '_', '-', '.' and ':', got " + quoted(*s));
      return false;
    }
    return true;
  }

  // Names are unique within a route (and a plan): `seen` holds those met so
  // far with where each was written; reports `name` (written at `where`) if
  // it is one of them.
  void unique_limit_name(std::map<std::string, Item>& seen, const std::string& name,
                         const Item& where) {
    const auto [it, inserted] = seen.emplace(name, where);
    if (!inserted) {
      walker_.error(where, "two limits of this list are named " + quoted(name) + " (the other at " +
                               walker_.where(it->second).text() +
                               "): a denial must name one limit");
    }
  }

  // count_status: [401, 403] (or one status alone), ascending and once each.
  std::optional<std::vector<int>> count_status(const Item& item) {
    count_status_items_.push_back(item);
    std::vector<Item> items;
    if (item.node.IsScalar()) {
      items.push_back(item);
    } else if (auto seq = walker_.sequence(item, "a list of HTTP statuses like [401, 403]")) {
      items = std::move(*seq);
      if (items.empty()) {
        walker_.error(item,
                      "must list at least one HTTP status (leave count_status out to count every "
                      "request)");
        return std::nullopt;
      }
    } else {
      return std::nullopt;
    }
    std::vector<int> out;
    bool ok = true;
    for (const Item& i : items) {
      if (auto v = walker_.integer(i, 100, 599, "an HTTP status from 100 to 599")) {
        out.push_back(static_cast<int>(*v));
      } else {
        ok = false;
      }
    }
    if (!ok) return std::nullopt;
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }

  static bool valid_policy_name(std::string_view name) {
    return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             c == '_' || c == '-' || c == '.' || c == ':';
    });
  }

  void policies(const Item& item) {
    const std::optional<Mapping> m =
        walker_.mapping(item, nullptr, "a mapping of policy names to limits");
    if (!m) return;
    for (const Mapping::Entry& entry : m->entries) {
      const std::string& name = entry.key;
      const Item& value = entry.value;
      policy_names_.push_back(name);
      if (!valid_policy_name(name)) {
        walker_.error(entry.key_mark, value.path,
                      "a policy name may hold only letters, digits, '_', '-', '.' and ':'");
        broken_policies_.insert(name);
        continue;
      }
      if (name == kPlanWord) {
        walker_.error(entry.key_mark, value.path,
                      "`plan` stands for the consumer's plan in limits lists: give the policy "
                      "another name");
        broken_policies_.insert(name);
        continue;
      }
      if (!value.node.IsMap()) {
        walker_.error(value, "must be a limit like {capacity: 5, refill_rate: 1/s}, got " +
                                 Walker::describe(value.node));
        broken_policies_.insert(name);
        continue;
      }
      if (std::optional<ServerLimit> l = limit(value, /*nameable=*/false)) {
        config_.policies.push_back(
            NamedPolicy{name, l->limit, walker_.where(value), std::move(l->count_status)});
      } else {
        broken_policies_.insert(name);
      }
    }
  }

  const NamedPolicy* find_policy(std::string_view name) const {
    for (const NamedPolicy& p : config_.policies)
      if (p.name == name) return &p;
    return nullptr;
  }

  // A route's `limits:` list: policy names and inline limits.
  // `plan_at` gets the position of `plan` (the consumer's plan) in the list.
  // `route_key`: the route's `key:`, which a limit's own may differ from.
  std::vector<RouteLimit> route_limits(const Item& item, const std::string& route_name,
                                       const KeySpec& route_key, std::optional<size_t>* plan_at) {
    std::vector<RouteLimit> out;
    if (item.node.IsMap() || item.node.IsScalar()) {
      walker_.error(item, "must be a list of limits (write [ ... ] around a single one), got " +
                              Walker::describe(item.node));
      return out;
    }
    const std::optional<std::vector<Item>> items =
        walker_.sequence(item, "a list of policy names and limits");
    if (!items) return out;
    if (items->empty()) walker_.error(item, "must list at least one limit");
    const size_t inline_count =
        std::count_if(items->begin(), items->end(), [](const Item& i) { return i.node.IsMap(); });
    std::set<std::string> named;
    std::map<std::string, Item> names;  // of the limits, for unique_limit_name
    for (size_t i = 0; i < items->size(); ++i) {
      const Item& li = (*items)[i];
      if (li.node.IsScalar() && li.node.Scalar() == kPlanWord) {
        if (*plan_at) {
          walker_.error(li, "`plan` is listed twice");
        } else {
          *plan_at = i;
          plan_items_.push_back(li);
        }
      } else if (li.node.IsScalar()) {
        const std::string name = li.node.Scalar();
        if (const NamedPolicy* p = find_policy(name)) {
          if (!named.insert(name).second) {
            walker_.error(li, "policy " + quoted(name) + " is listed twice");
            continue;
          }
          unique_limit_name(names, name, li);
          out.push_back(RouteLimit{name, true, p->limit, p->mark, p->count_status});
          if (p->limit.algorithm() == Algorithm::kConcurrency) concurrency_items_.push_back(li);
        } else if (broken_policies_.count(name) == 0) {
          const Keys names(policy_names_.begin(), policy_names_.end());
          const std::string guess = closest_match(name, names);
          std::string hint;
          if (!guess.empty()) {
            hint = "; did you mean `" + guess + "`?";
          } else if (policy_names_.empty()) {
            hint = " (no policies are defined under `policies:`)";
          } else {
            hint = " (defined: " + join(names) + ")";
          }
          walker_.error(li, "unknown policy " + quoted(name) + hint);
        }
      } else if (li.node.IsMap()) {
        if (std::optional<ServerLimit> l = limit(li, /*nameable=*/true, /*keyable=*/true)) {
          // By default named as its counter: the route's name, with its
          // index when the route has several inline limits.
          std::string name = route_name;
          if (inline_count > 1) name += "#" + std::to_string(i);
          std::string counter;
          if (l->name) {
            counter = std::exchange(name, l->name->node.Scalar());
            unique_limit_name(names, name, *l->name);
          }
          if (l->limit.algorithm() == Algorithm::kConcurrency) concurrency_items_.push_back(li);
          if (l->key && l->key->parts != route_key.parts) layered_key_fits_store(*l->key_item);
          out.push_back(RouteLimit{std::move(name), false, l->limit, walker_.where(li),
                                   std::move(l->count_status), std::move(counter),
                                   std::move(l->key)});
        }
      } else {
        walker_.error(
            li, "must be a policy name or a limit like {capacity: 10, refill_rate: 2/s}, got " +
                    Walker::describe(li.node));
      }
    }
    if (*plan_at) plan_names_differ(names);
    return out;
  }

  // A limit keyed apart from its route: its store key names another client,
  // so on a Redis Cluster another hash slot, and one script call cannot
  // decide both all-or-nothing.
  void layered_key_fits_store(const Item& key) {
    const StoreConfig& store = config_.store;
    if (store.backend != StoreConfig::Backend::kRedis || !store.redis.cluster) return;
    walker_.error(key,
                  "on a Redis Cluster (store.redis.cluster: true) a limit's `key:` must be its "
                  "route's: a request's limits are decided in one script call, on one hash slot, "
                  "and another key falls in another slot (leave `key:` out, or use one Redis)");
  }

  // A route that lists `plan`: its limits' names differ from every plan's.
  void plan_names_differ(const std::map<std::string, Item>& route_names) {
    for (const ConsumerPlan& plan : config_.plans) {
      std::set<std::string_view> reported;  // once per name and plan
      for (const RouteLimit& limit : plan.limits) {
        const auto it = route_names.find(limit.name);
        if (it == route_names.end() || !reported.insert(limit.name).second) continue;
        walker_.error(it->second, "this route lists `plan`, and plan " + quoted(plan.name) +
                                      " has a limit named " + quoted(limit.name) + " too (at " +
                                      limit.mark.text() + "): a denial must name one limit");
      }
    }
  }

  void key_spec(const Item* item, KeySpec* out) {
    if (item == nullptr) return;
    if (auto k = walker_.parsed<KeySpec>(*item, "ip, global, header:NAME or a combination",
                                         parse_key_spec)) {
      *out = *k;
      for (const KeyPart& part : k->parts) {
        if (part.kind == KeyPart::Kind::kJwt) {
          jwt_keys_.push_back(*item);
          break;
        }
      }
    }
  }

  void shadow(const Item* item, bool* out) {
    if (item == nullptr) return;
    if (auto b = walker_.boolean(*item)) *out = *b;
  }

  void paths(const Item& item) {
    const std::optional<Mapping> m = walker_.mapping(item, &kPathsKeys, "a mapping");
    if (!m) return;
    PathsConfig& p = config_.paths;
    if (const Item* e = m->get("escaped_slashes")) {
      if (auto c = walker_.choice(*e, {"reject", "decode", "keep"})) {
        p.escaped_slashes = *c == 0   ? PathReading::EscapedSlashes::kReject
                            : *c == 1 ? PathReading::EscapedSlashes::kDecode
                                      : PathReading::EscapedSlashes::kKeep;
      }
    }
    if (const Item* b = m->get("backslash")) {
      if (auto c = walker_.choice(*b, {"reject", "as_slash"})) {
        p.backslash = *c == 0 ? PathReading::Backslash::kReject : PathReading::Backslash::kAsSlash;
      }
    }
    if (const Item* mp = m->get("matrix_params")) {
      if (auto c = walker_.choice(*mp, {"strip", "keep"})) p.strip_matrix_params = *c == 0;
    }
    if (const Item* f = m->get("forward")) {
      if (auto c = walker_.choice(*f, {"normalized", "original"})) p.forward_normalized = *c == 0;
    }
  }

  void tls(const Item& item) {
    const std::optional<Mapping> m =
        walker_.mapping(item, &kTlsKeys, "a mapping with cert: and key:");
    if (!m) return;
    const Item* cert = m->get("cert");
    const Item* key = m->get("key");
    if (cert == nullptr || key == nullptr) {
      return walker_.error(item, cert == nullptr ? "needs `cert:`, the PEM certificate chain file"
                                                 : "needs `key:`, the PEM private key file");
    }
    TlsSettings tls;
    const auto read = [&](const Item& i, const char* what, std::string* path, std::string* text) {
      std::optional<std::string> p = walker_.path(i);
      if (!p) return false;
      std::string reason;
      std::optional<std::string> t =
          config::read_small_file(*p, std::string(what) + " " + *p, kMaxPemBytes, &reason);
      if (!t) {
        walker_.error(i, reason);
        return false;
      }
      *path = std::move(*p);
      *text = std::move(*t);
      return true;
    };
    const bool cert_read = read(*cert, "the certificate file", &tls.cert_file, &tls.cert_pem);
    const bool key_read = read(*key, "the key file", &tls.key_file, &tls.key_pem);
    if (const Item* v = m->get("min_version")) {
      if (auto c = walker_.choice(*v, {"1.2", "1.3"})) tls.min_tls13 = *c == 1;
    }
    if (!cert_read || !key_read) return;
    if (std::optional<config::TlsFilesError> p =
            config::check_server_pair(tls.cert_pem, tls.key_pem, std::time(nullptr))) {
      const bool in_key = p->key == config::TlsFilesError::Key::kKeyFile;
      return walker_.error(in_key ? *key : *cert,
                           std::string(in_key ? "the key file " : "the certificate file ") +
                               (in_key ? tls.key_file : tls.cert_file) + " " + p->message);
    }
    config_.tls = std::move(tls);
  }

  void jwt(const Item& item) {
    const std::optional<Mapping> m =
        walker_.mapping(item, &kJwtKeys, "a mapping with jwks_file: or secret_file:");
    if (!m) return;
    JwtSettings jwt;
    const Item* jwks = m->get("jwks_file");
    const Item* secret = m->get("secret_file");
    if ((jwks == nullptr) == (secret == nullptr)) {
      walker_.error(item, jwks == nullptr
                              ? "needs jwks_file (RS256 / ES256 public keys) or secret_file "
                                "(an HS256 secret)"
                              : "takes jwks_file or secret_file, not both");
      return;
    }
    const Item* keys_item = jwks != nullptr ? jwks : secret;
    if (jwks != nullptr) {
      std::optional<std::string> path = walker_.path(*jwks);
      if (!path) return;
      std::string reason;
      std::optional<std::string> text =
          config::read_small_file(*path, "the JWKS file " + *path, kMaxJwksBytes, &reason);
      if (!text) return walker_.error(*jwks, reason);
      jwt.jwks_file = std::move(*path);
      jwt.jwks = std::move(*text);
    } else {
      std::optional<config::Secret> s = walker_.secret_file(*secret);
      if (!s) return;
      jwt.secret_file = s->path;
      jwt.secret = s->value;
    }
    auto text = [&](const char* key, std::string* out) {
      if (const Item* i = m->get(key)) {
        if (auto v = walker_.scalar(*i, "a string")) *out = *v;
      }
    };
    text("issuer", &jwt.issuer);
    text("audience", &jwt.audience);
    // The keys are checked now, so that a bad file is a load error at its line.
    Result<std::shared_ptr<const JwtVerifier>> verifier = JwtVerifier::make(jwt);
    if (!verifier.ok()) {
      return walker_.error(*keys_item,
                           (jwks != nullptr ? "the JWKS file " + jwt.jwks_file + " "
                                            : "the secret file " + jwt.secret_file + ": ") +
                               verifier.error().message);
    }
    config_.jwt = std::move(jwt);
  }

  // `delay: 500ms` on a route (queueing). Read after the route's limits:
  // every limit it decides must be able to queue, on a store that can.
  void route_delay(const Item* item, Route* route) {
    if (item == nullptr) return;
    const std::optional<Nanos> d = walker_.duration(*item, true);
    if (!d) return;
    if (*d > kMaxDelay) {
      return walker_.error(*item, "must be at most 1h: a request is held that long at most");
    }
    if (d->count() == 0) return;
    // A held request's connection is silent both ways until its turn, and
    // no connection is kept silent longer than idle_timeout.
    if (*d > config_.server.idle_timeout) {
      return walker_.error(
          *item, "must be at most server.idle_timeout (" +
                     std::to_string(config_.server.idle_timeout.count()) +
                     "ms): a held request keeps its connection silent until its turn, and no "
                     "connection stays silent longer (raise server.idle_timeout or lower delay)");
    }
    if (route->shadow) {
      return walker_.error(*item,
                           "a shadow route lets every request through at once: it cannot hold "
                           "any (remove `delay` or `shadow`)");
    }
    if (config_.store.backend == StoreConfig::Backend::kRedis) {
      return walker_.error(*item,
                           "the redis store cannot queue requests yet (its scripts keep no "
                           "debt): `delay` needs store.backend: memory");
    }
    const auto refuse = [&](const RouteLimit& limit, const std::string& whose) {
      walker_.error(*item,
                    "needs every limit of the route to be token_bucket or gcra (a bucket can "
                    "go into debt to reserve a later turn; a window cannot): " +
                        whose + "limit " + quoted(limit.name) + " at " + limit.mark.text() +
                        " is " + std::string(algorithm_name(limit.limit.algorithm())));
    };
    for (const RouteLimit& limit : route->limits) {
      if (!core::queues_requests(limit.limit.algorithm())) return refuse(limit, "");
    }
    if (route->plan_at) {
      for (const ConsumerPlan& plan : config_.plans) {
        for (const RouteLimit& limit : plan.limits) {
          if (!core::queues_requests(limit.limit.algorithm()))
            return refuse(limit, "plan " + quoted(plan.name) + "'s ");
        }
      }
    }
    route->delay = *d;
  }

  // `cost:` on a route (policy/cost_loader.h), read after its limits.
  void route_cost(const Item* item, Route* route) {
    if (item != nullptr) route->cost = load_route_cost(walker_, *item, config_, *route);
  }

  void default_route(const Item& item) {
    const std::optional<Mapping> m =
        walker_.mapping(item, &kDefaultKeys, "a mapping with key: and limits:");
    if (!m) return;
    Route route;
    route.name = "default";
    route.method = "*";
    route.pattern = "/*";
    route.line = item.line();
    key_spec(m->get("key"), &route.key);
    shadow(m->get("shadow"), &route.shadow);
    if (const Item* l = m->get("limits")) {
      route.limits = route_limits(*l, route.name, route.key, &route.plan_at);
    } else {
      walker_.error(item, "`limits` is required");
    }
    route_delay(m->get("delay"), &route);
    config_.default_route = std::move(route);
  }

  void routes(const Item& item) {
    const std::optional<std::vector<Item>> items = walker_.sequence(item, "a list of routes");
    if (!items) return;
    struct Seen {
      std::string path;
      int line;
    };
    std::map<std::string, Seen> by_shape;  // "GET /a/{}" -> first route with it
    std::map<std::string, Seen> by_name;
    for (const Item& ri : *items) {
      const std::optional<Mapping> m =
          walker_.mapping(ri, &kRouteKeys, "a route mapping with match: and limits:");
      if (!m) continue;
      Route route;
      route.line = ri.line();
      bool ok = true;
      const Item* match = m->get("match");
      if (match == nullptr) {
        walker_.error(ri, "`match` is required, like match: GET /api/users/{id}");
        ok = false;
      } else if (auto rm =
                     walker_.parsed<RouteMatch>(*match, "\"METHOD /path\"", parse_route_match)) {
        route.method = rm->method;
        route.pattern = rm->pattern;
        route.name = rm->name;
        route.line = match->line();
        const std::string path_shape = pattern_shape(route.pattern, config_.case_insensitive_paths);
        const auto [it, inserted] =
            by_shape.emplace(route.method + " " + path_shape, Seen{ri.path, match->line()});
        if (!inserted) {
          walker_.error(*match, "duplicate route " + quoted(route.name) + ": " + it->second.path +
                                    " (line " + std::to_string(it->second.line) +
                                    ") already matches it");
        }
        // A GET route matches HEAD requests too (policy.h), first match wins.
        const auto get =
            route.method == "HEAD" ? by_shape.find("GET " + path_shape) : by_shape.end();
        if (get != by_shape.end()) {
          walker_.error(*match, "route " + quoted(route.name) +
                                    " is never matched: the GET route " + get->second.path +
                                    " (line " + std::to_string(get->second.line) +
                                    ") takes HEAD requests of its path; list this route before it");
        }
      } else {
        ok = false;
      }
      if (const Item* n = m->get("name")) {
        if (auto s = walker_.scalar(*n, "a string")) {
          if (s->empty()) {
            walker_.error(*n, "must not be empty");
          } else if (*s == "default") {
            walker_.error(*n, "the name `default` is reserved for the default route");
          } else {
            route.name = *s;
          }
        }
      }
      if (!route.name.empty()) {
        const Item& where = m->get("name") ? *m->get("name") : *match;
        const auto [it, inserted] = by_name.emplace(route.name, Seen{ri.path, where.line()});
        if (!inserted && m->get("name") != nullptr)
          walker_.error(where, "the route name " + quoted(route.name) + " is already used by " +
                                   it->second.path + " (line " + std::to_string(it->second.line) +
                                   ")");
      }
      key_spec(m->get("key"), &route.key);
      shadow(m->get("shadow"), &route.shadow);
      if (const Item* l = m->get("limits")) {
        route.limits =
            route_limits(*l, route.name.empty() ? ri.path : route.name, route.key, &route.plan_at);
      } else {
        walker_.error(ri, "`limits` is required");
      }
      route_delay(m->get("delay"), &route);
      if (const Item* u = m->get("upstream")) {
        if (auto name = walker_.scalar(*u, "the name of an upstream under `upstreams:`")) {
          if (find_upstream(walker_, *u, *name, config_.upstreams) != nullptr) {
            route.upstream = *name;
          } else {
            ok = false;
          }
        }
      }
      route_cost(m->get("cost"), &route);
      if (ok) config_.routes.push_back(std::move(route));
    }
  }

  // ---- plans and consumers ---------------------------------------------

  // plans: {free: [{capacity: 100, refill_rate: 10/s}], pro: [...]}
  void plans(const Item& item) {
    const std::optional<Mapping> m =
        walker_.mapping(item, nullptr, "a mapping of plan names to lists of limits");
    if (!m) return;
    if (m->entries.empty()) walker_.error(item, "must name at least one plan");
    if (m->entries.size() > UINT16_MAX) {
      walker_.error(item, "at most " + std::to_string(UINT16_MAX) + " plans");
      return;
    }
    for (const Mapping::Entry& entry : m->entries) {
      const std::string& name = entry.key;
      const Item& value = entry.value;
      plan_names_.push_back(name);
      if (!valid_policy_name(name)) {
        walker_.error(entry.key_mark, value.path,
                      "a plan name may hold only letters, digits, '_', '-', '.' and ':'");
        continue;
      }
      if (name == kRejectWord) {
        walker_.error(entry.key_mark, value.path,
                      "`reject` is what `consumers.unknown` says to refuse unknown consumers: "
                      "give the plan another name");
        continue;
      }
      if (!value.node.IsSequence()) {
        walker_.error(value,
                      "must be a list of limits like [{capacity: 100, refill_rate: 10/s}], "
                      "got " +
                          Walker::describe(value.node));
        continue;
      }
      const std::optional<std::vector<Item>> items = walker_.sequence(value, "a list of limits");
      if (!items) continue;
      if (items->empty()) walker_.error(value, "must list at least one limit");
      ConsumerPlan plan{name, {}, walker_.where(value)};
      std::map<std::string, Item> names;  // of its limits, for unique_limit_name
      for (size_t i = 0; i < items->size(); ++i) {
        const Item& li = (*items)[i];
        if (!li.node.IsMap()) {
          walker_.error(li, "must be a limit like {capacity: 100, refill_rate: 10/s}, got " +
                                Walker::describe(li.node));
          continue;
        }
        if (std::optional<ServerLimit> l = limit(li, /*nameable=*/true)) {
          if (l->limit.algorithm() == Algorithm::kConcurrency) {
            walker_.error(li,
                          "a plan cannot hold a concurrency limit: /v1/check applies plans too, "
                          "and gives back only a policy's slot; put it on the route");
            continue;
          }
          std::string limit_name = name + "#" + std::to_string(i);
          std::string counter;
          if (l->name) {
            counter = std::exchange(limit_name, l->name->node.Scalar());
            unique_limit_name(names, limit_name, *l->name);
          }
          plan.limits.push_back(RouteLimit{std::move(limit_name), false, l->limit,
                                           walker_.where(li), std::move(l->count_status),
                                           std::move(counter)});
        }
      }
      config_.plans.push_back(std::move(plan));
    }
  }

  // consumers: {key: header:x-api-key, file: consumers.yaml, unknown: free}
  void consumers(const Item& item) {
    const std::optional<Mapping> m =
        walker_.mapping(item, &kConsumersKeys, "a mapping with key:, file: and unknown:");
    if (!m) return;
    ConsumersConfig consumers;
    for (const std::string_view required : kConsumersKeys) {
      if (m->get(required) == nullptr) {
        walker_.error(item, "`" + std::string(required) + "` is required");
      }
    }
    if (const Item* k = m->get("key")) {
      KeySpec spec;
      const size_t errors_before = walker_.error_count();
      key_spec(k, &spec);
      const bool one_value = spec.parts.size() == 1 && spec.parts[0].kind != KeyPart::Kind::kIp &&
                             spec.parts[0].kind != KeyPart::Kind::kGlobal;
      if (!one_value && walker_.error_count() == errors_before) {
        walker_.error(*k,
                      "must be one header:NAME, cookie:NAME, query:NAME or jwt:CLAIM: where "
                      "the consumer id is read, got " +
                          quoted(spec.text));
      }
      consumers.key = std::move(spec);
    }
    if (const Item* u = m->get("unknown")) {
      if (const std::optional<std::string> text = walker_.scalar(*u, "a plan name or reject")) {
        const auto plan = std::find(plan_names_.begin(), plan_names_.end(), *text);
        if (*text == kRejectWord) {
          consumers.unknown_plan = std::nullopt;
        } else if (plan != plan_names_.end()) {
          consumers.unknown_plan = static_cast<size_t>(plan - plan_names_.begin());
        } else {
          Keys choices(plan_names_.begin(), plan_names_.end());
          choices.push_back(kRejectWord);
          const std::string guess = closest_match(*text, choices);
          walker_.error(*u, "must be a plan name or reject, got " + quoted(*text) +
                                (guess.empty() ? " (plans: " + join(choices) + ")"
                                               : "; did you mean `" + guess + "`?"));
        }
      }
    }
    if (const Item* f = m->get("file")) {
      if (std::optional<std::string> path = walker_.path(*f)) {
        ConsumersFile loaded = read_consumers_file(*path, plan_names_);
        if (loaded.table) {
          consumers.table = std::make_shared<const ConsumerTable>(std::move(*loaded.table));
        } else if (loaded.errors.size() == 1 && loaded.errors[0].line == 0) {
          walker_.error(*f, loaded.errors[0].message);  // the file could not be read
        } else {
          consumers_file_errors_ = std::move(loaded.errors);
        }
        consumers.file = std::move(*path);
      }
    }
    config_.consumers = std::move(consumers);
  }

  // Plans and consumers go together, and `plan` in a limits list needs both.
  void plans_need_consumers(const Mapping& top) {
    const Item* plans = top.get("plans");
    const Item* consumers = top.get("consumers");
    if (plans != nullptr && consumers == nullptr) {
      walker_.error(*plans,
                    "plans need `consumers:` (where the consumer id is read and the file "
                    "that puts each consumer on a plan)");
    }
    if (consumers != nullptr && plans == nullptr) {
      walker_.error(*consumers, "needs `plans:`, the plans its consumers are on");
    }
    if (plans != nullptr && consumers != nullptr) return;
    for (const Item& p : plan_items_) {
      walker_.error(p, "`plan` (the consumer's plan) needs `plans:` and `consumers:`");
    }
  }

  void server(const Item& item) {
    const std::optional<Mapping> m = walker_.mapping(item, &kServerKeys, "a mapping");
    if (!m) return;
    ServerLimits& s = config_.server;
    auto size = [&](const char* key, uint64_t min, size_t* out) {
      if (const Item* i = m->get(key)) {
        if (auto v = walker_.parsed<uint64_t>(*i, "a size in bytes like 16KiB", parse_size)) {
          if (*v < min) {
            walker_.error(*i, "must be at least " + std::to_string(min) + " bytes, got " +
                                  quoted(i->node.Scalar()));
          } else {
            *out = *v;
          }
        }
      }
    };
    if (const Item* c = m->get("max_connections")) {
      if (auto v = walker_.integer(*c, 1, 10'000'000, "a whole number from 1 to 10000000"))
        s.max_connections = *v;
    }
    if (const Item* h = m->get("max_held")) {
      if (auto v = walker_.integer(*h, 1, 10'000'000, "a whole number from 1 to 10000000"))
        s.max_held = *v;
    }
    if (const Item* t = m->get("max_tls_handshakes")) {
      if (auto v = walker_.integer(*t, 1, 1'000'000, "a whole number from 1 to 1000000"))
        s.max_tls_handshakes = *v;
    }
    size("max_header_bytes", 1024, &s.max_header_bytes);
    size("max_body_bytes", 1, &s.max_body_bytes);
    millis(m->get("header_timeout"), false, &s.header_timeout);
    millis(m->get("idle_timeout"), false, &s.idle_timeout);
    if (const Item* t = m->get("threads")) {
      if (auto v = walker_.integer(*t, 0, 1024, "a whole number from 0 (one per core) to 1024"))
        s.threads = *v;
    }
    millis(m->get("shutdown_grace"), true, &s.shutdown_grace);
  }

  void deny(const Item& item) {
    const std::optional<Mapping> m = walker_.mapping(item, &kDenyKeys, "a mapping");
    if (!m) return;
    DenyResponse& deny = config_.deny;
    if (const Item* s = m->get("status")) {
      if (auto v = walker_.integer(*s, 400, 599, "an HTTP status from 400 to 599"))
        deny.status = static_cast<int>(*v);
    }
    if (const Item* f = m->get("body_file")) {
      if (std::optional<std::string> path = walker_.path(*f)) {
        std::string reason;
        std::optional<std::string> body = config::read_small_file(
            *path, "the deny body file " + *path, kMaxDenyBodyBytes, &reason);
        if (body) {
          deny.body_file = std::move(*path);
          deny.body = std::move(*body);
        } else {
          walker_.error(*f, reason);
        }
      }
    }
    if (const Item* c = m->get("content_type")) {
      const std::optional<std::string> text = walker_.scalar(*c, "a media type");
      // It is written into the response head as it is.
      const bool printable = text && std::all_of(text->begin(), text->end(),
                                                 [](char ch) { return ch >= 0x20 && ch <= 0x7e; });
      if (text && (!printable || text->find('/') == std::string::npos)) {
        walker_.error(*c,
                      "must be a media type like application/json or text/html; "
                      "charset=utf-8, got " +
                          quoted(*text));
      } else if (text) {
        deny.content_type = *text;
      }
      if (m->get("body_file") == nullptr)
        walker_.error(*c, "is the type of the body in body_file: set body_file too");
    }
  }

  void logging(const Item& item) {
    const std::optional<Mapping> m = walker_.mapping(item, &kLoggingKeys, "a mapping");
    if (!m) return;
    if (const Item* l = m->get("level")) {
      const Keys levels = {"trace", "debug", "info", "warn", "error"};
      if (auto c = walker_.choice(*l, levels)) config_.logging.level = std::string(levels[*c]);
    }
    if (const Item* f = m->get("format")) {
      const Keys formats = {"text", "json"};
      if (auto c = walker_.choice(*f, formats)) config_.logging.format = std::string(formats[*c]);
    }
    if (const Item* a = m->get("access_log")) {
      if (auto b = walker_.boolean(*a)) config_.logging.access_log = *b;
    }
    if (const Item* r = m->get("redact_keys")) {
      if (auto b = walker_.boolean(*r)) config_.logging.redact_keys = *b;
    }
    if (const Item* d = m->get("denial_log_per_second")) {
      const std::optional<std::string> text =
          walker_.scalar(*d, "a number of log lines per second");
      if (!text) return;
      double v = -1;
      const char* end = text->data() + text->size();
      const auto [ptr, ec] = std::from_chars(text->data(), end, v);
      if (ec != std::errc() || ptr != end || !std::isfinite(v) || v < 0 || v > 1e6) {
        walker_.error(
            *d, "must be a number of log lines per second (0 to 1000000), got " + quoted(*text));
      } else {
        config_.logging.denial_log_per_second = v;
      }
    }
  }

  config::Diagnostics diagnostics_;
  Walker walker_;
  const ConfigOverrides& overrides_;
  Config config_;
  std::vector<Item> jwt_keys_;             // key: items with a jwt: part
  std::vector<Item> count_status_items_;   // every count_status written
  std::vector<Item> concurrency_items_;    // every concurrency limit a route lists
  std::vector<std::string> policy_names_;  // every name under policies:, valid or not
  std::vector<std::string> plan_names_;    // every name under plans:, valid or not
  std::vector<Item> plan_items_;           // every `plan` in a limits list
  std::vector<ConfigError> consumers_file_errors_;
  std::set<std::string, std::less<>> broken_policies_;
};

}  // namespace

LoadResult load_config_string(std::string_view yaml, const std::string& name,
                              const ConfigOverrides& overrides) {
  return Loader(name, overrides).load(yaml);
}

LoadResult load_config_file(const std::string& path, const ConfigOverrides& overrides) {
  std::string error;
  std::optional<std::string> text =
      config::read_small_file(path, "the config file", kMaxConfigBytes, &error);
  if (!text) {
    LoadResult result;
    result.errors.push_back(ConfigError{path, 0, 0, error});
    result.files.push_back(path);
    return result;
  }
  return load_config_string(*text, path, overrides);
}

}  // namespace sluice::policy
