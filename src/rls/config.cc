#include "rls/config.h"

#include <set>

namespace sluice::rls {

const DescriptorNode* DescriptorLevel::find_value(std::string_view key,
                                                  std::string_view value) const {
  const auto k = by_value.find(key);
  if (k == by_value.end()) return nullptr;
  const auto v = k->second.find(value);
  return v == k->second.end() ? nullptr : &nodes[v->second];
}

const DescriptorNode* DescriptorLevel::find_default(std::string_view key) const {
  const auto it = by_key.find(key);
  return it == by_key.end() ? nullptr : &nodes[it->second];
}

const Domain* RlsConfig::find_domain(std::string_view name) const {
  const auto it = domains.find(name);
  return it == domains.end() ? nullptr : &it->second;
}

const std::string& limit_name(const DescriptorNode& node) {
  return node.rule && !node.rule->name.empty() ? node.rule->name : node.stat_key;
}

namespace {

void add_limit_names(const DescriptorLevel& level, std::set<std::string_view>& seen,
                     std::vector<std::string>& out) {
  for (const DescriptorNode& node : level.nodes) {
    if (node.rule && !node.rule->unlimited && seen.insert(limit_name(node)).second) {
      out.push_back(limit_name(node));
    }
    add_limit_names(node.children, seen, out);
  }
}

}  // namespace

std::vector<std::string> limit_names(const RlsConfig& config) {
  std::set<std::string_view> seen;  // views of the config's names
  std::vector<std::string> out;
  for (const auto& [name, domain] : config.domains) add_limit_names(domain.root, seen, out);
  return out;
}

}  // namespace sluice::rls
