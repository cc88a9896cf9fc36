// Policy: a loaded Config compiled for matching, and the planning of one
// request: which route applies, which limits, and under which store keys.
//
// A Policy is immutable once built; the server holds it in a shared_ptr and
// swaps the pointer atomically on reload, so a request sees one whole config.
// Thread-safety: all const methods may be called concurrently.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "policy/config.h"
#include "policy/request.h"

namespace sluice::policy {

// One limit of a request, with the store key it applies to.
struct PlannedLimit {
  const RouteLimit* limit = nullptr;
  // "<scope>|<client key>": the scope is "policy:<name>" for a named policy
  // (shared by every route that names it) or "route:<route name>#<i>" for an
  // inline limit, so equal limit definitions on different routes never share state.
  std::string store_key;
};

struct Plan {
  const Route* route = nullptr;  // nullptr: no route and no default -> not limited
  std::string normalized_path;
  IpAddress client;
  std::string client_key;  // "ip:192.0.2.1", "h:x-api-key=abc", "global", joined by '+'
  std::vector<PlannedLimit> limits;
};

class Policy {
 public:
  explicit Policy(Config config);

  const Config& config() const { return config_; }

  // The first route matching (method, normalised path), else the default
  // route, else nullptr.
  const Route* match(std::string_view method, std::string_view normalized_path) const;

  // A named policy, for /v1/check. nullptr when unknown.
  const NamedPolicy* find_policy(std::string_view name) const;

  // Normalises the path, matches a route, finds the client address and key.
  Plan plan(const RequestInfo& request) const;

  // The store key for a named policy and a caller-given key (/v1/check,
  // /admin/reset): "policy:<name>|<key>".
  static std::string policy_store_key(std::string_view policy_name, std::string_view key);

 private:
  struct CompiledRoute;
  Config config_;
  std::vector<CompiledRoute> compiled_;
  std::vector<RouteLimit> policy_limits_;  // one per named policy, for /v1/check
  std::shared_ptr<void> impl_;  // matching index, if any
};

}  // namespace sluice::policy
