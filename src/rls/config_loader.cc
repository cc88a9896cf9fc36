#include "rls/config_loader.h"

#include <google/protobuf/struct.pb.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <limits>

#include "config/files.h"
#include "config/limit_block.h"
#include "config/walker.h"
#include "rls/matcher.h"
#include "rls/yaml11.h"

namespace sluice::rls {
namespace {

using config::Item;
using config::Keys;
using config::Mapping;
using config::quoted;
using config::Walker;

constexpr size_t kMaxDescriptorFileBytes = 16 * 1024 * 1024;

// Where each key may appear. envoyproxy/ratelimit checks every map key of a
// file against one list and ignores known keys in the wrong place; Sluice
// knows the places, ignores (with a warning) what it ignores, and accepts its
// own extension keys only where they mean something.
const Keys kRootKeys = {"domain", "descriptors"};
const Keys kDescriptorKeys = {
    "key",        "value",           "rate_limit",      "descriptors",     "shadow_mode",
    "quota_mode", "detailed_metric", "value_to_metric", "share_threshold", "metadata"};
const Keys kRateLimitKeys = {
    "unit",      "requests_per_unit", "unlimited",   "name",  "replaces", "unit_multiplier",
    "algorithm", "capacity",          "refill_rate", "limit", "window",   "block"};
const Keys kReplacesKeys = {"name"};
// The keys envoyproxy/ratelimit knows, wherever they are.
const Keys kEnvoyKeys = {"domain",
                         "key",
                         "value",
                         "descriptors",
                         "rate_limit",
                         "unit",
                         "requests_per_unit",
                         "unlimited",
                         "shadow_mode",
                         "quota_mode",
                         "name",
                         "replaces",
                         "detailed_metric",
                         "value_to_metric",
                         "share_threshold",
                         "metadata"};
// Sluice's own keys, valid only inside rate_limit.
const Keys kExtensionKeys = {"unit_multiplier", "algorithm", "capacity",
                             "refill_rate",     "limit",     "window"};
constexpr std::string_view kAlgorithmHint =
    "`algorithm` (token_bucket, gcra, fixed_window, sliding_log or sliding_window)";

bool contains(const Keys& keys, std::string_view key) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

// 'text' in single quotes: how envoyproxy/ratelimit's own messages show names.
std::string single_quoted(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out.push_back('\'');
  out.append(text);
  out.push_back('\'');
  return out;
}

// --- The loader ---

// The fields of one rate_limit block, each the Item it was written at.
struct RateLimitFields {
  std::optional<Item> unit;
  std::optional<Item> requests_per_unit;
  std::optional<Item> unlimited;
  std::optional<Item> unit_multiplier;
  std::vector<Item> extension;  // algorithm, capacity, ...: what `block` points into
  config::LimitBlock block;
  std::string unit_text;
  uint64_t rpu = 0;
  uint64_t multiplier = 1;
  bool is_unlimited = false;
};

class Loader {
 public:
  Loader(const LoadOptions& options, config::Diagnostics& diagnostics)
      : options_(options), diagnostics_(diagnostics) {}

  void load_file(const RlsFile& file) {
    config_.files.push_back(file.name);
    Walker walker(file.name, diagnostics_);
    walker_ = &walker;
    const size_t first_error = diagnostics_.errors.size();
    if (std::optional<Item> root = walker.document(file.text)) {
      try {
        load_root(*root);
      } catch (const YAML::Exception& e) {
        walker.error(e.mark, "", "malformed YAML: " + e.msg);
      }
    }
    // This file's errors read top down; files stay in load order.
    std::vector<config::ConfigError> mine(
        diagnostics_.errors.begin() + static_cast<std::ptrdiff_t>(first_error),
        diagnostics_.errors.end());
    config::sort_by_position(mine);
    std::copy(mine.begin(), mine.end(),
              diagnostics_.errors.begin() + static_cast<std::ptrdiff_t>(first_error));
    walker_ = nullptr;
  }

  std::shared_ptr<const RlsConfig> finish() {
    for (const config::ConfigError& w : diagnostics_.warnings) config_.warnings.push_back(w);
    if (!diagnostics_.errors.empty()) return nullptr;
    return std::make_shared<const RlsConfig>(std::move(config_));
  }

 private:
  // Composite keys ("key_value") already defined at one level, as
  // envoyproxy/ratelimit names descriptors: two that spell the same are
  // duplicates there, so they are here.
  using Composites = StringMap<SourceMark>;

  Walker& walker() { return *walker_; }

  // Walks a mapping, checking its keys as envoyproxy/ratelimit would:
  // non-string keys (YAML 1.1: `1:` is an integer) are errors, known keys in
  // the wrong place warnings, extension keys outside rate_limit errors.
  // Calls on_field(entry) for the keys in `allowed`.
  template <class OnField>
  void fields(const Item& item, const Keys& allowed, std::string_view what, OnField on_field) {
    const std::optional<Mapping> m = walker().mapping(item, nullptr, what);
    if (!m) return;
    for (const Mapping::Entry& entry : m->entries) {
      if (resolve_scalar(entry.key_node) != ScalarKind::kString) {
        walker().error(entry.key_mark, item.path, "key is not of type string: " + entry.key);
      } else if (contains(allowed, entry.key)) {
        on_field(entry);
      } else if (contains(kExtensionKeys, entry.key)) {
        walker().error(entry.key_mark, entry.value.path, "valid only inside rate_limit");
      } else if (contains(kEnvoyKeys, entry.key)) {
        walker().warning(entry.key_mark, entry.value.path, "has no effect here and is ignored");
        validate_tree(entry.value, entry.key == "metadata");
      } else {
        walker().unknown_key(entry, allowed);
      }
    }
  }

  // The checks envoyproxy/ratelimit applies to every part of a file, for
  // parts Sluice otherwise ignores.
  void validate_tree(const Item& item, bool free_form) {
    if (free_form) return;
    if (item.node.IsMap()) {
      fields(item, kEnvoyKeys, "a mapping", [&](const Mapping::Entry& entry) {
        validate_tree(entry.value, entry.key == "metadata");
      });
    } else if (item.node.IsSequence()) {
      // Named: in C++20 a range-for over *(a temporary optional) reads the
      // vector after the optional is gone (GCC's Release build says so).
      const std::optional<std::vector<Item>> elements = walker().sequence(item, "a list");
      if (!elements) return;
      for (const Item& element : *elements) {
        if (!element.node.IsMap()) {
          walker().error(element,
                         "a list may only hold mappings, got " + Walker::describe(element.node));
          continue;
        }
        validate_tree(element, false);
      }
    } else if (item.node.IsScalar() && resolve_scalar(item.node) == ScalarKind::kFloat) {
      float_error(item);
    }
  }

  void float_error(const Item& item) {
    walker().error(item, "floating-point value " + config::quoted(item.node.Scalar()) +
                             " is not allowed (quote it to make it a string)");
  }

  // A null value reads as the empty string, false or 0, as envoyproxy/ratelimit reads it.
  bool read_string(const Item& item, std::string* out) {
    if (item.node.IsNull()) {
      out->clear();
      return true;
    }
    if (item.node.IsScalar() && resolve_scalar(item.node) == ScalarKind::kFloat) {
      float_error(item);
      return false;
    }
    const std::optional<std::string> text = walker().scalar(item, "a string");
    if (!text) return false;
    *out = *text;
    return true;
  }

  bool read_uint(const Item& item, uint64_t max, std::string_view what, uint64_t* out) {
    if (item.node.IsNull()) {
      *out = 0;
      return true;
    }
    if (item.node.IsScalar() && resolve_scalar(item.node) == ScalarKind::kFloat) {
      float_error(item);
      return false;
    }
    Yaml11Int value;
    if (!item.node.IsScalar() || resolve_scalar(item.node) != ScalarKind::kInt ||
        !parse_yaml11_int(item.node.Scalar(), &value) || (value.negative && value.magnitude != 0) ||
        value.magnitude > max) {
      walker().error(item, "must be " + std::string(what) + ", got " + Walker::describe(item.node));
      return false;
    }
    *out = value.magnitude;
    return true;
  }

  bool read_bool(const Item& item, bool* out) {
    if (item.node.IsNull()) {
      *out = false;
      return true;
    }
    if (item.node.IsScalar() && resolve_scalar(item.node) == ScalarKind::kFloat) {
      float_error(item);
      return false;
    }
    if (!item.node.IsScalar() || resolve_scalar(item.node) != ScalarKind::kBool) {
      walker().error(item, "must be true or false, got " + Walker::describe(item.node));
      return false;
    }
    *out = yaml11_bool(item.node.Scalar()) == 1;
    return true;
  }

  void load_root(const Item& root) {
    if (root.node.IsNull()) {
      walker().error(YAML::Mark(), "", "config file cannot have empty domain");
      return;
    }
    std::string domain_name;
    std::optional<Item> domain_item;
    std::optional<Item> descriptors;
    fields(root, kRootKeys,
           "a mapping with domain: and descriptors:", [&](const Mapping::Entry& entry) {
             if (entry.key == "domain") {
               read_string(entry.value, &domain_name);
               domain_item = entry.value;
             } else {
               descriptors = entry.value;
             }
           });
    if (!root.node.IsMap()) return;

    // A rejected domain still has its descriptors checked, into a scratch tree.
    DescriptorLevel scratch;
    Composites scratch_composites;
    DescriptorLevel* level = &scratch;
    Composites* composites = &scratch_composites;
    const SourceMark domain_mark = walker().mark(domain_item ? domain_item->mark : root.mark);
    if (domain_name.empty()) {
      if (domain_item) {
        walker().error(*domain_item, "config file cannot have empty domain");
      } else {
        walker().error(root.mark, "", "config file cannot have empty domain");
      }
    } else if (auto it = config_.domains.find(domain_name); it != config_.domains.end()) {
      if (options_.merge_domains) {
        level = &it->second.root;
        composites = &root_composites_[domain_name];
      } else {
        walker().error(*domain_item, "duplicate domain " + single_quoted(domain_name) +
                                         " (first in " + it->second.mark.text() + ")");
      }
    } else {
      Domain& domain = config_.domains[domain_name];
      domain.name = domain_name;
      domain.mark = domain_mark;
      level = &domain.root;
      composites = &root_composites_[domain_name];
    }
    if (descriptors) read_descriptors(*descriptors, domain_name + ".", level, composites);
  }

  void read_descriptors(const Item& list, const std::string& parent_stat, DescriptorLevel* level,
                        Composites* composites) {
    if (list.node.IsNull()) return;
    const std::optional<std::vector<Item>> items = walker().sequence(list, "a list of descriptors");
    if (!items) return;
    for (const Item& element : *items) {
      if (!element.node.IsMap()) {
        walker().error(element,
                       "a list may only hold mappings, got " + Walker::describe(element.node));
        continue;
      }
      read_descriptor(element, parent_stat, level, composites);
    }
  }

  void read_descriptor(const Item& item, const std::string& parent_stat, DescriptorLevel* level,
                       Composites* composites) {
    DescriptorNode node;
    node.mark = walker().mark(item.mark);
    std::optional<Item> rate_limit, children, share_threshold;
    fields(item, kDescriptorKeys, "a descriptor", [&](const Mapping::Entry& entry) {
      const std::string& name = entry.key;
      const Item& v = entry.value;
      if (name == "key") {
        read_string(v, &node.key);
      } else if (name == "value") {
        read_string(v, &node.value);
      } else if (name == "rate_limit") {
        rate_limit = v;
      } else if (name == "descriptors") {
        children = v;
      } else if (name == "shadow_mode") {
        read_bool(v, &node.shadow_mode);
      } else if (name == "quota_mode") {
        read_bool(v, &node.quota_mode);
      } else if (name == "detailed_metric") {
        read_bool(v, &node.detailed_metric);
      } else if (name == "value_to_metric") {
        read_bool(v, &node.value_to_metric);
      } else if (name == "share_threshold") {
        read_bool(v, &node.share_threshold);
        share_threshold = v;
      } else if (name == "metadata") {
        read_metadata(v, &node);
      }
    });

    std::string composite = node.key;
    if (!node.value.empty()) composite += "_" + node.value;
    node.stat_key = parent_stat + composite;
    bool insert = true;
    if (node.key.empty()) {
      walker().error(item, "descriptor has empty key");
      insert = false;
    } else if (auto [first, inserted] = composites->emplace(composite, node.mark); !inserted) {
      walker().error(item, "duplicate descriptor composite key " + single_quoted(node.stat_key) +
                               " (first at " + first->second.text() + ")");
      insert = false;
    }
    if (node.key.find('*') != std::string::npos) {
      walker().warning(item.mark, item.path,
                       "a '*' in a key is matched literally; wildcards apply to values");
    }

    if (rate_limit) node.rule = read_rate_limit(*rate_limit);
    if (node.share_threshold && composite.find('*') == std::string::npos) {
      walker().error(*share_threshold,
                     "share_threshold can only be used with wildcard values (containing '*'), "
                     "but found key " +
                         single_quoted(composite));
    }
    if (node.value.find('*') != std::string::npos) node.glob_parts = split_glob(node.value);

    Composites child_composites;
    if (children) {
      read_descriptors(*children, node.stat_key + ".", &node.children, &child_composites);
    }
    if (!insert) return;
    const size_t index = level->nodes.size();
    if (node.value.empty()) {
      level->by_key.emplace(node.key, index);
    } else {
      level->by_value[node.key].emplace(node.value, index);
      if (node.is_wildcard()) level->wildcards.push_back(index);
    }
    level->nodes.push_back(std::move(node));
  }

  void read_metadata(const Item& item, DescriptorNode* node) {
    if (item.node.IsNull()) return;
    if (!item.node.IsMap()) {
      walker().error(item, "must be a mapping, got " + Walker::describe(item.node));
      return;
    }
    auto metadata = std::make_shared<google::protobuf::Struct>();
    for (auto it = item.node.begin(); it != item.node.end(); ++it) {
      to_protobuf_value(it->second, &(*metadata->mutable_fields())[it->first.Scalar()]);
    }
    node->metadata = std::move(metadata);
  }

  std::optional<RateLimitRule> read_rate_limit(const Item& item) {
    // `rate_limit:` alone: no rule, as in envoyproxy/ratelimit.
    if (item.node.IsNull()) return std::nullopt;
    if (!item.node.IsMap()) {
      walker().error(item, "must be a mapping, got " + Walker::describe(item.node));
      return std::nullopt;
    }
    RateLimitRule rule;
    RateLimitFields f;
    std::vector<std::pair<std::string, Item>> replaces;
    bool ok = true;
    fields(item, kRateLimitKeys, "a mapping", [&](const Mapping::Entry& entry) {
      const std::string& name = entry.key;
      const Item& v = entry.value;
      if (name == "unit") {
        ok = read_string(v, &f.unit_text) && ok;
        f.unit = v;
      } else if (name == "requests_per_unit") {
        ok = read_uint(v, std::numeric_limits<uint32_t>::max(), "an unsigned 32-bit integer",
                       &f.rpu) &&
             ok;
        f.requests_per_unit = v;
      } else if (name == "unlimited") {
        ok = read_bool(v, &f.is_unlimited) && ok;
        f.unlimited = v;
      } else if (name == "name") {
        ok = read_string(v, &rule.name) && ok;
      } else if (name == "replaces") {
        ok = read_replaces(v, &replaces) && ok;
      } else if (name == "unit_multiplier") {
        const bool read = read_uint(v, std::numeric_limits<uint32_t>::max(),
                                    "an integer of at least 1", &f.multiplier);
        if (read && f.multiplier == 0) {
          walker().error(v, "must be an integer of at least 1, got " + Walker::describe(v.node));
        }
        ok = read && f.multiplier != 0 && ok;
        f.unit_multiplier = v;
      } else {
        f.extension.push_back(v);  // the limit block's fields, read by read_limit
      }
    });
    // The block points into `f.extension`, which no longer grows.
    for (const Item& e : f.extension) {
      const std::string_view key = std::string_view(e.path).substr(e.path.rfind('.') + 1);
      if (key == "algorithm") f.block.algorithm = &e;
      if (key == "capacity") f.block.capacity = &e;
      if (key == "refill_rate") f.block.refill_rate = &e;
      if (key == "limit") f.block.limit = &e;
      if (key == "window") f.block.window = &e;
      if (key == "block") f.block.block = &e;
    }
    for (const auto& [name, at] : replaces) {
      if (name.empty()) {
        walker().error(at, "should not have an empty replaces entry");
        ok = false;
      } else if (name == rule.name) {
        walker().error(at, "replaces should not contain name of same descriptor");
        ok = false;
      } else {
        rule.replaces.push_back(name);
      }
    }
    if (!ok) return rule;
    if (f.block.algorithm != nullptr) {
      build_algorithm(item, f, &rule);
    } else {
      build_envoy(item, f, &rule);
    }
    return rule;
  }

  bool read_replaces(const Item& item, std::vector<std::pair<std::string, Item>>* out) {
    if (item.node.IsNull()) return true;
    const std::optional<std::vector<Item>> items = walker().sequence(item, "a list of {name: ...}");
    if (!items) return false;
    bool ok = true;
    for (const Item& entry : *items) {
      if (!entry.node.IsMap()) {
        walker().error(entry, "a list may only hold mappings, got " + Walker::describe(entry.node));
        ok = false;
        continue;
      }
      std::string name;
      fields(entry, kReplacesKeys, "a mapping",
             [&](const Mapping::Entry& field) { ok = read_string(field.value, &name) && ok; });
      out->emplace_back(name, entry);
    }
    return ok;
  }

  // Sluice's `block` (a lockout) beside requests_per_unit and unit; false
  // after reporting a bad duration. (With the limit's own fields,
  // config::read_limit reads it.)
  bool read_block(const RateLimitFields& f, LimitSpec* spec) {
    if (f.block.block == nullptr) return true;
    const std::optional<Nanos> d = walker().duration(*f.block.block, false);
    if (d) spec->block = *d;
    return d.has_value();
  }

  // The unit a rule names, or an error at it (or at the block when absent).
  std::optional<Unit> read_unit(const Item& block, const RateLimitFields& f) {
    Unit unit = Unit::kUnknown;
    if (parse_unit(f.unit_text, &unit)) return unit;
    walker().error(f.unit ? *f.unit : block,
                   "invalid rate limit unit " + single_quoted(f.unit_text) +
                       " (valid units: " + std::string(unit_names()) + ")");
    return std::nullopt;
  }

  // envoyproxy/ratelimit's rule: a fixed window of one unit (times unit_multiplier).
  void build_envoy(const Item& block, const RateLimitFields& f, RateLimitRule* rule) {
    bool orphan = false;
    for (const Item* field :
         {f.block.capacity, f.block.refill_rate, f.block.limit, f.block.window}) {
      if (field != nullptr) {
        walker().error(*field, "needs " + std::string(kAlgorithmHint));
        orphan = true;
      }
    }
    if (orphan) return;
    Unit unit = Unit::kUnknown;
    const bool valid_unit = parse_unit(f.unit_text, &unit);
    if (f.is_unlimited) {
      if (valid_unit) walker().error(*f.unit, "should not specify rate limit unit when unlimited");
      rule->unlimited = true;
      return;
    }
    if (!read_unit(block, f)) return;
    rule->requests_per_unit = static_cast<uint32_t>(f.rpu);
    rule->unit = unit;
    rule->window = unit_length(unit) * static_cast<int64_t>(f.multiplier);
    if (f.rpu == 0) return;  // refuses every request
    LimitSpec spec;
    if (!read_block(f, &spec)) return;
    spec.algorithm = Algorithm::kFixedWindow;
    spec.limit = f.rpu;
    spec.window = rule->window;
    rule->limit = config::create_limit(walker(), block, spec);
  }

  // Sluice's extension: any algorithm, any period, in the server config's
  // limit-block syntax (config/limit_block.h) or with requests_per_unit and unit.
  void build_algorithm(const Item& block, const RateLimitFields& f, RateLimitRule* rule) {
    if (f.unlimited) {
      walker().error(*f.unlimited, "cannot be combined with `algorithm`");
      return;
    }
    // Envoy never tells its rate limit service when a request ends, so a
    // concurrency slot could never be given back.
    const Item* named = f.block.algorithm;
    if (named != nullptr && named->node.IsScalar() &&
        named->node.Scalar() == algorithm_name(Algorithm::kConcurrency)) {
      walker().error(*named,
                     "concurrency is not available to Envoy's rate limit API: Envoy never says "
                     "when a request ends, so its slot could not be given back; use it on a "
                     "route of `sluice serve` or a policy of /v1/check");
      return;
    }
    const bool generic =
        f.requests_per_unit.has_value() || f.unit.has_value() || f.unit_multiplier.has_value();
    if (f.block.has_own_fields() && generic) {
      walker().error(block,
                     "use either the limit's own fields (capacity and refill_rate, or limit and "
                     "window) or `requests_per_unit` and `unit`, not both");
      return;
    }
    std::optional<Limit> limit;
    if (!generic) {
      limit = config::read_limit(walker(), block, f.block, "`requests_per_unit` and `unit`");
    } else {
      const std::optional<Algorithm> algorithm = config::read_algorithm(walker(), f.block);
      const std::optional<Unit> unit = read_unit(block, f);
      if (!algorithm || !unit) return;
      const Nanos period = unit_length(*unit) * static_cast<int64_t>(f.multiplier);
      LimitSpec spec;
      if (!read_block(f, &spec)) return;
      spec.algorithm = *algorithm;
      if (*algorithm == Algorithm::kTokenBucket || *algorithm == Algorithm::kGcra) {
        spec.capacity = f.rpu;
        spec.refill_tokens = f.rpu;
        spec.refill_period = period;
      } else {
        spec.limit = f.rpu;
        spec.window = period;
      }
      limit = config::create_limit(walker(), block, spec);
    }
    if (!limit) return;
    rule->sluice_algorithm = true;
    rule->limit = *limit;
    rule->requests_per_unit = static_cast<uint32_t>(
        std::min<uint64_t>(limit->size(), std::numeric_limits<uint32_t>::max()));
    rule->unit = unit_of_length(limit->period());
    rule->window = limit->period();
  }

  const LoadOptions& options_;
  config::Diagnostics& diagnostics_;
  Walker* walker_ = nullptr;  // of the file being loaded
  RlsConfig config_;
  std::map<std::string, Composites, std::less<>> root_composites_;
};

}  // namespace

std::string LoadResult::error_text() const {
  std::string out;
  for (const config::ConfigError& e : errors) {
    out += e.text();
    out += '\n';
  }
  return out;
}

LoadResult load_rls_config(std::span<const RlsFile> files, const LoadOptions& options) {
  LoadResult result;
  config::Diagnostics diagnostics;
  Loader loader(options, diagnostics);
  for (const RlsFile& file : files) loader.load_file(file);
  result.config = loader.finish();
  result.errors = std::move(diagnostics.errors);
  result.warnings = std::move(diagnostics.warnings);
  return result;
}

LoadResult load_rls_config_dir(const std::string& dir, const LoadOptions& options) {
  namespace fs = std::filesystem;
  LoadResult failed;
  std::error_code ec;
  std::vector<fs::path> paths;
  fs::recursive_directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.empty() && name[0] == '.') {
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    const std::string ext = it->path().extension().string();
    if (it->is_regular_file() && (ext == ".yaml" || ext == ".yml")) paths.push_back(it->path());
  }
  if (ec) {
    failed.errors.emplace_back(dir, 0, 0, "cannot read the folder: " + ec.message());
    return failed;
  }
  std::sort(paths.begin(), paths.end());
  std::vector<RlsFile> files;
  std::vector<config::ConfigError> read_errors;
  for (const fs::path& p : paths) {
    std::string error;
    std::optional<std::string> text =
        config::read_small_file(p.string(), "the file", kMaxDescriptorFileBytes, &error);
    if (!text) {
      read_errors.emplace_back(p.string(), 0, 0, error);
      continue;
    }
    files.push_back(RlsFile{p.string(), std::move(*text)});
  }
  LoadResult result = load_rls_config(files, options);
  if (!read_errors.empty()) {
    result.errors.insert(result.errors.begin(), read_errors.begin(), read_errors.end());
    result.config.reset();
  }
  return result;
}

}  // namespace sluice::rls
