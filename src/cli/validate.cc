#include "cli/validate.h"

#include <cstdio>
#include <string>

#include "cli/args.h"
#include "cli/deployment.h"
#include "cli/store_setup.h"

namespace sluice::cli {
namespace {

constexpr const char* kValidateUsage =
    R"(Usage: sluice validate --config FILE [--listen HOST:PORT] [--admin HOST:PORT] [--upstream URL]

Loads FILE exactly as `sluice serve` would and checks it: unknown keys, wrong
types, bad durations, rates, addresses, URLs and CIDR blocks, unknown
algorithms or policy names, duplicate routes and keys, token files, and every
limit against the store the file asks for. With `grpc` and `rls`, the
envoyproxy/ratelimit descriptor files of rls.config_dir are loaded and
checked too (their warnings on stderr). Nothing is started.

Options:
  -c, --config FILE     the config file (required)
  --listen HOST:PORT    instead of the file's `listen`
  --admin HOST:PORT     instead of the file's `admin`
  --upstream URL        instead of the file's upstream URL (its timeouts stay)
  -h, --help            this text

Exit status:
  0  the file is valid; a one-line summary is printed
  1  the file is invalid; every error is printed to stderr as
     FILE:LINE:COLUMN: yaml.path: message
  2  usage error

The keys are documented in docs/CONFIG.md.
)";

constexpr OptionSpec kOptions[] = {
    {"--config", "-c"}, {"--listen", ""}, {"--admin", ""}, {"--upstream", ""}};

// The command line's values in place of the file's.
policy::ConfigOverrides overrides_of(const ParsedArgs& parsed) {
  return policy::ConfigOverrides{parsed.get("--listen"), parsed.get("--admin"),
                                 parsed.get("--upstream")};
}

std::string plural(size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::string summary(const Deployment& d) {
  const policy::Config& c = *d.config;
  std::string s =
      plural(c.routes.size(), "route", "routes") + ", " +
      plural(c.policies.size(), "policy", "policies") + ", " +
      (c.default_route ? "a default limit" : "no default limit") + ", " +
      (c.store.backend == policy::StoreConfig::Backend::kRedis
           ? std::string(c.store.redis.cluster                   ? "redis cluster store"
                         : c.store.redis.sentinel.master.empty() ? "redis store"
                                                                 : "redis store via sentinel") +
                 (c.store.redis.mode_cached  ? " in cached mode"
                  : c.store.redis.deny_cache ? " with deny cache"
                                             : "")
           : "memory store") +
      ", listen " + c.listen.text();
  if (c.tls) s += c.tls->min_tls13 ? " with TLS 1.3" : " with TLS 1.2+";
  if (!c.upstream) {
    s += ", decision API only (no upstream)";
  } else if (c.upstream->name.empty()) {
    s += ", gateway to " + c.upstream->url;
  } else {
    s += ", gateway to upstream " + c.upstream->name + " (" +
         plural(c.upstreams.size(), "upstream", "upstreams") + ")";
  }
  if (c.consumers && c.consumers->table) {
    s += ", " + plural(c.plans.size(), "plan", "plans") + " for " +
         plural(c.consumers->table->size(), "consumer", "consumers") + " by " +
         c.consumers->key.text;
  }
  if (d.rls) {
    s += ", Envoy RLS on " + c.grpc->text() + (c.grpc_tls ? " (TLS)" : "") + " with " +
         plural(d.rls->domains.size(), "domain", "domains") + " from " + c.rls->config_dir;
  }
  return s;
}

}  // namespace

int run_validate(std::span<const std::string_view> args) {
  const ConfigCommand command = start_config_command("validate", args, kOptions, kValidateUsage);
  if (command.exit_code) return *command.exit_code;
  const ParsedArgs& parsed = command.parsed;
  const std::string& path = command.config;
  const Deployment d = load_deployment(
      path, overrides_of(parsed), [](const policy::Config& c) { return limit_check_for(c.store); });
  for (const config::ConfigError& w : d.warnings) {
    std::fprintf(stderr, "warning: %s\n", w.text().c_str());
  }
  if (!d.ok()) {
    for (const config::ConfigError& e : d.errors) std::fprintf(stderr, "%s\n", e.text().c_str());
    const bool only_descriptors = d.descriptor_errors == d.errors.size();
    std::fprintf(
        stderr, "%s: %s%s\n", path.c_str(), plural(d.errors.size(), "error", "errors").c_str(),
        only_descriptors ? (" in the RLS descriptor files of " + d.descriptor_dir).c_str() : "");
    return 1;
  }
  std::printf("ok: %s: %s\n", path.c_str(), summary(d).c_str());
  return 0;
}

}  // namespace sluice::cli
