// How many connections and held requests a server takes on at once: the
// values of server.max_connections and server.max_held in force, the
// configured ones or the defaults derived here. Every port that counts connections against
// server.max_connections asks max_connections_in_force().
//
// Thread-safety: default_max_connections() raises the process's open-file
// soft limit (once is enough; calling it again changes nothing); the others
// are pure.
#pragma once

#include <cstddef>

#include "policy/config.h"

namespace sluice::policy {

// Connections the admin port may hold, beside server.max_connections of the
// public ports, so that /metrics and /healthz answer while those are full.
inline constexpr size_t kAdminConnections = 64;
// Descriptors kept for what is not a client connection: listeners, the
// upstream pool's idle connections, Redis, log files, the gRPC server.
inline constexpr size_t kReservedDescriptors = 256;
// The most connections the default allows, whatever the open-file limit: a
// TLS connection costs up to ~90 KB before its first request, and the
// packaged unit's limit (524,288) would let that reach tens of gigabytes.
inline constexpr size_t kMaxDefaultConnections = 65'536;

// server.max_connections when not set, for a process that may open
// `open_files` descriptors: that less the reserved descriptors, halved for a
// gateway (each client connection may hold an upstream one), at most
// kMaxDefaultConnections.
size_t default_max_connections(size_t open_files, bool gateway);
// The same for this process, its open-file limit raised to its hard maximum
// first.
size_t default_max_connections(bool gateway);

// server.max_connections as configured, else default_max_connections().
size_t max_connections_in_force(const Config& config);

// server.max_held as configured, else a quarter of `max_connections` (the
// value in force), at least 1: each held request keeps a connection open,
// and holding may never take more than a quarter of the connections from
// clients whose requests go on at once.
size_t max_held_in_force(const ServerLimits& server, size_t max_connections);

}  // namespace sluice::policy
