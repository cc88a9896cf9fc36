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
  sluice serve --config FILE [--listen HOST:PORT] [--admin HOST:PORT] [--upstream URL]
                  Run the server: the gateway (with `upstream`) or the
                  decision service on `listen`; POST /v1/check, POST
                  /v1/release and GET /v1/auth (on `decision_api.listen` when
                  set); the Envoy RLS API on `grpc`; /dashboard /metrics
                  /admin/* on `admin`. SIGHUP reloads, SIGTERM drains and
                  exits. `sluice serve --help`.
  sluice validate --config FILE [--listen HOST:PORT] [--admin HOST:PORT] [--upstream URL]
                  Check a config file (docs/CONFIG.md) and the RLS descriptor
                  files it names, without starting anything; exit 0 with a
                  summary, or 1 with every error as FILE:LINE:COLUMN: message.
                  `sluice validate --help`.
  sluice rls query --address HOST:PORT --domain DOMAIN --descriptor KEY=VALUE[,...]
                   [--hits N] [--timeout DURATION] [--cacert FILE]
                  One Envoy RLS ShouldRateLimit call, its answer printed;
                  exit 0 OK, 2 OVER_LIMIT, 1 error. `sluice rls query --help`.
  sluice simulate [--scenario NAME | --trace FILE] [--limit N] [--window DURATION]
                  [--delay DURATION] [--format table|csv|json]
                  Replay traffic against all five algorithms on a simulated
                  clock (scenarios boundary-burst, steady, bursty,
                  slow-upstream; or your own trace); print allowed/denied
                  counts and the most requests allowed in any window-length
                  interval. `sluice simulate --help`.
  sluice --version
  sluice --help

Documentation: README.md and docs/ in the source tree (/usr/share/doc/sluice
when installed from the package).
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
