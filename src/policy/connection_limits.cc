#include "policy/connection_limits.h"

#include <algorithm>

#include "util/open_files.h"

namespace sluice::policy {

size_t default_max_connections(size_t open_files, bool gateway) {
  const size_t usable = open_files > kReservedDescriptors + kAdminConnections + 32
                            ? open_files - kReservedDescriptors - kAdminConnections
                            : 32;
  return std::min(gateway ? usable / 2 : usable, kMaxDefaultConnections);
}

size_t default_max_connections(bool gateway) {
  return default_max_connections(util::raise_open_file_limit(), gateway);
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
