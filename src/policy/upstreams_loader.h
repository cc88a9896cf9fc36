// Loading `upstreams:` (docs/CONFIG.md, "upstreams"): each named upstream's
// servers, balance, health, retries, timeouts, pool size and TLS, every
// problem reported at its line through the config walker.
//
// Thread-safety: as the walker, one load at a time.
#pragma once

#include <string_view>
#include <vector>

#include "config/walker.h"
#include "policy/upstreams.h"

namespace sluice::policy {

// The names of `upstreams`, for "did you mean".
std::vector<std::string_view> upstream_names(const std::vector<Upstream>& upstreams);

// Reads the `upstreams:` mapping into `out` (the upstreams without an error).
void load_upstreams(config::Walker& walker, const config::Item& item, std::vector<Upstream>* out);

// The upstream `name` of `upstreams`, or null: then `at` is reported as
// naming no upstream (with the closest name suggested).
const Upstream* find_upstream(config::Walker& walker, const config::Item& at, std::string_view name,
                              const std::vector<Upstream>& upstreams);

}  // namespace sluice::policy
