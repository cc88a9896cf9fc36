// The loaded descriptor tree as JSON, for the admin port's GET /admin/rls:
// what envoyproxy/ratelimit's /rlconfig shows, in a form tools can read.
//
// {"domains":[{"domain":"api","file":"/etc/ratelimit/api.yaml","descriptors":[
//   {"key":"client","rate_limit":{"name":"per_client","unit":"hour",
//    "requests_per_unit":3},"shadow_mode":false,"quota_mode":false,
//    "detailed_metric":false,"descriptors":[]}]}]}
//
// Domains in name order, descriptors in file order; "value" only when the
// file gives one; "rate_limit" only when the descriptor has one: `unit` and
// `requests_per_unit` as DescriptorStatus.current_limit reports them, with
// `unit_multiplier` when not 1, or `unlimited`, or for a Sluice algorithm its
// fields (periods in seconds).
//
// Thread-safety: pure function.
#pragma once

#include <string>

#include "rls/config.h"

namespace sluice::rls {

std::string config_json(const RlsConfig& config);

}  // namespace sluice::rls
