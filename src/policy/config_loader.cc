#include "policy/config_loader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "policy/config_values.h"
#include "policy/ip.h"
#include "sluice/redis_store.h"

namespace sluice::policy {

std::string ConfigError::text() const {
  if (line <= 0) return file + ": " + message;
  return file + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " + message;
}

namespace {

using Keys = std::vector<std::string_view>;

const Keys kTopKeys = {"listen",
                       "admin",
                       "admin_token_file",
                       "admin_token_all",
                       "admin_hosts",
                       "decision_api",
                       "grpc",
                       "rls",
                       "upstream",
                       "store",
                       "client_ip",
                       "headers",
                       "case_insensitive_paths",
                       "auth_deny_status",
                       "policies",
                       "default",
                       "routes",
                       "server",
                       "logging"};
const Keys kDecisionApiKeys = {"listen", "token_file"};
const Keys kRlsKeys = {"config_dir", "response_headers", "dynamic_metadata", "shadow_mode",
                       "merge_domains"};
const Keys kUpstreamKeys = {"url", "connect_timeout", "timeout", "max_idle_connections"};
const Keys kStoreKeys = {"backend", "max_keys", "redis"};
const Keys kRedisKeys = {"addresses",  "url",      "cluster",  "timeout",
                         "on_failure", "password", "database", "time_source"};
const Keys kClientIpKeys = {"trusted_proxies", "ipv6_prefix"};
const Keys kLimitKeys = {"algorithm", "capacity", "refill_rate", "limit", "window"};
const Keys kDefaultKeys = {"key", "limits"};
const Keys kRouteKeys = {"match", "name", "key", "limits"};
const Keys kServerKeys = {"max_connections", "max_header_bytes", "max_body_bytes", "header_timeout",
                          "idle_timeout",    "threads",          "shutdown_grace"};
const Keys kLoggingKeys = {"level", "access_log", "denial_log_per_second"};
const Keys kAlgorithms = {"token_bucket", "gcra", "fixed_window", "sliding_log", "sliding_window"};

std::string join(const Keys& keys) {
  std::string out;
  for (std::string_view k : keys) {
    if (!out.empty()) out += ", ";
    out += k;
  }
  return out;
}

std::string child(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}

std::string index(const std::string& path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

constexpr size_t kMaxConfigBytes = 16 * 1024 * 1024;
constexpr size_t kMaxTokenBytes = 4096;

std::string cat_text(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (std::string_view p : parts) out.append(p);
  return out;
}

// Reads a whole regular file of at most `max_bytes`. On failure, `error`
// says why, naming the file as `what` ("the config file").
std::optional<std::string> read_small_file(const std::string& path, std::string_view what,
                                           size_t max_bytes, std::string* error) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *error = cat_text({"cannot open ", what, ": ", std::strerror(errno)});
    return std::nullopt;
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    *error = cat_text({"cannot read ", what, ": not a regular file"});
    return std::nullopt;
  }
  std::string text;
  char buf[8192];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int saved = errno;
      ::close(fd);
      *error = cat_text({"cannot read ", what, ": ", std::strerror(saved)});
      return std::nullopt;
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > max_bytes) {
      ::close(fd);
      *error = cat_text({what, " is larger than ", std::to_string(max_bytes), " bytes"});
      return std::nullopt;
    }
  }
  ::close(fd);
  return text;
}

// How a node appears in "got ..." messages.
std::string describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar:
      return quoted(node.Scalar());
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    default:
      return "nothing";
  }
}

// A value in the document, where to point at it, and its YAML path.
struct Item {
  YAML::Node node;
  YAML::Mark mark;   // the value's position, or its key's when the value is empty
  std::string path;  // "routes[1].limits[0].capacity"
  int line() const { return mark.is_null() ? 0 : mark.line + 1; }
};

// The entries of a mapping whose keys were checked (known, unique, scalar).
struct Mapping {
  Item self;
  struct Entry {
    std::string key;
    YAML::Mark key_mark;
    Item value;
  };
  std::vector<Entry> entries;  // file order
  const Item* get(std::string_view key) const {
    for (const Entry& e : entries)
      if (e.key == key) return &e.value;
    return nullptr;
  }
};

// Walks the document, filling a Config and collecting every error. Each
// check reports and carries on, so one run shows every problem in the file.
class Loader {
 public:
  explicit Loader(std::string file) : file_(std::move(file)) { config_.source = file_; }

  LoadResult load(std::string_view text) {
    std::vector<YAML::Node> docs;
    try {
      docs = YAML::LoadAll(std::string(text));
    } catch (const YAML::Exception& e) {
      error(e.mark, "", "YAML syntax error: " + e.msg);
      return finish();
    }
    if (docs.empty() || (docs.size() == 1 && docs[0].IsNull())) {
      error(YAML::Mark::null_mark(), "",
            "the file is empty; expected a mapping of settings such as listen:, policies: and "
            "routes: (see docs/CONFIG.md)");
      return finish();
    }
    if (docs.size() > 1)
      error(docs[1].Mark(), "",
            "a second YAML document starts here; a config file holds one (check the "
            "indentation and any '---')");
    root(Item{docs[0], docs[0].Mark(), ""});
    return finish();
  }

  void error(const YAML::Mark& mark, const std::string& path, const std::string& message) {
    ConfigError e;
    e.file = file_;
    if (!mark.is_null() && mark.line >= 0) {
      e.line = mark.line + 1;
      e.column = mark.column + 1;
    }
    e.message = path.empty() ? message : path + ": " + message;
    errors_.push_back(std::move(e));
  }

  LoadResult finish() {
    LoadResult result;
    std::stable_sort(errors_.begin(), errors_.end(),
                     [](const ConfigError& a, const ConfigError& b) {
                       return std::tie(a.line, a.column) < std::tie(b.line, b.column);
                     });
    result.errors = std::move(errors_);
    if (result.errors.empty()) result.config = std::move(config_);
    return result;
  }

 private:
  void error(const Item& item, const std::string& message) { error(item.mark, item.path, message); }

  // ---- structure -------------------------------------------------------

  // Checks that `item` is a mapping with scalar, unique, known keys (any key
  // when `known` is null); unknown keys are reported with the closest known one.
  std::optional<Mapping> mapping(const Item& item, const Keys* known, std::string_view what) {
    if (!item.node.IsMap()) {
      error(item, "must be " + std::string(what) + ", got " + describe(item.node));
      return std::nullopt;
    }
    Mapping m{item, {}};
    std::map<std::string, int> first_line;
    for (auto it = item.node.begin(); it != item.node.end(); ++it) {
      const YAML::Node key = it->first;
      const YAML::Node value = it->second;
      if (!key.IsScalar()) {
        error(key.Mark(), item.path, "keys must be plain names, got " + describe(key));
        continue;
      }
      const std::string name = key.Scalar();
      const std::string path = child(item.path, name);
      const auto [pos, inserted] = first_line.emplace(name, key.Mark().line + 1);
      if (!inserted) {
        error(key.Mark(), path,
              "duplicate key (first set on line " + std::to_string(pos->second) + ")");
        continue;
      }
      if (known != nullptr && std::find(known->begin(), known->end(), name) == known->end()) {
        const std::string guess = closest_match(name, *known);
        error(key.Mark(), path,
              guess.empty() ? "unknown key (known keys: " + join(*known) + ")"
                            : "unknown key; did you mean `" + guess + "`?");
        continue;
      }
      const YAML::Mark mark =
          (value.IsNull() || value.Mark().is_null()) ? key.Mark() : value.Mark();
      m.entries.push_back(Mapping::Entry{name, key.Mark(), Item{value, mark, path}});
    }
    return m;
  }

  std::optional<std::vector<Item>> sequence(const Item& item, std::string_view what) {
    if (!item.node.IsSequence()) {
      error(item, "must be " + std::string(what) + ", got " + describe(item.node));
      return std::nullopt;
    }
    std::vector<Item> items;
    size_t i = 0;
    for (auto it = item.node.begin(); it != item.node.end(); ++it, ++i) {
      const YAML::Node node = *it;
      const YAML::Mark mark = node.Mark().is_null() ? item.mark : node.Mark();
      items.push_back(Item{node, mark, index(item.path, i)});
    }
    return items;
  }

  std::optional<std::string> scalar(const Item& item, std::string_view what) {
    if (!item.node.IsScalar()) {
      error(item, "must be " + std::string(what) + ", got " + describe(item.node));
      return std::nullopt;
    }
    return item.node.Scalar();
  }

  // A scalar parsed by one of config_values.h's functions.
  template <class T, class Parse>
  std::optional<T> parsed(const Item& item, std::string_view what, Parse parse) {
    const std::optional<std::string> text = scalar(item, what);
    if (!text) return std::nullopt;
    Result<T> r = parse(*text);
    if (!r.ok()) {
      error(item, r.error().message);
      return std::nullopt;
    }
    return std::move(r).value();
  }

  std::optional<bool> boolean(const Item& item) {
    const std::optional<std::string> text = scalar(item, "true or false");
    if (!text) return std::nullopt;
    if (*text == "true" || *text == "True" || *text == "TRUE") return true;
    if (*text == "false" || *text == "False" || *text == "FALSE") return false;
    error(item, "must be true or false, got " + quoted(*text));
    return std::nullopt;
  }

  std::optional<uint64_t> integer(const Item& item, uint64_t min, uint64_t max,
                                  std::string_view what) {
    const std::optional<std::string> text = scalar(item, what);
    if (!text) return std::nullopt;
    Result<uint64_t> r = parse_uint(*text);
    if (!r.ok() || *r < min || *r > max) {
      error(item, "must be " + std::string(what) + ", got " + quoted(*text));
      return std::nullopt;
    }
    return *r;
  }

  std::optional<Nanos> duration(const Item& item, bool allow_zero) {
    return parsed<Nanos>(item, "a duration like 500ms, 1s, 1m, 1h or 1d",
                         [&](std::string_view t) { return parse_duration(t, allow_zero); });
  }

  void millis(const Item* item, bool allow_zero, Millis* out) {
    if (item == nullptr) return;
    if (auto d = duration(*item, allow_zero)) *out = std::chrono::duration_cast<Millis>(*d);
  }

  // One of `choices`; the index of the one chosen.
  std::optional<size_t> choice(const Item& item, const Keys& choices) {
    const std::string what = "one of " + join(choices);
    const std::optional<std::string> text = scalar(item, what);
    if (!text) return std::nullopt;
    for (size_t i = 0; i < choices.size(); ++i)
      if (choices[i] == *text) return i;
    const std::string guess = closest_match(*text, choices);
    error(item, "must be " + what + ", got " + quoted(*text) +
                    (guess.empty() ? "" : "; did you mean `" + guess + "`?"));
    return std::nullopt;
  }

  void host_port(const Item* item, HostPort* out) {
    if (item == nullptr) return;
    if (auto hp = parsed<HostPort>(*item, "host:port like 127.0.0.1:8080",
                                   [](std::string_view t) { return parse_host_port(t, true); }))
      *out = *hp;
  }

  // ---- sections --------------------------------------------------------

  void root(const Item& item) {
    if (!item.node.IsMap()) {
      error(item, "the top level must be a mapping of settings (listen:, routes:, ...), got " +
                      describe(item.node));
      return;
    }
    const std::optional<Mapping> m = mapping(item, &kTopKeys, "a mapping");
    if (!m) return;
    host_port(m->get("listen"), &config_.listen);
    host_port(m->get("admin"), &config_.admin);
    admin_access(*m);
    if (const Item* d = m->get("decision_api")) decision_api(*d);
    const Item* grpc_item = m->get("grpc");
    if (grpc_item != nullptr) {
      HostPort hp;
      const size_t errors_before = errors_.size();
      host_port(grpc_item, &hp);
      if (errors_.size() == errors_before) config_.grpc = hp;
    }
    const Item* rls_item = m->get("rls");
    if (rls_item != nullptr) rls(*rls_item);
    // The gRPC port serves the RLS API only: one without the other is a mistake.
    if (config_.grpc && rls_item == nullptr) {
      error(*grpc_item,
            "the Envoy RLS API on this address needs `rls:` with `config_dir:`, the folder of "
            "its envoyproxy/ratelimit descriptor files");
    }
    if (rls_item != nullptr && grpc_item == nullptr) {
      error(*rls_item, "needs `grpc:`, the address the Envoy RLS API listens on");
    }
    if (const Item* u = m->get("upstream")) upstream(*u);
    if (const Item* s = m->get("store")) store(*s);
    if (const Item* c = m->get("client_ip")) client_ip(*c);
    if (const Item* h = m->get("headers")) headers(*h);
    if (const Item* c = m->get("case_insensitive_paths")) {
      if (auto b = boolean(*c)) config_.case_insensitive_paths = *b;
    }
    if (const Item* a = m->get("auth_deny_status")) {
      if (auto s = integer(*a, 400, 599, "an HTTP status from 400 to 599"))
        config_.auth_deny_status = static_cast<int>(*s);
    }
    // Policies first: routes refer to them wherever they are in the file.
    if (const Item* p = m->get("policies")) policies(*p);
    if (const Item* d = m->get("default")) default_route(*d);
    if (const Item* r = m->get("routes")) routes(*r);
    if (const Item* s = m->get("server")) server(*s);
    if (const Item* l = m->get("logging")) logging(*l);
  }

  // admin_token_file, admin_token_all, admin_hosts; and the rule that an admin
  // port reachable from other hosts must have a token.
  void admin_access(const Mapping& top) {
    AdminAccess& access = config_.admin_access;
    const Item* token_file = top.get("admin_token_file");
    if (token_file != nullptr) {
      if (auto secret = secret_file(*token_file)) {
        access.token_file = secret->first;
        access.token = secret->second;
      }
    }
    if (const Item* all = top.get("admin_token_all")) {
      if (auto b = boolean(*all)) access.token_all = *b;
      if (access.token_all && token_file == nullptr) {
        error(*all, "needs `admin_token_file`: the token that guards every admin endpoint");
      }
    }
    if (const Item* hosts = top.get("admin_hosts")) {
      if (auto items = sequence(*hosts, "a list of host names like [sluice-admin.internal]")) {
        for (const Item& i : *items) {
          const std::optional<std::string> name = scalar(i, "a host name");
          if (!name) continue;
          if (!host_problem(*name, false).empty()) {
            error(i, "must be a host name like sluice-admin.internal (no port, no scheme), got " +
                         quoted(*name));
            continue;
          }
          access.hosts.push_back(to_lower(*name));
        }
      }
    }
    // Reachable from other hosts, the admin port can reload and reset limits:
    // never without a token.
    if (token_file == nullptr && !is_loopback_host(config_.admin.host)) {
      const Item* admin = top.get("admin");
      error(admin != nullptr ? *admin : top.self,
            "an admin port on " + quoted(config_.admin.host) +
                " is reachable from other hosts and can reload the config and reset limits: set "
                "`admin_token_file` (a bearer token for it), or bind it to 127.0.0.1");
    }
  }

  void decision_api(const Item& item) {
    const std::optional<Mapping> m =
        mapping(item, &kDecisionApiKeys, "a mapping with listen: and token_file:");
    if (!m) return;
    DecisionApi& api = config_.decision_api;
    if (const Item* l = m->get("listen")) {
      HostPort hp;
      const size_t errors_before = errors_.size();
      host_port(l, &hp);
      if (errors_.size() == errors_before) api.listen = hp;
    }
    if (const Item* t = m->get("token_file")) {
      if (auto secret = secret_file(*t)) {
        api.token_file = secret->first;
        api.token = secret->second;
      }
    }
  }

  // A bearer token kept in a file (named by `item`, relative to the config
  // file's folder): (resolved path, token). The file's trailing newline is
  // not part of the token; anything else that is not a visible ASCII
  // character is refused, so that what a client can send in a header is
  // exactly what the file holds.
  std::optional<std::pair<std::string, std::string>> secret_file(const Item& item) {
    const std::optional<std::string> text = scalar(item, "a file path");
    if (!text) return std::nullopt;
    if (text->empty()) {
      error(item, "must not be empty");
      return std::nullopt;
    }
    const std::string path = relative_to_config(*text);
    std::string reason;
    std::optional<std::string> content =
        read_small_file(path, "the token file " + path, kMaxTokenBytes, &reason);
    if (!content) {
      error(item, reason);
      return std::nullopt;
    }
    std::string token = std::move(*content);
    if (token.ends_with('\n')) token.pop_back();
    if (token.ends_with('\r')) token.pop_back();
    if (token.empty()) {
      error(item, "the token file " + path + " is empty");
      return std::nullopt;
    }
    for (const char c : token) {
      if (c < 0x21 || c > 0x7e) {
        error(item, "the token file " + path +
                        " must hold one token of visible ASCII characters (no spaces, no lines "
                        "after it)");
        return std::nullopt;
      }
    }
    return std::make_pair(path, std::move(token));
  }

  void rls(const Item& item) {
    const std::optional<Mapping> m = mapping(item, &kRlsKeys, "a mapping with config_dir:");
    if (!m) return;
    RlsSettings settings;
    bool ok = true;
    if (const Item* d = m->get("config_dir")) {
      if (auto text = scalar(*d, "a folder path")) {
        if (text->empty()) {
          error(*d, "must not be empty");
          ok = false;
        } else {
          settings.config_dir = relative_to_config(*text);
        }
      } else {
        ok = false;
      }
    } else {
      error(item, "`config_dir` is required: the folder of envoyproxy/ratelimit descriptor files");
      ok = false;
    }
    if (const Item* h = m->get("response_headers")) {
      if (auto c = choice(*h, {"off", "ratelimit", "draft"})) {
        settings.response_headers = *c == 0   ? RlsSettings::ResponseHeaders::kOff
                                    : *c == 1 ? RlsSettings::ResponseHeaders::kRateLimit
                                              : RlsSettings::ResponseHeaders::kDraft;
      }
    }
    auto flag = [&](const char* key, bool* out) {
      if (const Item* i = m->get(key)) {
        if (auto b = boolean(*i)) *out = *b;
      }
    };
    flag("dynamic_metadata", &settings.dynamic_metadata);
    flag("shadow_mode", &settings.shadow_mode);
    flag("merge_domains", &settings.merge_domains);
    if (ok) config_.rls = settings;
  }

  // A relative path in the config is relative to the config file's folder.
  // "." and ".." segments are resolved, a trailing slash dropped.
  // (<filesystem> is not used here: its std::quoted would clash with ours.)
  std::string relative_to_config(const std::string& path) const {
    std::string full = path;
    if (path.front() != '/') {
      const size_t slash = file_.rfind('/');
      if (slash != std::string::npos) full = file_.substr(0, slash + 1) + path;
    }
    const bool absolute = full.front() == '/';
    std::vector<std::string> parts;
    size_t at = 0;
    while (at <= full.size()) {
      size_t end = full.find('/', at);
      if (end == std::string::npos) end = full.size();
      const std::string part = full.substr(at, end - at);
      at = end + 1;
      if (part.empty() || part == ".") continue;
      if (part == ".." && !parts.empty() && parts.back() != "..") {
        parts.pop_back();
      } else if (!(part == ".." && absolute)) {  // "/.." is "/"
        parts.push_back(part);
      }
    }
    std::string out = absolute ? "/" : "";
    for (size_t i = 0; i < parts.size(); ++i) {
      if (i > 0) out += '/';
      out += parts[i];
    }
    return out.empty() ? std::string(".") : out;
  }

  void upstream(const Item& item) {
    const std::string_view what = "an http:// URL like http://127.0.0.1:3000";
    if (item.node.IsScalar()) {
      if (auto u = parsed<Upstream>(item, what, parse_upstream_url)) config_.upstream = *u;
      return;
    }
    if (!item.node.IsMap()) {
      error(item,
            "must be " + std::string(what) + " or a mapping with url:, got " + describe(item.node));
      return;
    }
    const std::optional<Mapping> m = mapping(item, &kUpstreamKeys, "a mapping");
    if (!m) return;
    Upstream upstream;
    bool ok = false;
    if (const Item* url = m->get("url")) {
      if (auto u = parsed<Upstream>(*url, what, parse_upstream_url)) {
        upstream = *u;
        ok = true;
      }
    } else {
      error(item, "`url` is required");
    }
    millis(m->get("connect_timeout"), false, &upstream.connect_timeout);
    millis(m->get("timeout"), false, &upstream.timeout);
    if (const Item* n = m->get("max_idle_connections")) {
      if (auto v = integer(*n, 0, 100'000, "a whole number from 0 to 100000"))
        upstream.max_idle_connections = *v;
    }
    if (ok) config_.upstream = upstream;
  }

  void store(const Item& item) {
    const std::optional<Mapping> m = mapping(item, &kStoreKeys, "a mapping");
    if (!m) return;
    if (const Item* b = m->get("backend")) {
      if (auto c = choice(*b, {"memory", "redis"}))
        config_.store.backend =
            *c == 0 ? StoreConfig::Backend::kMemory : StoreConfig::Backend::kRedis;
    }
    if (const Item* k = m->get("max_keys")) {
      if (auto v = integer(*k, 1, uint64_t{1} << 40, "a positive whole number"))
        config_.store.max_keys = *v;
    }
    if (const Item* r = m->get("redis")) redis(*r);
  }

  void redis(const Item& item) {
    const std::optional<Mapping> m = mapping(item, &kRedisKeys, "a mapping");
    if (!m) return;
    RedisConfig& redis = config_.store.redis;
    const Item* url = m->get("url");
    if (url != nullptr) {
      for (std::string_view other : {"addresses", "password", "database"}) {
        if (const Item* o = m->get(other))
          error(*o, "set either `url` or `" + std::string(other) + "`, not both");
      }
      if (auto u = parsed<RedisUrl>(*url, "a redis:// URL", parse_redis_url)) {
        redis.addresses = {u->address};
        redis.password = u->password;
        redis.database = u->database;
      }
    }
    if (const Item* a = m->get("addresses"); a != nullptr && url == nullptr) {
      if (auto items = sequence(*a, "a list of host:port addresses")) {
        if (items->empty()) error(*a, "must list at least one address");
        std::vector<HostPort> addresses;
        for (const Item& i : *items) {
          if (auto hp =
                  parsed<HostPort>(i, "host:port like 127.0.0.1:6379",
                                   [](std::string_view t) { return parse_host_port(t, false); }))
            addresses.push_back(*hp);
        }
        if (!addresses.empty()) redis.addresses = addresses;
      }
    }
    if (const Item* c = m->get("cluster")) {
      if (auto b = boolean(*c)) redis.cluster = *b;
    }
    millis(m->get("timeout"), false, &redis.timeout);
    if (const Item* f = m->get("on_failure")) {
      if (auto c = choice(*f, {"allow", "deny"})) redis.on_failure_allow = *c == 0;
    }
    if (const Item* p = m->get("password"); p != nullptr && url == nullptr) {
      if (auto s = scalar(*p, "a string")) redis.password = *s;
    }
    if (const Item* d = m->get("database"); d != nullptr && url == nullptr) {
      if (auto v = integer(*d, 0, 1'000'000, "a database number (0, 1, ...)"))
        redis.database = static_cast<int>(*v);
    }
    if (const Item* t = m->get("time_source")) {
      if (auto c = choice(*t, {"redis", "local"})) redis.time_source_redis = *c == 0;
    }
    if (redis.cluster && redis.database != 0) {
      const Item* where = m->get("database") ? m->get("database") : url;
      error(where ? *where : item, "Redis Cluster has only database 0");
    }
  }

  void client_ip(const Item& item) {
    const std::optional<Mapping> m = mapping(item, &kClientIpKeys, "a mapping");
    if (!m) return;
    if (const Item* t = m->get("trusted_proxies")) {
      if (auto items = sequence(*t, "a list of CIDR blocks like [10.0.0.0/8]")) {
        for (const Item& i : *items) {
          const std::optional<std::string> text =
              scalar(i, "a CIDR block like 10.0.0.0/8 or 2001:db8::/32");
          if (!text) continue;
          if (std::optional<Cidr> cidr = parse_cidr(*text)) {
            config_.client_ip.trusted_proxies.push_back(*cidr);
          } else {
            error(i, "must be a CIDR block like 10.0.0.0/8 or 2001:db8::/32, got " + quoted(*text));
          }
        }
      }
    }
    if (const Item* p = m->get("ipv6_prefix")) {
      if (auto v = integer(*p, 1, 128, "a prefix length from 1 to 128"))
        config_.client_ip.ipv6_prefix = static_cast<int>(*v);
    }
  }

  void headers(const Item& item) {
    const Keys names = {"legacy", "draft"};
    HeaderModes modes{false, false};
    auto enable = [&](const Item& i, size_t which) {
      bool& flag = which == 0 ? modes.legacy : modes.draft;
      if (flag) error(i, std::string(names[which]) + " is listed twice");
      flag = true;
    };
    if (item.node.IsScalar()) {  // one mode, or none
      if (auto c = choice(item, {"legacy", "draft", "none"})) {
        if (*c < 2) enable(item, *c);
      }
    } else if (auto items = sequence(item,
                                     "a list of header styles: [legacy], [draft] or "
                                     "[legacy, draft]")) {
      for (const Item& i : *items) {
        if (auto c = choice(i, names)) enable(i, *c);
      }
    }
    config_.headers = modes;
  }

  // ---- limits ----------------------------------------------------------

  std::optional<uint64_t> limit_count(const Item& item) {
    const std::optional<std::string> text = scalar(item, "a positive integer");
    if (!text) return std::nullopt;
    Result<uint64_t> r = parse_uint(*text);
    if (!r.ok() || *r == 0) {
      error(item, "must be a positive integer, got " + quoted(*text));
      return std::nullopt;
    }
    if (*r > Limit::kMaxLimit) {
      error(item, "must be at most " + std::to_string(Limit::kMaxLimit) + ", got " + quoted(*text));
      return std::nullopt;
    }
    return *r;
  }

  // An inline limit mapping, validated by Limit::create.
  std::optional<Limit> limit(const Item& item) {
    const std::optional<Mapping> m =
        mapping(item, &kLimitKeys, "a limit like {capacity: 10, refill_rate: 2/s}");
    if (!m) return std::nullopt;
    bool ok = true;
    LimitSpec spec;
    if (const Item* a = m->get("algorithm")) {
      if (auto c = choice(*a, kAlgorithms)) {
        ok = parse_algorithm(kAlgorithms[*c], &spec.algorithm) && ok;
      } else {
        ok = false;
      }
    }
    const bool bucket =
        spec.algorithm == Algorithm::kTokenBucket || spec.algorithm == Algorithm::kGcra;
    const std::string algorithm(algorithm_name(spec.algorithm));
    const Keys wanted = bucket ? Keys{"capacity", "refill_rate"} : Keys{"limit", "window"};
    const Keys foreign = bucket ? Keys{"limit", "window"} : Keys{"capacity", "refill_rate"};
    for (std::string_view key : foreign) {
      if (const Item* f = m->get(key); f != nullptr && ok) {
        error(*f, algorithm + " takes " + std::string(wanted[0]) + " and " +
                      std::string(wanted[1]) + ", not " + std::string(key) +
                      (bucket ? " (limit and window are for fixed_window, sliding_log and "
                                "sliding_window)"
                              : " (capacity and refill_rate are for token_bucket and gcra)"));
        ok = false;
      }
    }
    for (std::string_view key : wanted) {
      if (m->get(key) == nullptr && ok) {
        error(item, algorithm + " needs `" + std::string(key) + "`");
        ok = false;
      }
    }
    if (const Item* c = m->get("capacity")) {
      auto v = limit_count(*c);
      ok = v.has_value() && ok;
      if (v && bucket) spec.capacity = *v;
    }
    if (const Item* r = m->get("refill_rate")) {
      auto rate = parsed<Rate>(*r, "a rate like 10/s", parse_rate);
      ok = rate.has_value() && ok;
      if (rate && bucket) {
        spec.refill_tokens = rate->tokens;
        spec.refill_period = rate->period;
      }
    }
    if (const Item* l = m->get("limit")) {
      auto v = limit_count(*l);
      ok = v.has_value() && ok;
      if (v && !bucket) spec.limit = *v;
    }
    if (const Item* w = m->get("window")) {
      auto d = duration(*w, false);
      ok = d.has_value() && ok;
      if (d && !bucket) spec.window = *d;
    }
    if (!ok) return std::nullopt;
    Result<Limit> created = Limit::create(spec);
    if (!created.ok()) {
      error(item, created.error().message);
      return std::nullopt;
    }
    // `store:` is read before any limit (root()), so the backend is known here.
    if (config_.store.backend == StoreConfig::Backend::kRedis) {
      if (Status fits = RedisStore::check_limit(*created); !fits.ok()) {
        error(item, "with store.backend redis: " + fits.error().message);
        return std::nullopt;
      }
    }
    return *created;
  }

  static bool valid_policy_name(std::string_view name) {
    return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             c == '_' || c == '-' || c == '.' || c == ':';
    });
  }

  void policies(const Item& item) {
    const std::optional<Mapping> m = mapping(item, nullptr, "a mapping of policy names to limits");
    if (!m) return;
    for (const Mapping::Entry& entry : m->entries) {
      const std::string& name = entry.key;
      const Item& value = entry.value;
      policy_names_.push_back(name);
      if (!valid_policy_name(name)) {
        error(entry.key_mark, value.path,
              "a policy name may hold only letters, digits, '_', '-', '.' and ':'");
        broken_policies_.insert(name);
        continue;
      }
      if (!value.node.IsMap()) {
        error(value,
              "must be a limit like {capacity: 5, refill_rate: 1/s}, got " + describe(value.node));
        broken_policies_.insert(name);
        continue;
      }
      if (std::optional<Limit> l = limit(value)) {
        config_.policies.push_back(NamedPolicy{name, *l});
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
  std::vector<RouteLimit> route_limits(const Item& item, const std::string& route_name) {
    std::vector<RouteLimit> out;
    if (item.node.IsMap() || item.node.IsScalar()) {
      error(item, "must be a list of limits (write [ ... ] around a single one), got " +
                      describe(item.node));
      return out;
    }
    const std::optional<std::vector<Item>> items =
        sequence(item, "a list of policy names and limits");
    if (!items) return out;
    if (items->empty()) error(item, "must list at least one limit");
    const size_t inline_count =
        std::count_if(items->begin(), items->end(), [](const Item& i) { return i.node.IsMap(); });
    std::set<std::string> named;
    for (size_t i = 0; i < items->size(); ++i) {
      const Item& li = (*items)[i];
      if (li.node.IsScalar()) {
        const std::string name = li.node.Scalar();
        if (const NamedPolicy* p = find_policy(name)) {
          if (!named.insert(name).second) {
            error(li, "policy " + quoted(name) + " is listed twice");
            continue;
          }
          out.push_back(RouteLimit{name, true, p->limit});
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
          error(li, "unknown policy " + quoted(name) + hint);
        }
      } else if (li.node.IsMap()) {
        if (std::optional<Limit> l = limit(li)) {
          std::string name = route_name;
          if (inline_count > 1) name += "#" + std::to_string(i);
          out.push_back(RouteLimit{name, false, *l});
        }
      } else {
        error(li, "must be a policy name or a limit like {capacity: 10, refill_rate: 2/s}, got " +
                      describe(li.node));
      }
    }
    return out;
  }

  void key_spec(const Item* item, KeySpec* out) {
    if (item == nullptr) return;
    if (auto k = parsed<KeySpec>(*item, "ip, global, header:NAME or a combination", parse_key_spec))
      *out = *k;
  }

  void default_route(const Item& item) {
    const std::optional<Mapping> m =
        mapping(item, &kDefaultKeys, "a mapping with key: and limits:");
    if (!m) return;
    Route route;
    route.name = "default";
    route.method = "*";
    route.pattern = "/*";
    route.line = item.line();
    key_spec(m->get("key"), &route.key);
    if (const Item* l = m->get("limits")) {
      route.limits = route_limits(*l, route.name);
    } else {
      error(item, "`limits` is required");
    }
    config_.default_route = std::move(route);
  }

  void routes(const Item& item) {
    const std::optional<std::vector<Item>> items = sequence(item, "a list of routes");
    if (!items) return;
    struct Seen {
      std::string path;
      int line;
    };
    std::map<std::string, Seen> by_shape;  // "GET /a/{}" -> first route with it
    std::map<std::string, Seen> by_name;
    for (const Item& ri : *items) {
      const std::optional<Mapping> m =
          mapping(ri, &kRouteKeys, "a route mapping with match: and limits:");
      if (!m) continue;
      Route route;
      route.line = ri.line();
      bool ok = true;
      const Item* match = m->get("match");
      if (match == nullptr) {
        error(ri, "`match` is required, like match: GET /api/users/{id}");
        ok = false;
      } else if (auto rm = parsed<RouteMatch>(*match, "\"METHOD /path\"", parse_route_match)) {
        route.method = rm->method;
        route.pattern = rm->pattern;
        route.name = rm->name;
        route.line = match->line();
        const std::string shape =
            route.method + " " + pattern_shape(route.pattern, config_.case_insensitive_paths);
        const auto [it, inserted] = by_shape.emplace(shape, Seen{ri.path, match->line()});
        if (!inserted) {
          error(*match, "duplicate route " + quoted(route.name) + ": " + it->second.path +
                            " (line " + std::to_string(it->second.line) + ") already matches it");
        }
      } else {
        ok = false;
      }
      if (const Item* n = m->get("name")) {
        if (auto s = scalar(*n, "a string")) {
          if (s->empty()) {
            error(*n, "must not be empty");
          } else if (*s == "default") {
            error(*n, "the name `default` is reserved for the default route");
          } else {
            route.name = *s;
          }
        }
      }
      if (!route.name.empty()) {
        const Item& where = m->get("name") ? *m->get("name") : *match;
        const auto [it, inserted] = by_name.emplace(route.name, Seen{ri.path, where.line()});
        if (!inserted && m->get("name") != nullptr)
          error(where, "the route name " + quoted(route.name) + " is already used by " +
                           it->second.path + " (line " + std::to_string(it->second.line) + ")");
      }
      key_spec(m->get("key"), &route.key);
      if (const Item* l = m->get("limits")) {
        route.limits = route_limits(*l, route.name.empty() ? ri.path : route.name);
      } else {
        error(ri, "`limits` is required");
      }
      if (ok) config_.routes.push_back(std::move(route));
    }
  }

  void server(const Item& item) {
    const std::optional<Mapping> m = mapping(item, &kServerKeys, "a mapping");
    if (!m) return;
    ServerLimits& s = config_.server;
    auto size = [&](const char* key, uint64_t min, size_t* out) {
      if (const Item* i = m->get(key)) {
        if (auto v = parsed<uint64_t>(*i, "a size in bytes like 16KiB", parse_size)) {
          if (*v < min) {
            error(*i, "must be at least " + std::to_string(min) + " bytes, got " +
                          quoted(i->node.Scalar()));
          } else {
            *out = *v;
          }
        }
      }
    };
    if (const Item* c = m->get("max_connections")) {
      if (auto v = integer(*c, 1, 10'000'000, "a whole number from 1 to 10000000"))
        s.max_connections = *v;
    }
    size("max_header_bytes", 1024, &s.max_header_bytes);
    size("max_body_bytes", 1, &s.max_body_bytes);
    millis(m->get("header_timeout"), false, &s.header_timeout);
    millis(m->get("idle_timeout"), false, &s.idle_timeout);
    if (const Item* t = m->get("threads")) {
      if (auto v = integer(*t, 0, 1024, "a whole number from 0 (one per core) to 1024"))
        s.threads = *v;
    }
    millis(m->get("shutdown_grace"), true, &s.shutdown_grace);
  }

  void logging(const Item& item) {
    const std::optional<Mapping> m = mapping(item, &kLoggingKeys, "a mapping");
    if (!m) return;
    if (const Item* l = m->get("level")) {
      const Keys levels = {"trace", "debug", "info", "warn", "error"};
      if (auto c = choice(*l, levels)) config_.logging.level = std::string(levels[*c]);
    }
    if (const Item* a = m->get("access_log")) {
      if (auto b = boolean(*a)) config_.logging.access_log = *b;
    }
    if (const Item* d = m->get("denial_log_per_second")) {
      const std::optional<std::string> text = scalar(*d, "a number of log lines per second");
      if (!text) return;
      double v = -1;
      const char* end = text->data() + text->size();
      const auto [ptr, ec] = std::from_chars(text->data(), end, v);
      if (ec != std::errc() || ptr != end || !std::isfinite(v) || v < 0 || v > 1e6) {
        error(*d, "must be a number of log lines per second (0 to 1000000), got " + quoted(*text));
      } else {
        config_.logging.denial_log_per_second = v;
      }
    }
  }

  std::string file_;
  Config config_;
  std::vector<ConfigError> errors_;
  std::vector<std::string> policy_names_;  // every name under policies:, valid or not
  std::set<std::string, std::less<>> broken_policies_;
};

}  // namespace

LoadResult load_config_string(std::string_view yaml, const std::string& name) {
  return Loader(name).load(yaml);
}

LoadResult load_config_file(const std::string& path) {
  std::string error;
  std::optional<std::string> text =
      read_small_file(path, "the config file", kMaxConfigBytes, &error);
  if (!text) {
    LoadResult result;
    result.errors.push_back(ConfigError{path, 0, 0, error});
    return result;
  }
  return load_config_string(*text, path);
}

}  // namespace sluice::policy
