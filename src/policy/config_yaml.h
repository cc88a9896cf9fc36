// The server config written back as YAML that the loader (config_loader.h)
// reads: load_config_string(to_yaml(c)) gives a Config equal to c (config.h:
// positions in the file aside). Every setting is written, defaults included,
// in the grammar of docs/CONFIG.md, so the text is also a complete, explicit
// version of the file it came from.
//
// Used by the config fuzz target (fuzz/config.cc: a config that loads
// re-serialises to one that loads the same) and its unit tests.
//
// Thread-safety: a pure function.
#pragma once

#include <string>

#include "policy/config.h"
#include "sluice/limit.h"

namespace sluice::policy {

std::string to_yaml(const Config& config);

// One limit as the limit block of docs/CONFIG.md, in flow style:
// "{algorithm: gcra, capacity: 10, refill_rate: 2/1s}".
std::string limit_to_yaml(const Limit& limit);

}  // namespace sluice::policy
