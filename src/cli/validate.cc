#include "cli/validate.h"

#include <cstdio>
#include <string>

#include "cli/rls_serve.h"
#include "policy/config_loader.h"

namespace sluice::cli {
namespace {

constexpr const char* kValidateUsage = R"(Usage: sluice validate --config FILE

Loads FILE exactly as `sluice serve` would and checks it: unknown keys, wrong
types, bad durations, rates, addresses, URLs and CIDR blocks, unknown
algorithms or policy names, duplicate routes and keys. With `grpc` and `rls`,
the envoyproxy/ratelimit descriptor files of rls.config_dir are loaded and
checked too (their errors as DESCRIPTOR_FILE:LINE:COLUMN: message, their
warnings on stderr). Nothing is started.

Exit status:
  0  the file is valid; a one-line summary is printed
  1  the file is invalid; every error is printed to stderr as
     FILE:LINE:COLUMN: yaml.path: message
  2  usage error

The keys are documented in docs/CONFIG.md.
)";

std::string plural(size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::string summary(const policy::Config& c) {
  std::string s = plural(c.routes.size(), "route", "routes") + ", " +
                  plural(c.policies.size(), "policy", "policies") + ", " +
                  (c.default_route ? "a default limit" : "no default limit") + ", " +
                  (c.store.backend == policy::StoreConfig::Backend::kRedis
                       ? (c.store.redis.cluster ? "redis cluster store" : "redis store")
                       : "memory store") +
                  ", listen " + c.listen.text();
  s += c.upstream ? ", gateway to " + c.upstream->url : ", decision API only (no upstream)";
  return s;
}

}  // namespace

int run_validate(std::span<const std::string_view> args) {
  std::string path;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kValidateUsage, stdout);
      return 0;
    }
    if ((arg == "--config" || arg == "-c") && i + 1 < args.size()) {
      path = std::string(args[++i]);
    } else if (arg.starts_with("--config=")) {
      path = std::string(arg.substr(9));
    } else {
      std::fprintf(stderr, "sluice validate: unexpected argument '%.*s'\n\n%s",
                   static_cast<int>(arg.size()), arg.data(), kValidateUsage);
      return 2;
    }
  }
  if (path.empty()) {
    std::fprintf(stderr, "sluice validate: --config FILE is required\n\n%s", kValidateUsage);
    return 2;
  }
  const policy::LoadResult result = policy::load_config_file(path);
  if (!result.config) {
    for (const policy::ConfigError& e : result.errors)
      std::fprintf(stderr, "%s\n", e.text().c_str());
    std::fprintf(stderr, "%s: %s\n", path.c_str(),
                 plural(result.errors.size(), "error", "errors").c_str());
    return 1;
  }
  std::string rls_summary;
  if (result.config->rls) {
    const rls::LoadResult descriptors =
        load_rls_descriptors(*result.config->rls, result.config->store);
    for (const std::string& w : descriptors.warnings)
      std::fprintf(stderr, "warning: %s\n", w.c_str());
    if (!descriptors.ok()) {
      for (const std::string& e : descriptors.errors) std::fprintf(stderr, "%s\n", e.c_str());
      std::fprintf(stderr, "%s: %s in the RLS descriptor files of %s\n", path.c_str(),
                   plural(descriptors.errors.size(), "error", "errors").c_str(),
                   result.config->rls->config_dir.c_str());
      return 1;
    }
    rls_summary = ", Envoy RLS on " + result.config->grpc->text() + " with " +
                  plural(descriptors.config->domains.size(), "domain", "domains") + " from " +
                  result.config->rls->config_dir;
  }
  std::printf("ok: %s: %s%s\n", path.c_str(), summary(*result.config).c_str(), rls_summary.c_str());
  return 0;
}

}  // namespace sluice::cli
