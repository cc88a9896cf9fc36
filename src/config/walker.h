// Walking a YAML config document: the one walker of every config file
// Sluice reads. It checks the structure (mappings with known, unique, plain
// keys; lists; scalars), parses values with the grammar of config/values/values.h,
// and reports every problem it finds (not only the first) as a ConfigError
// at the value's line and column, prefixed by its YAML path:
//
//   tiered.yaml:12:5: routes[1].limits[0].capacity: must be a positive integer, got "ten"
//
// Each check reports and returns nothing, so a loader carries on with the
// rest of the file. The server config (src/policy/config_loader.cc) and the
// Envoy RLS descriptor files (src/rls/config_loader.cc) are walked with it;
// the RLS layer adds YAML 1.1 scalar typing on top.
//
// Thread-safety: a Walker is used by one thread; walkers share nothing.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/error.h"
#include "config/values/values.h"

namespace sluice::config {

using Keys = std::vector<std::string_view>;

// "a, b, c".
std::string join(const Keys& keys);
// "routes[1]" + "limits" -> "routes[1].limits"; "" + "listen" -> "listen".
std::string child_path(const std::string& path, std::string_view key);
// "routes" + 1 -> "routes[1]".
std::string index_path(const std::string& path, size_t i);

// A value in a document, where to point at it, and its YAML path.
struct Item {
  YAML::Node node;
  YAML::Mark mark;   // the value's position, or its key's when the value is empty
  std::string path;  // "routes[1].limits[0].capacity"
  int line() const { return mark.is_null() ? 0 : mark.line + 1; }
};

// The entries of a mapping whose keys were checked (plain, unique; known when
// a list of keys was given), in file order.
struct Mapping {
  Item self;
  struct Entry {
    std::string key;
    YAML::Node key_node;
    YAML::Mark key_mark;
    Item value;
  };
  std::vector<Entry> entries;
  const Item* get(std::string_view key) const;
  const Entry* entry(std::string_view key) const;
};

// What a load found: errors refuse the file, warnings do not.
struct Diagnostics {
  std::vector<ConfigError> errors;
  std::vector<ConfigError> warnings;
};

// A secret kept in a file (a bearer token): its resolved path and content.
struct Secret {
  std::string path;
  std::string value;
};

class Walker {
 public:
  // `file` names the file in messages and is the base of relative paths.
  Walker(std::string file, Diagnostics& diagnostics);

  const std::string& file() const { return file_; }
  size_t error_count() const { return diagnostics_.errors.size(); }

  // The one document of `text`. Null (nothing) for an empty file; nullopt,
  // with the error reported, for a syntax error or a second document.
  std::optional<Item> document(std::string_view text);

  SourceMark mark(const YAML::Mark& m) const;
  // Where `item` is, with its YAML path.
  SourceMark where(const Item& item) const;
  // "path: message" at `mark` (just the message when the path is empty).
  void error(const YAML::Mark& mark, const std::string& path, std::string_view message);
  void error(const Item& item, std::string_view message) { error(item.mark, item.path, message); }
  void warning(const YAML::Mark& mark, const std::string& path, std::string_view message);

  // How a node appears in "got ..." messages: "\"text\"", "a list", "a
  // mapping" or "nothing".
  static std::string describe(const YAML::Node& node);

  // A mapping: keys must be plain scalars and unique; with `known`, a key
  // not in it is reported with the closest known key suggested. `what` ends
  // "must be <what>, got ..." when the value is not a mapping.
  std::optional<Mapping> mapping(const Item& item, const Keys* known, std::string_view what);
  // Reports `entry` as a key not among `known` ("unknown key; did you mean ...").
  void unknown_key(const Mapping::Entry& entry, const Keys& known);
  std::optional<std::vector<Item>> sequence(const Item& item, std::string_view what);
  std::optional<std::string> scalar(const Item& item, std::string_view what);

  // A scalar parsed by one of config/values/values.h's functions (or any function
  // returning Result<T> whose message completes "<path>: ").
  template <class T, class Parse>
  std::optional<T> parsed(const Item& item, std::string_view what, Parse parse) {
    const std::optional<std::string> text = scalar(item, what);
    if (!text) return std::nullopt;
    Result<T> r = parse(*text);
    if (!r.ok()) {
      error(item, r.error().message);
      return std::nullopt;
    }
    return std::move(r).value();
  }

  // true / True / TRUE or false / False / FALSE.
  std::optional<bool> boolean(const Item& item);
  // A whole number in [min, max]; `what` describes the range ("a whole number from 1 to 10").
  std::optional<uint64_t> integer(const Item& item, uint64_t min, uint64_t max,
                                  std::string_view what);
  // 1 to Limit::kMaxLimit: a capacity or a limit.
  std::optional<uint64_t> count(const Item& item);
  std::optional<Nanos> duration(const Item& item, bool allow_zero);
  // One of `choices`: its index. Anything else is reported with the closest choice.
  std::optional<size_t> choice(const Item& item, const Keys& choices);
  std::optional<HostPort> host_port(const Item& item, bool allow_port_zero);
  // A path, relative to the folder of this file when it is not absolute.
  // `what` says what it names ("a file path", "a folder path").
  std::optional<std::string> path(const Item& item, std::string_view what = "a file path");
  // A bearer token kept in the file `item` names: the file's trailing newline
  // is not part of it, and it must be visible ASCII without spaces, so that
  // what a client sends in a header is exactly what the file holds. `what`
  // names the secret in messages ("the token file ...").
  std::optional<Secret> secret_file(const Item& item, std::string_view what = "token");

  // Every path path() and secret_file() resolved, once each, in the order
  // they were asked for: the files and folders this file names (what
  // `watch_config` watches).
  const std::vector<std::string>& named_paths() const { return named_paths_; }

 private:
  std::string file_;
  Diagnostics& diagnostics_;
  std::vector<std::string> named_paths_;
};

}  // namespace sluice::config
