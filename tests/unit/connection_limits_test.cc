// policy/connection_limits.h: server.max_connections and server.max_held in
// force, configured or derived.
#include "policy/connection_limits.h"

#include <gtest/gtest.h>

namespace sluice::policy {
namespace {

// The packaged systemd unit's open-file limit (LimitNOFILE=524288) gives
// 65,536, not what the descriptors allow: a TLS connection costs up to
// ~90 KB before its first request. Below the cap the limit decides, less
// 320 descriptors for the rest, halved for a gateway.
TEST(ConnectionLimits, TheDefaultMaxConnectionsIsCappedWhateverTheOpenFileLimit) {
  EXPECT_EQ(kMaxDefaultConnections, 65'536u);
  EXPECT_EQ(default_max_connections(524'288, false), 65'536u);
  EXPECT_EQ(default_max_connections(524'288, true), 65'536u);
  EXPECT_EQ(default_max_connections(size_t{1} << 20, false), 65'536u);
  EXPECT_EQ(default_max_connections(20'000, false), 19'680u);
  EXPECT_EQ(default_max_connections(20'000, true), 9'840u);
  EXPECT_EQ(default_max_connections(65'856, false), 65'536u);  // exactly the cap
  EXPECT_EQ(default_max_connections(1'024, false), 704u);
  EXPECT_EQ(default_max_connections(100, false), 32u);  // a floor, not an underflow
  // This process: whatever its limit, within the cap.
  EXPECT_LE(default_max_connections(false), 65'536u);
}

TEST(ConnectionLimits, MaxConnectionsInForceIsTheConfiguredValueWhenSet) {
  Config config;
  config.server.max_connections = 300;
  EXPECT_EQ(max_connections_in_force(config), 300u);
  config.server.max_connections = 0;
  EXPECT_LE(max_connections_in_force(config), kMaxDefaultConnections);
  EXPECT_GE(max_connections_in_force(config), 32u);
}

TEST(ConnectionLimits, MaxHeldIsAQuarterOfTheConnectionsUnlessSet) {
  ServerLimits server;
  EXPECT_EQ(max_held_in_force(server, 65'536), 16'384u);
  EXPECT_EQ(max_held_in_force(server, 8), 2u);
  EXPECT_EQ(max_held_in_force(server, 3), 1u);  // at least one
  server.max_held = 10;
  EXPECT_EQ(max_held_in_force(server, 65'536), 10u);
  EXPECT_EQ(max_held_in_force(server, 8), 10u);  // as configured, even above
}

}  // namespace
}  // namespace sluice::policy
