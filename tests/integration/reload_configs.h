// The configs and series of the reload tests (SIGHUP, POST /admin/reload,
// watch_config): a config, its next version, and a broken one.
#pragma once

#include <string>

namespace sluice::test {

inline const std::string kBefore = R"(
headers: [legacy]
policies:
  login: {capacity: 3, refill_rate: 1/h}
routes:
  - match: GET /a
    limits: [{capacity: 2, refill_rate: 1/h}]
  - match: GET /b
    limits: [{capacity: 3, refill_rate: 1/h}]
)";

// /a unchanged, /b's limit changed, a new route /c.
inline const std::string kAfter = R"(
headers: [legacy]
policies:
  login: {capacity: 3, refill_rate: 1/h}
routes:
  - match: GET /a
    limits: [{capacity: 2, refill_rate: 1/h}]
  - match: GET /b
    limits: [{capacity: 5, refill_rate: 1/h}]
  - match: GET /c
    limits: [{capacity: 1, refill_rate: 1/h}]
)";

// Errors on its lines 5 and 7 (the config file's 7 and 9 after the
// harness's listen and admin lines).
inline const std::string kBroken = R"(
headers: [legacy]
routes:
  - match: GET /a
    limits: [{capacity: 0, refill_rate: 1/h}]
  - match: GET /b
    limits: [{capacity: 5, refil_rate: 1/h}]
)";

inline const std::string kReloadFailures = R"(sluice_config_reloads_total{result="failure"})";
inline const std::string kReloadSuccesses = R"(sluice_config_reloads_total{result="success"})";

}  // namespace sluice::test
