#include "cli/serve.h"

#include <cstdio>
#include <exception>
#include <memory>
#include <string>

#include <spdlog/spdlog.h>

#include "cli/rls_serve.h"
#include "cli/store_setup.h"
#include "http/proxy.h"
#include "http/server.h"
#include "observe/logging.h"
#include "policy/config_loader.h"

namespace sluice::cli {

namespace {

constexpr const char* kServeUsage = R"(Usage: sluice serve --config FILE

Runs the Sluice server described by FILE (docs/CONFIG.md):
  listen   the gateway (when `upstream` is set), POST /v1/check, GET /v1/auth
  admin    /dashboard (live page) /healthz /readyz /metrics /admin/stats,
           POST /admin/reload, POST /admin/reset
           (127.0.0.1 by default; never expose it)
  grpc     the Envoy RLS v3 API, with the descriptor files of rls.config_dir
           (docs/ENVOY.md)

Signals: SIGHUP reloads FILE and the RLS descriptor files together (if either
is bad, both are refused and the old ones stay);
SIGTERM or SIGINT stops accepting, finishes requests in flight (up to
server.shutdown_grace) and exits 0.

Exit codes: 0 after a graceful shutdown, 1 when FILE or a descriptor file is
invalid or a port cannot be bound, 2 on bad usage.
)";

}  // namespace

int run_serve(std::span<const std::string_view> args) {
  std::string config_path;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--help" || args[i] == "-h") {
      std::fputs(kServeUsage, stdout);
      return 0;
    }
    if (args[i] == "--config" && i + 1 < args.size()) {
      config_path = std::string(args[++i]);
    } else if (args[i].substr(0, 9) == "--config=") {
      config_path = std::string(args[i].substr(9));
    } else {
      std::fprintf(stderr, "sluice serve: unexpected argument '%.*s'\n\n%s",
                   static_cast<int>(args[i].size()), args[i].data(), kServeUsage);
      return 2;
    }
  }
  if (config_path.empty()) {
    std::fprintf(stderr, "sluice serve: --config FILE is required\n\n%s", kServeUsage);
    return 2;
  }

  policy::LoadResult loaded = policy::load_config_file(config_path);
  if (!loaded.config) {
    for (const policy::ConfigError& e : loaded.errors) {
      std::fprintf(stderr, "%s\n", e.text().c_str());
    }
    std::fprintf(stderr, "sluice serve: %zu error(s) in %s; not started\n", loaded.errors.size(),
                 config_path.c_str());
    return 1;
  }
  if (!observe::setup_logging(loaded.config->logging.level)) {
    spdlog::warn("unknown logging.level \"{}\", using info", loaded.config->logging.level);
  }

  Result<ServeStore> made = make_serve_store(*loaded.config);
  if (!made.ok()) {
    spdlog::error("{}", made.error().message);
    return 1;
  }
  std::shared_ptr<Store> store = made->store;
  // The Envoy RLS gRPC API (when `grpc` is set) runs over the same store; it
  // outlives the server, and the store outlives both.
  RlsRuntime rls(*store);
  if (std::vector<std::string> errors = rls.load(*loaded.config); !errors.empty()) {
    for (const std::string& e : errors) std::fprintf(stderr, "%s\n", e.c_str());
    std::fprintf(stderr,
                 "sluice serve: %zu error(s) in the RLS descriptor files of %s; not started\n",
                 errors.size(), loaded.config->rls->config_dir.c_str());
    return 1;
  }
  try {
    if (Status st = rls.listen(*loaded.config); !st.ok()) {
      spdlog::error("{}", st.error().message);
      return 1;
    }
    http::ServerOptions options;
    options.config_path = config_path;
    options.store_hooks = made->hooks;
    options.companion = &rls;
    options.make_forwarder = http::upstream_proxy_factory();  // the gateway proxy
    http::Server server(std::move(*loaded.config), store, std::move(options));
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
