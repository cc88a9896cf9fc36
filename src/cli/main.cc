// The `sluice` command: wires the subcommands together.
#include <cstdio>
#include <string_view>
#include <vector>

#include "cli/rls_query.h"
#include "cli/serve.h"
#include "cli/simulate.h"
#include "cli/validate.h"
#include "sluice/version.h"

namespace {

constexpr const char* kUsage = R"(sluice - rate limiting for APIs that scale

Usage:
  sluice serve --config FILE
                  Run the server: gateway, POST /v1/check, GET /v1/auth on
                  `listen`; /dashboard /metrics /admin/* on `admin`. SIGHUP
                  reloads, SIGTERM drains and exits. `sluice serve --help`.
  sluice rls query --address HOST:PORT --domain DOMAIN --descriptor KEY=VALUE[,...]
                  One Envoy RLS ShouldRateLimit call, its answer printed;
                  exit 0 OK, 2 OVER_LIMIT, 1 error. `sluice rls query --help`.
  sluice simulate [--scenario NAME | --trace FILE] [--format table|csv|json]
                  Replay traffic against all five algorithms on a simulated
                  clock; print allowed/denied counts and the most requests
                  allowed in any window-length interval.
                  Run `sluice simulate --help` for the options.
  sluice validate --config FILE
                  Check a config file (docs/CONFIG.md) without starting
                  anything; exit 0, or 1 with every error as
                  FILE:LINE:COLUMN: message.
  sluice --version
  sluice --help

Documentation: README.md and docs/ in the source tree.
)";

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::fputs(kUsage, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "--version" || args[0] == "version") {
    std::printf("sluice %s\n", sluice::kVersion);
    return 0;
  }
  const std::string_view command = args[0];
  const std::span<const std::string_view> rest(args.data() + 1, args.size() - 1);
  if (command == "serve") return sluice::cli::run_serve(rest);
  if (command == "rls") return sluice::cli::run_rls(rest);
  if (command == "simulate") return sluice::cli::run_simulate(rest);
  if (command == "validate") return sluice::cli::run_validate(rest);
  std::fprintf(stderr, "sluice: unknown command '%.*s'\n\n%s", static_cast<int>(command.size()),
               command.data(), kUsage);
  return 2;
}
