// What `sluice serve`, `sluice validate` and every reload load, all or
// nothing, through this one function: the server config file, the Envoy RLS
// descriptor files it names (rls.config_dir), and every limit of both checked
// against the store the config asks for (Store::check_limit: a limit the
// Redis store cannot count exactly is an error at its file:line:col).
//
// Thread-safety: pure function (it reads files).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/error.h"
#include "policy/config.h"
#include "policy/config_loader.h"
#include "rls/config.h"
#include "sluice/limit.h"
#include "sluice/result.h"

namespace sluice::cli {

struct Deployment {
  std::optional<policy::Config> config;       // set iff errors is empty
  std::shared_ptr<const rls::RlsConfig> rls;  // set when the config has `rls`
  std::vector<config::ConfigError> errors;    // every one, in file order
  std::vector<config::ConfigError> warnings;  // descriptor keys with no effect
  // How many of `errors` are in the RLS descriptor files, and their folder.
  size_t descriptor_errors = 0;
  std::string descriptor_dir;
  // The config file and every file and folder it names, the descriptor
  // folder included (policy::LoadResult::files): what watch_config watches.
  std::vector<std::string> files;

  bool ok() const { return errors.empty(); }
};

// Whether the store can apply a limit (Store::check_limit); empty: it can.
using LimitCheck = std::function<Status(const Limit&)>;
// The check of the store a loaded config is served from: the store its
// `store` section describes (startup, validate) or the one in service (reload).
using StoreCheck = std::function<LimitCheck(const policy::Config&)>;

// `overrides`: the command line's --listen, --admin, --upstream.
Deployment load_deployment(const std::string& config_path, const policy::ConfigOverrides& overrides,
                           const StoreCheck& store_check);

}  // namespace sluice::cli
