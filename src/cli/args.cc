#include "cli/args.h"

#include <cstdio>

namespace sluice::cli {

std::optional<std::string> ParsedArgs::get(std::string_view name) const {
  const auto it = values.find(name);
  if (it == values.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> ParsedArgs::get_all(std::string_view name) const {
  std::vector<std::string> out;
  for (const auto& [n, v] : given) {
    if (n == name) out.push_back(v);
  }
  return out;
}

ParsedArgs parse_args(std::span<const std::string_view> args, std::span<const OptionSpec> options) {
  ParsedArgs parsed;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    if (arg == "--help" || arg == "-h") {
      parsed.help = true;
      continue;
    }
    std::string_view name = arg;
    std::optional<std::string_view> value;
    if (const size_t eq = arg.find('='); arg.starts_with("--") && eq != std::string_view::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    }
    const OptionSpec* spec = nullptr;
    for (const OptionSpec& o : options) {
      if (name == o.name || (!o.alias.empty() && name == o.alias)) spec = &o;
    }
    if (spec == nullptr) {
      parsed.error = "unknown option '" + std::string(arg) + "'";
      return parsed;
    }
    if (!value) {
      if (i + 1 >= args.size()) {
        parsed.error = std::string(spec->name) + " needs a value";
        return parsed;
      }
      value = args[++i];
    }
    parsed.values[std::string(spec->name)] = std::string(*value);
    parsed.given.emplace_back(spec->name, *value);
  }
  return parsed;
}

ConfigCommand start_config_command(std::string_view command, std::span<const std::string_view> args,
                                   std::span<const OptionSpec> options, std::string_view usage) {
  ConfigCommand c;
  c.parsed = parse_args(args, options);
  if (c.parsed.help) {
    std::fwrite(usage.data(), 1, usage.size(), stdout);
    c.exit_code = 0;
    return c;
  }
  const std::optional<std::string> config = c.parsed.get("--config");
  if (!c.parsed.error.empty() || !config) {
    const std::string& error =
        c.parsed.error.empty() ? std::string("--config FILE is required") : c.parsed.error;
    std::fprintf(stderr, "sluice %.*s: %s\n\n%.*s", static_cast<int>(command.size()),
                 command.data(), error.c_str(), static_cast<int>(usage.size()), usage.data());
    c.exit_code = 2;
    return c;
  }
  c.config = *config;
  return c;
}

}  // namespace sluice::cli
