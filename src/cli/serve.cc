#include "cli/serve.h"

#include <cstdio>
#include <exception>
#include <memory>
#include <string>

#include <spdlog/spdlog.h>

#include "cli/args.h"
#include "cli/deployment.h"
#include "cli/rls_serve.h"
#include "cli/store_setup.h"
#include "config/files.h"
#include "http/proxy.h"
#include "http/server.h"
#include "observe/logging.h"

namespace sluice::cli {

namespace {

constexpr const char* kServeUsage =
    R"(Usage: sluice serve --config FILE [--listen HOST:PORT] [--admin HOST:PORT] [--upstream URL]

Runs the Sluice server described by FILE (docs/CONFIG.md):
  listen         the gateway (when `upstream` is set), or the decision service
                 when it is not: every path decided, and POST /v1/check, POST
                 /v1/release, GET /v1/auth unless decision_api has them;
                 HTTPS with `tls: {cert, key}`
  decision_api   `listen: HOST:PORT`: POST /v1/check, POST /v1/release and
                 GET /v1/auth for your own programs, served there only
  admin          /dashboard (live page) /healthz /readyz /metrics /admin/stats,
                 /admin/rls, POST /admin/reload, POST /admin/reset,
                 GET|PUT|DELETE /admin/consumers/<id> (127.0.0.1 by default)
  grpc           the Envoy RLS v3 API, with the descriptor files of
                 rls.config_dir (docs/ENVOY.md), gRPC health checks and
                 server reflection (`sluice rls query`, grpcurl); TLS with
                 `grpc_tls: true`

Options:
  -c, --config FILE     the config file (required)
  --listen HOST:PORT    instead of the file's `listen`
  --admin HOST:PORT     instead of the file's `admin`
  --upstream URL        instead of the file's upstream URL (its timeouts stay)
  -h, --help            this text

Every endpoint, its requests and answers: docs/API.md.

Signals: SIGHUP (or POST /admin/reload) reloads FILE with the files it
names (TLS certificate, consumers file, JWT keys, token files, deny body) and
the RLS descriptor files together (if one is bad, all are refused and the old
ones stay; a setting read only at startup, such as the store, waits for a
restart, and the log says so); with `watch_config: true` a change of these
files on disk reloads them the same way. SIGTERM or SIGINT stops accepting,
finishes requests in flight (up to server.shutdown_grace) and exits 0; a
second SIGTERM or SIGINT during that drain stops at once, cutting the
requests still in flight.

Exit codes: 0 after a graceful shutdown, 1 when FILE or a descriptor file is
invalid or a port cannot be bound, 2 on bad usage, 128 + the signal's number
(143 for SIGTERM, 130 for SIGINT) when a second signal cut the drain short.
)";

constexpr OptionSpec kOptions[] = {
    {"--config", "-c"}, {"--listen", ""}, {"--admin", ""}, {"--upstream", ""}};

// The command line's values in place of the file's.
policy::ConfigOverrides overrides_of(const ParsedArgs& parsed) {
  return policy::ConfigOverrides{parsed.get("--listen"), parsed.get("--admin"),
                                 parsed.get("--upstream")};
}

void print_errors(const std::vector<config::ConfigError>& errors) {
  for (const config::ConfigError& e : errors) std::fprintf(stderr, "%s\n", e.text().c_str());
}

}  // namespace

int run_serve(std::span<const std::string_view> args) {
  const ConfigCommand command = start_config_command("serve", args, kOptions, kServeUsage);
  if (command.exit_code) return *command.exit_code;
  const ParsedArgs& parsed = command.parsed;
  const std::string& config_path = command.config;

  // Every limit is checked against the store the config asks for (and on
  // reload against the store in service).
  const policy::ConfigOverrides overrides = overrides_of(parsed);
  Deployment deployment = load_deployment(
      config_path, overrides, [](const policy::Config& c) { return limit_check_for(c.store); });
  if (!deployment.ok()) {
    print_errors(deployment.errors);
    const bool only_descriptors = deployment.descriptor_errors == deployment.errors.size();
    std::fprintf(
        stderr, "sluice serve: %zu error(s) in %s; not started\n", deployment.errors.size(),
        only_descriptors ? ("the RLS descriptor files of " + deployment.descriptor_dir).c_str()
                         : config_path.c_str());
    return 1;
  }
  const policy::Config& config = *deployment.config;
  if (!observe::setup_logging(config.logging.level, config.logging.format)) {
    spdlog::warn("unknown logging.level \"{}\" or format \"{}\", using info, text",
                 config.logging.level, config.logging.format);
  }
  for (const config::ConfigError& w : deployment.warnings) spdlog::warn("RLS: {}", w.text());
  // A change to the consumers file cut by a kill left its temporary file.
  if (config.consumers) {
    for (const std::string& stray : config::remove_stray_temporaries(config.consumers->file))
      spdlog::warn("removed {}: a write of the consumers file that did not finish", stray);
  }

  Result<ServeStore> made = make_serve_store(config);
  if (!made.ok()) {
    spdlog::error("{}", made.error().message);
    return 1;
  }
  std::shared_ptr<Store> store = made->store;
  // The worker loops as they attach to a store driven by them (Redis), for
  // the RLS calls to be decided there too.
  WorkerLoops loops;
  // The Envoy RLS gRPC API (when `grpc` is set) runs over the same store; it
  // outlives the server, and the store outlives both.
  RlsRuntime rls(*store, made->hooks.attach ? &loops : nullptr);
  rls.load(deployment);
  try {
    if (Status st = rls.listen(config); !st.ok()) {
      spdlog::error("{}", st.error().message);
      return 1;
    }
    http::ServerOptions options;
    options.config_path = config_path;
    // A reload reads the file and the descriptor files again, checks them
    // against the store in service, and hands the descriptors to the RLS
    // runtime for the moment the server swaps the config.
    options.load_config = [path = config_path, overrides, &store, &rls] {
      Deployment next = load_deployment(path, overrides, [s = store.get()](const policy::Config&) {
        return [s](const Limit& limit) { return s->check_limit(limit); };
      });
      for (const config::ConfigError& w : next.warnings) spdlog::warn("reload: RLS: {}", w.text());
      if (next.ok()) rls.stage(next);
      return http::LoadedConfig{std::move(next.config), std::move(next.errors),
                                std::move(next.files)};
    };
    options.watched_files = deployment.files;
    options.store_hooks = made->hooks;
    if (made->hooks.attach) {
      options.store_hooks.attach = [attach = made->hooks.attach,
                                    &loops](boost::asio::io_context& io) {
        attach(io);
        loops.add(io);
      };
      // No RLS call is posted to a loop once it is removed; those posted
      // before and not run are answered UNAVAILABLE as its io_context goes.
      options.store_hooks.detach = [detach = made->hooks.detach,
                                    &loops](boost::asio::io_context& io) {
        loops.remove(io);
        if (detach) detach(io);
      };
    }
    options.companion = &rls;
    options.make_forwarder = http::upstream_proxy_factory();  // the gateway proxy
    http::Server server(std::move(*deployment.config), store, std::move(options));
    if (Status st = server.start(); !st.ok()) {
      spdlog::error("{}", st.error().message);
      return 1;
    }
    return server.run();
  } catch (const std::exception& e) {
    spdlog::error("sluice serve: {}", e.what());
    return 1;
  }
}

}  // namespace sluice::cli
