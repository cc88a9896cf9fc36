#include "policy/connection_limits.h"

#include <sys/resource.h>

#include <algorithm>

namespace sluice::policy {

namespace {

// The open-file limit, raised to its hard maximum first (the default soft
// limit, 1024 on most systems, is far below what a gateway needs).
size_t open_file_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1024;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  return limit.rlim_cur == RLIM_INFINITY ? size_t{1} << 20 : static_cast<size_t>(limit.rlim_cur);
}

}  // namespace

size_t default_max_connections(size_t open_files, bool gateway) {
  const size_t usable = open_files > kReservedDescriptors + kAdminConnections + 32
                            ? open_files - kReservedDescriptors - kAdminConnections
                            : 32;
  return std::min(gateway ? usable / 2 : usable, kMaxDefaultConnections);
}

size_t default_max_connections(bool gateway) {
  return default_max_connections(open_file_limit(), gateway);
}

size_t max_connections_in_force(const Config& config) {
  return config.server.max_connections != 0 ? config.server.max_connections
                                            : default_max_connections(config.upstream.has_value());
}

size_t max_held_in_force(const ServerLimits& server, size_t max_connections) {
  if (server.max_held != 0) return server.max_held;
  return std::max<size_t>(1, max_connections / 4);
}

}  // namespace sluice::policy
