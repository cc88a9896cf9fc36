// The one argument parser of the `sluice` subcommands: "--name value" and
// "--name=value", a short alias ("-c FILE"), "--help"/"-h" on every
// subcommand, and one error message style ("unknown option '--x'", "--config
// needs a value"). Each subcommand lists its options and reads what was given.
//
// Thread-safety: pure function.
#pragma once

#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sluice::cli {

struct OptionSpec {
  std::string_view name;   // "--config"
  std::string_view alias;  // "-c", or "" for none
};

struct ParsedArgs {
  bool help = false;  // --help or -h was given
  std::string error;  // what is wrong with the arguments; "" when nothing
  std::map<std::string, std::string, std::less<>> values;  // by option name; the last one wins
  // Every (option name, value) given, in order, for options that may repeat.
  std::vector<std::pair<std::string, std::string>> given;

  std::optional<std::string> get(std::string_view name) const;
  // Every value given to `name`, in order.
  std::vector<std::string> get_all(std::string_view name) const;
};

// Every option takes a value. Anything not in `options` (or a missing
// value) is an error; parsing stops at the first.
ParsedArgs parse_args(std::span<const std::string_view> args, std::span<const OptionSpec> options);

// The start of a subcommand that needs --config: --help prints `usage` to
// stdout (exit 0); an argument error or no --config prints "sluice
// <command>: <error>" and `usage` to stderr (exit 2). When `exit_code` is
// set the caller returns it; otherwise `config` is the file to load.
struct ConfigCommand {
  ParsedArgs parsed;
  std::optional<int> exit_code;
  std::string config;
};
ConfigCommand start_config_command(std::string_view command, std::span<const std::string_view> args,
                                   std::span<const OptionSpec> options, std::string_view usage);

}  // namespace sluice::cli
