#include "policy/upstreams_loader.h"

#include <chrono>
#include <optional>
#include <set>
#include <string>

#include "config/values/tls_files.h"

namespace sluice::policy {

namespace {

using config::Item;
using config::Keys;
using config::Mapping;
using config::quoted;
using config::Walker;

const Keys kUpstreamKeys = {"servers", "balance",         "health",  "retries",
                            "tls",     "connect_timeout", "timeout", "max_idle_connections"};
const Keys kHealthKeys = {"fail_after", "retry_after"};
// As store.redis.tls, so that one spelling serves every TLS client block.
const Keys kTlsKeys = {"ca_file", "cert_file", "key_file", "server_name"};
// The servers an exchange has tried are a 64-bit mask (http/retry_rule.h).
constexpr size_t kMaxServers = 64;

void millis(Walker& walker, const Item* item, bool allow_zero, std::chrono::milliseconds* out) {
  if (item == nullptr) return;
  if (auto d = walker.duration(*item, allow_zero)) {
    *out = std::chrono::duration_cast<std::chrono::milliseconds>(*d);
  }
}

// The servers list; false when it is missing, empty or has an error.
bool servers(Walker& walker, const Mapping& m, Upstream* u) {
  const Item* s = m.get("servers");
  if (s == nullptr) {
    walker.error(m.self, "`servers` is required, like servers: [http://10.0.0.5:3000]");
    return false;
  }
  const std::optional<std::vector<Item>> items = walker.sequence(*s, "a list of server URLs");
  if (!items) return false;
  if (items->empty()) {
    walker.error(*s, "must list at least one server");
    return false;
  }
  if (items->size() > kMaxServers) {
    walker.error(*s, "at most " + std::to_string(kMaxServers) + " servers");
    return false;
  }
  bool ok = true;
  std::set<std::string> seen;
  for (const Item& i : *items) {
    auto url = walker.parsed<config::ServerUrl>(i, "a server URL like http://10.0.0.5:3000",
                                                config::parse_server_url);
    if (!url) {
      ok = false;
      continue;
    }
    const std::string key = (url->tls ? "https://" : "http://") + url->address.text();
    if (!seen.insert(key).second) {
      walker.error(i, "the server " + quoted(url->url) + " is listed twice");
      ok = false;
      continue;
    }
    u->servers.push_back(UpstreamServer{url->url, url->address, url->tls});
  }
  if (ok) u->address = u->servers.front().address;
  return ok;
}

void health(Walker& walker, const Item& item, Upstream* u) {
  const std::optional<Mapping> m = walker.mapping(item, &kHealthKeys, "a mapping");
  if (!m) return;
  u->fail_after = 3;  // a `health:` block turns passive health on
  if (const Item* f = m->get("fail_after")) {
    if (auto v = walker.integer(*f, 1, 1000, "a whole number from 1 to 1000")) {
      u->fail_after = static_cast<uint32_t>(*v);
    }
  }
  millis(walker, m->get("retry_after"), false, &u->retry_after);
}

// The files are loaded as the gateway will load them, so a missing or
// unreadable CA, or a key that does not match its certificate, is reported
// at its key.
void tls(Walker& walker, const Item& item, Upstream* u) {
  const std::optional<Mapping> m = walker.mapping(item, &kTlsKeys, "a mapping");
  if (!m) return;
  bool files_ok = true;
  const auto file = [&](const char* key, std::string* out) -> const Item* {
    const Item* i = m->get(key);
    if (i == nullptr) return nullptr;
    if (auto p = walker.path(*i)) {
      *out = *p;
    } else {
      files_ok = false;
    }
    return i;
  };
  const Item* ca = file("ca_file", &u->tls.ca_file);
  const Item* cert = file("cert_file", &u->tls.cert_file);
  const Item* key = file("key_file", &u->tls.key_file);
  if ((cert == nullptr) != (key == nullptr)) {
    walker.error(cert != nullptr ? *cert : *key,
                 "`cert_file` and `key_file` go together: give both or neither");
    files_ok = false;
  }
  if (const Item* n = m->get("server_name")) {
    if (auto s = walker.scalar(*n, "a host name or IP address")) {
      if (s->empty()) walker.error(*n, "must not be empty");
      u->tls.server_name = *s;
    }
  }
  bool any_https = false;
  for (const UpstreamServer& s : u->servers) any_https = any_https || s.tls;
  if (!u->servers.empty() && !any_https) {
    walker.error(item, "no server of this upstream is https://: `tls` would never be used");
    return;
  }
  if (!files_ok) return;
  if (auto e = config::check_tls_files({u->tls.ca_file, u->tls.cert_file, u->tls.key_file})) {
    using Key = config::TlsFilesError::Key;
    const Item* at = e->key == Key::kCaFile ? ca : e->key == Key::kCertFile ? cert : key;
    walker.error(at != nullptr ? *at : item, e->message);
  }
}

}  // namespace

std::vector<std::string_view> upstream_names(const std::vector<Upstream>& upstreams) {
  std::vector<std::string_view> names;
  for (const Upstream& u : upstreams) names.push_back(u.name);
  return names;
}

void load_upstreams(Walker& walker, const Item& item, std::vector<Upstream>* out) {
  const std::optional<Mapping> top =
      walker.mapping(item, nullptr, "a mapping of upstream names to their servers");
  if (!top) return;
  for (const Mapping::Entry& e : top->entries) {
    if (e.key.empty() || e.key.find("://") != std::string::npos) {
      walker.error(e.value, "an upstream name is a word like `api`, got " + quoted(e.key));
      continue;
    }
    const std::optional<Mapping> m = walker.mapping(e.value, &kUpstreamKeys, "a mapping");
    if (!m) continue;
    Upstream u;
    u.name = e.key;
    const size_t errors = walker.error_count();
    servers(walker, *m, &u);
    if (const Item* b = m->get("balance")) {
      if (auto c = walker.choice(*b, {"round_robin", "least_request"})) {
        u.balance = static_cast<Balance>(*c);  // in the order of Balance
      }
    }
    if (const Item* h = m->get("health")) health(walker, *h, &u);
    if (const Item* r = m->get("retries")) {
      if (auto v = walker.integer(*r, 0, kMaxServers - 1, "a whole number from 0 to 63")) {
        u.retries = static_cast<uint32_t>(*v);
      }
    }
    if (const Item* t = m->get("tls")) tls(walker, *t, &u);
    millis(walker, m->get("connect_timeout"), false, &u.connect_timeout);
    millis(walker, m->get("timeout"), false, &u.timeout);
    if (const Item* n = m->get("max_idle_connections")) {
      if (auto v = walker.integer(*n, 0, 100'000, "a whole number from 0 to 100000")) {
        u.max_idle_connections = *v;
      }
    }
    if (walker.error_count() == errors) out->push_back(std::move(u));
  }
}

const Upstream* find_upstream(Walker& walker, const Item& at, std::string_view name,
                              const std::vector<Upstream>& upstreams) {
  for (const Upstream& u : upstreams) {
    if (u.name == name) return &u;
  }
  std::string message = "names no upstream: " + quoted(name) + " is not under `upstreams:`";
  if (upstreams.empty()) {
    message += " (there is no `upstreams:` section; a URL needs its scheme, like http://" +
               std::string(name) + ")";
  } else if (std::string m = config::closest_match(name, upstream_names(upstreams)); !m.empty()) {
    message += " (did you mean " + quoted(m) + "?)";
  }
  walker.error(at, message);
  return nullptr;
}

}  // namespace sluice::policy
