// Loads and validates the YAML configuration (docs/CONFIG.md).
//
// Validation is strict and complete: unknown keys, wrong types, bad durations
// or rates, unknown policy names, duplicate routes and bad CIDRs are all
// reported, not only the first, each as `file:line:col: message`.
// Loading runs on the control plane (startup, reload) and may allocate freely.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/error.h"
#include "policy/config.h"

namespace sluice::policy {

using ConfigError = config::ConfigError;

struct LoadResult {
  std::optional<Config> config;  // set iff errors is empty
  std::vector<ConfigError> errors;
  // The config file, then every file and folder it names (consumers file,
  // token files, TLS files, JWT keys, deny body, RLS descriptor folder),
  // once each; also when the config is refused, as far as it was read.
  std::vector<std::string> files;
};

// Values given on the command line (`sluice serve --listen ...`) in place of
// the file's: they win over it, follow the same rules (an admin port off
// loopback still needs admin_token_file), and their errors name the option.
struct ConfigOverrides {
  std::optional<std::string> listen;    // --listen host:port
  std::optional<std::string> admin;     // --admin host:port
  std::optional<std::string> upstream;  // --upstream http://host:port[/base]
};

LoadResult load_config_file(const std::string& path, const ConfigOverrides& overrides = {});
// `name` stands for the file name in error messages.
LoadResult load_config_string(std::string_view yaml, const std::string& name,
                              const ConfigOverrides& overrides = {});

}  // namespace sluice::policy
