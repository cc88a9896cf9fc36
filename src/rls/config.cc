#include "rls/config.h"

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

}  // namespace sluice::rls
