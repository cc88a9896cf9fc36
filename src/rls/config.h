// The descriptor configuration of the Envoy RLS API, as loaded from
// envoyproxy/ratelimit descriptor files (see config_loader.h).
//
// A domain holds a tree of descriptors. Each level maps (key, value) to a
// node; a node without a value is the default for every value of its key; a
// value containing '*' is a wildcard. A node may carry a rate_limit rule and
// nested descriptors. matcher.h walks the tree for one request descriptor.
//
// An RlsConfig is built once by the loader and then never changes: share it as
// std::shared_ptr<const RlsConfig> between threads and swap it whole on reload.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "config/error.h"
#include "rls/units.h"
#include "sluice/limit.h"

namespace google::protobuf {
class Struct;
}

namespace sluice::rls {

using SourceMark = config::SourceMark;

// A rate_limit block.
struct RateLimitRule {
  std::string name;                   // rate_limit.name; "" when absent
  std::vector<std::string> replaces;  // names of the rules this one replaces
  bool unlimited = false;
  // What DescriptorStatus.current_limit reports. For a Sluice algorithm:
  // requests_per_unit is the limit's size and unit the unit whose length is
  // the limit's period (kUnknown when none is).
  uint32_t requests_per_unit = 0;
  Unit unit = Unit::kUnknown;
  // The limit enforced. Empty when unlimited, and when requests_per_unit is 0
  // (envoyproxy/ratelimit's way to refuse every request); then `window` gives
  // the period whose end duration_until_reset reports.
  std::optional<Limit> limit;
  Nanos window{0};
  // True when the rule names a Sluice `algorithm`.
  bool sluice_algorithm = false;
};

struct DescriptorNode;

// Hash and equality that let string maps be searched with a string_view.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <class T>
using StringMap = std::unordered_map<std::string, T, StringHash, std::equal_to<>>;

// One level of the descriptor tree.
struct DescriptorLevel {
  std::vector<DescriptorNode> nodes;  // in file order
  // key -> value -> index in nodes, for nodes with a value (wildcards included,
  // so that a literal '*' in a request value matches its own pattern first).
  StringMap<StringMap<size_t>> by_value;
  // key -> index in nodes, for nodes without a value (the per-value defaults).
  StringMap<size_t> by_key;
  // Indexes of the nodes whose value contains '*', in file order: the first
  // that matches wins.
  std::vector<size_t> wildcards;

  // The node for exactly (key, value), or nullptr.
  const DescriptorNode* find_value(std::string_view key, std::string_view value) const;
  // The value-less node of `key`, or nullptr.
  const DescriptorNode* find_default(std::string_view key) const;
};

struct DescriptorNode {
  std::string key;
  std::string value;                    // "" = any value of key
  std::vector<std::string> glob_parts;  // value split at '*' (size >= 2 for a wildcard)
  std::optional<RateLimitRule> rule;
  bool shadow_mode = false;
  bool quota_mode = false;
  bool detailed_metric = false;
  bool value_to_metric = false;
  bool share_threshold = false;
  // The descriptor's `metadata` map, sent back when the descriptor is under its limit.
  std::shared_ptr<const google::protobuf::Struct> metadata;
  // The metric name envoyproxy/ratelimit gives the node: "domain.key_value.subkey".
  std::string stat_key;
  SourceMark mark;
  DescriptorLevel children;

  bool is_wildcard() const { return glob_parts.size() > 1; }
};

struct Domain {
  std::string name;
  SourceMark mark;  // where `domain:` was written (the first file, when merged)
  DescriptorLevel root;
};

struct RlsConfig {
  std::map<std::string, Domain, std::less<>> domains;
  std::vector<std::string> files;             // the files loaded, in load order
  std::vector<config::ConfigError> warnings;  // keys that have no effect

  // The domain named `name`, or nullptr.
  const Domain* find_domain(std::string_view name) const;
};

// The name a denial by a node's rule gives (sluice_limit_denials_total's
// `limit`): its rate_limit `name`, else the node's stat key
// ("domain.key_value.subkey", as the file writes it: never a request's
// values, even for a detailed_metric node).
const std::string& limit_name(const DescriptorNode& node);
// The name of a descriptor's `limit` override (sent by Envoy, not in a file).
inline constexpr std::string_view kOverrideLimitName = "override";
// Every rule's limit_name(), once each, in domain and file order.
std::vector<std::string> limit_names(const RlsConfig& config);

}  // namespace sluice::rls
