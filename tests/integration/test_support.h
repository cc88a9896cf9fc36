// Shared configs and helpers of the integration tests.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "http_client.h"
#include "sluice_process.h"

namespace sluice::test {

using Headers = std::vector<std::pair<std::string, std::string>>;

// The seed's tiers (examples/tiered-api.yaml) with refills of one token per
// hour, so that the counts are exact however slowly the test runs.
inline const std::string kTieredYaml = R"(
headers: [legacy]
policies:
  login: {algorithm: token_bucket, capacity: 5, refill_rate: 1/h}
default:
  key: ip
  limits: [{capacity: 100, refill_rate: 1/h}]
routes:
  - match: GET /api/status
    limits: [{capacity: 1000, refill_rate: 1/h}]
  - match: GET /api/search
    limits: [{capacity: 20, refill_rate: 1/h}]
  - match: POST /api/orders
    key: header:x-api-key
    limits: [{capacity: 10, refill_rate: 1/h}]
  - match: POST /api/auth/login
    limits: [login]
)";

// The default 429 body of a denial by the limit named `limit`, byte for byte.
inline std::string rate_limited_body(const std::string& limit) {
  return R"({"error":{"code":"RATE_LIMITED","message":"Too many requests. Please retry after the Retry-After period.","limit":")" +
         limit + "\"}}";
}

// Sends `count` identical requests on one keep-alive connection. Returns how
// many got 200 (or `ok_status`); fails the test if any other answer than
// ok_status/429 comes, or if an allowed request follows a denied one.
inline int count_allowed(const SluiceProcess& server, const std::string& method,
                         const std::string& target, int count, const Headers& headers = {},
                         const std::string& body = "", int ok_status = 200) {
  auto connection = server.connect();
  int allowed = 0;
  bool denied_seen = false;
  for (int i = 0; i < count; ++i) {
    const HttpResponse r = connection->request(method, target, headers, body);
    if (r.status == ok_status) {
      ++allowed;
      EXPECT_FALSE(denied_seen) << "request " << i << " allowed after a denial";
    } else {
      EXPECT_EQ(r.status, 429) << "request " << i << ": " << r.body;
      if (r.status != 429) return allowed;
      denied_seen = true;
    }
  }
  return allowed;
}

}  // namespace sluice::test
