// Loading envoyproxy/ratelimit descriptor files, unchanged, with strict
// validation and `file:line:col: message` errors.
//
// Format (one domain per file):
//
//   domain: <non-empty, unique across files>
//   descriptors:
//     - key: <required, non-empty>
//       value: <optional; '*' anywhere is a wildcard>
//       rate_limit:                  # optional; absent = the value is whitelisted
//         unit: second|minute|hour|day|week|month|year   (any letter case)
//         requests_per_unit: <uint32; 0 refuses every request>
//         unlimited: <bool; no unit allowed with it>
//         name: <optional>
//         replaces: [{name: <other rule's name>}, ...]
//         unit_multiplier: <uint >= 1; the window is unit x multiplier>
//         # Sluice extension: any Sluice algorithm, any period.
//         algorithm: token_bucket|gcra|fixed_window|sliding_log|sliding_window
//         capacity: <uint>   refill_rate: "10/s" | "100/90s"      (token_bucket, gcra)
//         limit: <uint>      window: "90s" | "1m" | "2w"          (window algorithms)
//         # (requests_per_unit and unit may stand for capacity/refill or limit/window)
//       shadow_mode: <bool>       quota_mode: <bool>
//       detailed_metric: <bool>   value_to_metric: <bool>
//       share_threshold: <bool; only on a wildcard value>
//       metadata: <any map; returned while the descriptor is under its limit>
//       descriptors: [...]        # nested, same shape
//
// What envoyproxy/ratelimit accepts loads; what it rejects is rejected:
// unknown keys (with a "did you mean" hint), non-string keys, lists of
// anything but maps, floating-point values, wrong types, malformed YAML, an
// empty or duplicate domain, an empty key, a duplicate descriptor at one level
// (duplicate "key_value" composite keys, as envoyproxy/ratelimit names them),
// an invalid unit, a unit with unlimited, an empty replaces name or one naming
// its own rule, share_threshold without a wildcard. Sluice also rejects
// duplicate keys in one YAML map, which envoyproxy/ratelimit lets the last
// one win. A known key in a place where envoyproxy/ratelimit ignores it (say
// `unit` next to `key`) is ignored too, with a warning.
//
// Files are walked with the server config's walker (config/walker.h): every
// error is reported, not only the first, as "file:line:col: path: message",
// and Sluice's extension keys use its grammar (config/values/values.h) and limit
// block (config/limit_block.h). What is Envoy's stays here: YAML 1.1 scalars
// (rls/yaml11.h), units, and envoyproxy/ratelimit's own messages.
// Thread-safety: the functions share no state; call them from any thread.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "config/error.h"
#include "rls/config.h"

namespace sluice::rls {

struct RlsFile {
  std::string name;  // used in messages
  std::string text;
};

struct LoadOptions {
  // Several files may then define one domain, as envoyproxy/ratelimit's
  // MERGE_DOMAIN_CONFIG; a descriptor defined twice is still an error.
  bool merge_domains = false;
};

struct LoadResult {
  std::shared_ptr<const RlsConfig> config;    // null when `errors` is not empty
  std::vector<config::ConfigError> errors;    // text(): "file:line:col: path: message"
  std::vector<config::ConfigError> warnings;  // also in config->warnings

  bool ok() const { return errors.empty(); }
  // The errors, one per line.
  std::string error_text() const;
};

// Loads `files` in order.
LoadResult load_rls_config(std::span<const RlsFile> files, const LoadOptions& options = {});

// Loads every *.yaml and *.yml file under `dir` (subfolders included, names
// starting with '.' skipped), in path order. An empty folder gives a config
// with no domain, under which every request is allowed.
LoadResult load_rls_config_dir(const std::string& dir, const LoadOptions& options = {});

}  // namespace sluice::rls
