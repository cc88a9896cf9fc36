#include "cli/deployment.h"

#include <utility>

#include "policy/config_loader.h"
#include "rls/config_loader.h"

namespace sluice::cli {

namespace {

// "with store.backend redis: ": what a store's refusal is prefixed with.
std::string store_hint(const policy::StoreConfig& store) {
  return std::string("with store.backend ") +
         (store.backend == policy::StoreConfig::Backend::kRedis ? "redis" : "memory") + ": ";
}

// Every limit of the server config the store cannot apply, at its limit block.
void check_config_limits(const policy::Config& config, const LimitCheck& check,
                         std::vector<config::ConfigError>& errors) {
  auto check_one = [&](const Limit& limit, const config::SourceMark& at) {
    if (Status fits = check(limit); !fits.ok()) {
      errors.emplace_back(at, store_hint(config.store) + fits.error().message);
    }
  };
  // A named policy once, where it is defined; inline limits where they are written.
  for (const policy::NamedPolicy& p : config.policies) check_one(p.limit, p.mark);
  auto check_route = [&](const policy::Route& route) {
    for (const policy::RouteLimit& l : route.limits) {
      if (!l.named_policy) check_one(l.limit, l.mark);
    }
  };
  if (config.default_route) check_route(*config.default_route);
  for (const policy::Route& route : config.routes) check_route(route);
  config::sort_by_position(errors);
}

// Every rate_limit of `level` the store cannot apply.
void check_descriptor_limits(const rls::DescriptorLevel& level, const std::string& domain,
                             const LimitCheck& check, const std::string& hint,
                             std::vector<config::ConfigError>& errors) {
  for (const rls::DescriptorNode& node : level.nodes) {
    if (node.rule && node.rule->limit) {
      if (Status fits = check(*node.rule->limit); !fits.ok()) {
        errors.emplace_back(node.mark, "domain " + domain + ", descriptor " + node.key +
                                           (node.value.empty() ? "" : "=" + node.value) + ": " +
                                           hint + fits.error().message);
      }
    }
    check_descriptor_limits(node.children, domain, check, hint, errors);
  }
}

}  // namespace

Deployment load_deployment(const std::string& config_path, const policy::ConfigOverrides& overrides,
                           const StoreCheck& store_check) {
  Deployment d;
  policy::LoadResult loaded = policy::load_config_file(config_path, overrides);
  d.files = std::move(loaded.files);
  if (!loaded.config) {
    d.errors = std::move(loaded.errors);
    return d;
  }
  const LimitCheck check_limit = store_check ? store_check(*loaded.config) : LimitCheck();
  if (check_limit) check_config_limits(*loaded.config, check_limit, d.errors);
  if (loaded.config->rls) {
    rls::LoadOptions options;
    options.merge_domains = loaded.config->rls->merge_domains;
    rls::LoadResult descriptors = rls::load_rls_config_dir(loaded.config->rls->config_dir, options);
    d.warnings = std::move(descriptors.warnings);
    const size_t before = d.errors.size();
    d.errors.insert(d.errors.end(), descriptors.errors.begin(), descriptors.errors.end());
    if (descriptors.config && check_limit) {
      for (const auto& [name, domain] : descriptors.config->domains) {
        check_descriptor_limits(domain.root, name, check_limit, store_hint(loaded.config->store),
                                d.errors);
      }
    }
    d.descriptor_errors = d.errors.size() - before;
    d.descriptor_dir = loaded.config->rls->config_dir;
    d.rls = std::move(descriptors.config);
  }
  if (d.errors.empty()) {
    d.config = std::move(loaded.config);
  } else {
    d.rls.reset();
  }
  return d;
}

}  // namespace sluice::cli
