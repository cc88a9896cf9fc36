#include "rls/config_loader.h"

#include <google/protobuf/struct.pb.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "rls/matcher.h"

namespace sluice::rls {
namespace {

using Keys = std::span<const std::string_view>;

// Where each key may appear. envoyproxy/ratelimit checks every map key of a
// file against one list and ignores known keys in the wrong place; Sluice
// knows the places, ignores (with a warning) what it ignores, and accepts its
// own extension keys only where they mean something.
constexpr std::array<std::string_view, 2> kRootKeys = {"domain", "descriptors"};
constexpr std::array<std::string_view, 10> kDescriptorKeys = {
    "key",        "value",           "rate_limit",      "descriptors",     "shadow_mode",
    "quota_mode", "detailed_metric", "value_to_metric", "share_threshold", "metadata"};
constexpr std::array<std::string_view, 11> kRateLimitKeys = {
    "unit",      "requests_per_unit", "unlimited",   "name",  "replaces", "unit_multiplier",
    "algorithm", "capacity",          "refill_rate", "limit", "window"};
constexpr std::array<std::string_view, 1> kReplacesKeys = {"name"};
// The keys envoyproxy/ratelimit knows, wherever they are.
constexpr std::array<std::string_view, 16> kEnvoyKeys = {"domain",
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
constexpr std::array<std::string_view, 6> kExtensionKeys = {
    "unit_multiplier", "algorithm", "capacity", "refill_rate", "limit", "window"};

bool contains(Keys keys, std::string_view key) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// " (did you mean 'x'?)" for the closest of `keys` within two edits, or "".
std::string suggestion(std::string_view key, Keys keys) {
  std::string_view best;
  size_t best_distance = 3;
  for (std::string_view candidate : keys) {
    const size_t d = edit_distance(key, candidate);
    if (d < best_distance) {
      best = candidate;
      best_distance = d;
    }
  }
  return best.empty() ? std::string() : " (did you mean '" + std::string(best) + "'?)";
}

// --- Plain scalars resolved as YAML 1.1 (the YAML envoyproxy/ratelimit reads) ---

enum class Kind { kNull, kBool, kInt, kFloat, kString };

struct IntValue {
  bool negative = false;
  uint64_t magnitude = 0;
};

bool digits_in_base(std::string_view s, int base, uint64_t* out) {
  if (s.empty()) return false;
  uint64_t v = 0;
  for (char c : s) {
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      d = c - 'A' + 10;
    } else {
      return false;
    }
    if (d >= base) return false;
    const uint64_t ub = static_cast<uint64_t>(base);
    if (v > (std::numeric_limits<uint64_t>::max() - static_cast<uint64_t>(d)) / ub) return false;
    v = v * ub + static_cast<uint64_t>(d);
  }
  *out = v;
  return true;
}

// Decimal, 0x hex, 0o or leading-0 octal and 0b binary, '_' allowed, as Go's
// ParseInt with base 0 after removing '_'.
bool parse_int_text(std::string_view text, IntValue* out) {
  std::string s;
  for (char c : text) {
    if (c != '_') s.push_back(c);
  }
  std::string_view v = s;
  IntValue value;
  if (!v.empty() && (v[0] == '+' || v[0] == '-')) {
    value.negative = v[0] == '-';
    v.remove_prefix(1);
  }
  bool ok;
  if (v.size() > 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'X')) {
    ok = digits_in_base(v.substr(2), 16, &value.magnitude);
  } else if (v.size() > 2 && v[0] == '0' && (v[1] == 'o' || v[1] == 'O')) {
    ok = digits_in_base(v.substr(2), 8, &value.magnitude);
  } else if (v.size() > 2 && v[0] == '0' && (v[1] == 'b' || v[1] == 'B')) {
    ok = digits_in_base(v.substr(2), 2, &value.magnitude);
  } else if (v.size() > 1 && v[0] == '0') {
    ok = digits_in_base(v.substr(1), 8, &value.magnitude);
  } else {
    ok = digits_in_base(v, 10, &value.magnitude);
  }
  if (ok && out != nullptr) *out = value;
  return ok;
}

// [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? and the .inf/.nan forms.
bool is_float_text(std::string_view s) {
  static constexpr std::array<std::string_view, 12> kSpecial = {".inf",  ".Inf",  ".INF",  "+.inf",
                                                                "+.Inf", "+.INF", "-.inf", "-.Inf",
                                                                "-.INF", ".nan",  ".NaN",  ".NAN"};
  if (std::find(kSpecial.begin(), kSpecial.end(), s) != kSpecial.end()) return true;
  size_t i = 0;
  auto digits = [&] {
    const size_t start = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    return i - start;
  };
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (digits() == 0) return false;
  } else {
    if (digits() == 0) return false;
    if (i < s.size() && s[i] == '.') {
      ++i;
      digits();
    }
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (digits() == 0) return false;
  }
  return i == s.size();
}

int bool_text(std::string_view s) {  // 1 true, 0 false, -1 neither
  static constexpr std::array<std::string_view, 11> kTrue = {
      "y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"};
  static constexpr std::array<std::string_view, 11> kFalse = {
      "n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"};
  if (std::find(kTrue.begin(), kTrue.end(), s) != kTrue.end()) return 1;
  if (std::find(kFalse.begin(), kFalse.end(), s) != kFalse.end()) return 0;
  return -1;
}

Kind resolve(const YAML::Node& n) {
  if (n.IsNull()) return Kind::kNull;
  const std::string& tag = n.Tag();
  if (tag == "tag:yaml.org,2002:int") return Kind::kInt;
  if (tag == "tag:yaml.org,2002:float") return Kind::kFloat;
  if (tag == "tag:yaml.org,2002:bool") return Kind::kBool;
  if (tag != "?") return Kind::kString;  // quoted, or another explicit tag
  const std::string& s = n.Scalar();
  if (bool_text(s) >= 0) return Kind::kBool;
  if (parse_int_text(s, nullptr)) return Kind::kInt;
  if (is_float_text(s)) return Kind::kFloat;
  return Kind::kString;
}

std::string shown(const YAML::Node& n) {
  if (n.IsMap()) return "a map";
  if (n.IsSequence()) return "a list";
  if (n.IsNull()) return "null";
  return "'" + n.Scalar() + "'";
}

// --- The loader ---

class Loader {
 public:
  Loader(const LoadOptions& options, LoadResult* result) : options_(options), result_(result) {}

  void load_file(const RlsFile& file) {
    file_ = file.name;
    config_.files.push_back(file.name);
    YAML::Node root;
    try {
      root = YAML::Load(file.text);
    } catch (const YAML::ParserException& e) {
      error_at(e.mark.line, e.mark.column, "malformed YAML: " + e.msg);
      return;
    }
    try {
      load_root(root);
    } catch (const YAML::Exception& e) {
      error_at(e.mark.line, e.mark.column, "malformed YAML: " + e.msg);
    }
  }

  void finish() {
    for (const std::string& w : result_->warnings) config_.warnings.push_back(w);
    if (result_->errors.empty()) {
      result_->config = std::make_shared<const RlsConfig>(std::move(config_));
    }
  }

 private:
  // Composite keys ("key_value") already defined at one level, as
  // envoyproxy/ratelimit names descriptors: two that spell the same are
  // duplicates there, so they are here.
  using Composites = StringMap<SourceMark>;

  SourceMark mark_of(const YAML::Node& n) const {
    const YAML::Mark m = n.Mark();
    if (m.line < 0) return SourceMark{file_, 1, 1};
    return SourceMark{file_, m.line + 1, m.column + 1};
  }
  void error_at(int line, int column, const std::string& message) {
    SourceMark m{file_, line < 0 ? 1 : line + 1, column < 0 ? 1 : column + 1};
    result_->errors.push_back(m.text() + ": " + message);
  }
  void error(const SourceMark& m, const std::string& message) {
    result_->errors.push_back(m.text() + ": " + message);
  }
  void error(const YAML::Node& n, const std::string& message) { error(mark_of(n), message); }
  void warning(const YAML::Node& n, const std::string& message) {
    result_->warnings.push_back(mark_of(n).text() + ": " + message);
  }

  bool key_is_string(const YAML::Node& key) {
    if (!key.IsScalar()) return false;
    const Kind k = resolve(key);
    return k == Kind::kString;
  }

  // Walks the pairs of `map`, rejecting non-string, duplicate and unknown
  // keys; calls on_field(name, key_node, value_node) for keys in `allowed`.
  template <class OnField>
  void fields(const YAML::Node& map, Keys allowed, OnField on_field) {
    StringMap<SourceMark> seen;
    for (auto it = map.begin(); it != map.end(); ++it) {
      const YAML::Node key = it->first;
      const YAML::Node value = it->second;
      if (!key_is_string(key)) {
        error(key, "key is not of type string: " + (key.IsScalar() ? key.Scalar() : shown(key)));
        continue;
      }
      const std::string& name = key.Scalar();
      if (auto [first, inserted] = seen.emplace(name, mark_of(key)); !inserted) {
        error(key, "duplicate key '" + name + "' (first at " + first->second.text() + ")");
        continue;
      }
      if (contains(allowed, name)) {
        on_field(name, key, value);
      } else if (contains(kExtensionKeys, name)) {
        error(key, "'" + name + "' is only valid inside rate_limit");
      } else if (contains(kEnvoyKeys, name)) {
        warning(key, "'" + name + "' has no effect here and is ignored");
        validate_tree(value, name == "metadata");
      } else {
        error(key, "unknown key '" + name + "'" + suggestion(name, allowed));
      }
    }
  }

  // The checks envoyproxy/ratelimit applies to every part of a file, for
  // parts Sluice otherwise ignores.
  void validate_tree(const YAML::Node& n, bool free_form) {
    if (free_form) return;
    if (n.IsMap()) {
      for (auto it = n.begin(); it != n.end(); ++it) {
        if (!key_is_string(it->first)) {
          error(it->first, "key is not of type string: " +
                               (it->first.IsScalar() ? it->first.Scalar() : shown(it->first)));
          continue;
        }
        const std::string& name = it->first.Scalar();
        if (!contains(kEnvoyKeys, name) && !contains(kExtensionKeys, name)) {
          error(it->first, "unknown key '" + name + "'" + suggestion(name, kEnvoyKeys));
          continue;
        }
        validate_tree(it->second, name == "metadata");
      }
    } else if (n.IsSequence()) {
      for (const YAML::Node& e : n) {
        if (!e.IsMap()) {
          error(e, "a list may only contain maps, got " + shown(e));
          continue;
        }
        validate_tree(e, false);
      }
    } else if (n.IsScalar() && resolve(n) == Kind::kFloat) {
      error(n, float_message(n));
    }
  }

  static std::string float_message(const YAML::Node& n) {
    return "floating-point value '" + n.Scalar() +
           "' is not allowed (quote it to make it a string)";
  }

  // A null value has no position of its own: report it at its key.
  SourceMark value_mark(const YAML::Node& key, const YAML::Node& value) const {
    return value.IsNull() ? mark_of(key) : mark_of(value);
  }

  bool read_string(const YAML::Node& key, const YAML::Node& v, std::string* out) {
    if (v.IsNull()) {
      out->clear();
      return true;
    }
    if (!v.IsScalar()) {
      error(v, "'" + key.Scalar() + "' must be a string, got " + shown(v));
      return false;
    }
    if (resolve(v) == Kind::kFloat) {
      error(v, float_message(v));
      return false;
    }
    *out = v.Scalar();
    return true;
  }

  bool read_uint(const YAML::Node& key, const YAML::Node& v, uint64_t max, const char* what,
                 uint64_t* out) {
    if (v.IsNull()) {
      *out = 0;
      return true;
    }
    IntValue value;
    if (v.IsScalar() && resolve(v) == Kind::kFloat) {
      error(v, float_message(v));
      return false;
    }
    if (!v.IsScalar() || resolve(v) != Kind::kInt || !parse_int_text(v.Scalar(), &value) ||
        (value.negative && value.magnitude != 0) || value.magnitude > max) {
      error(v, "'" + key.Scalar() + "' must be " + what + ", got " + shown(v));
      return false;
    }
    *out = value.magnitude;
    return true;
  }

  bool read_bool(const YAML::Node& key, const YAML::Node& v, bool* out) {
    if (v.IsNull()) {
      *out = false;
      return true;
    }
    if (v.IsScalar() && resolve(v) == Kind::kFloat) {
      error(v, float_message(v));
      return false;
    }
    if (!v.IsScalar() || resolve(v) != Kind::kBool) {
      error(v, "'" + key.Scalar() + "' must be true or false, got " + shown(v));
      return false;
    }
    *out = bool_text(v.Scalar()) == 1;
    return true;
  }

  void load_root(const YAML::Node& root) {
    if (root.IsNull()) {
      error(SourceMark{file_, 1, 1}, "config file cannot have empty domain");
      return;
    }
    if (!root.IsMap()) {
      error(root,
            "a descriptor file must be a map with 'domain' and 'descriptors', got " + shown(root));
      return;
    }
    std::string domain_name;
    std::optional<SourceMark> domain_mark;
    std::optional<YAML::Node> descriptors;
    fields(root, kRootKeys, [&](const std::string& name, const YAML::Node& k, const YAML::Node& v) {
      if (name == "domain") {
        read_string(k, v, &domain_name);
        domain_mark = value_mark(k, v);
      } else {
        descriptors.emplace(v);
      }
    });

    // A rejected domain still has its descriptors checked, into a scratch tree.
    DescriptorLevel scratch;
    Composites scratch_composites;
    DescriptorLevel* level = &scratch;
    Composites* composites = &scratch_composites;
    if (domain_name.empty()) {
      error(domain_mark.value_or(mark_of(root)), "config file cannot have empty domain");
    } else if (auto it = config_.domains.find(domain_name); it != config_.domains.end()) {
      if (options_.merge_domains) {
        level = &it->second.root;
        composites = &root_composites_[domain_name];
      } else {
        error(*domain_mark,
              "duplicate domain '" + domain_name + "' (first in " + it->second.mark.text() + ")");
      }
    } else {
      Domain& domain = config_.domains[domain_name];
      domain.name = domain_name;
      domain.mark = *domain_mark;
      level = &domain.root;
      composites = &root_composites_[domain_name];
    }
    if (descriptors) read_descriptors(*descriptors, domain_name + ".", level, composites);
  }

  void read_descriptors(const YAML::Node& list, const std::string& parent_stat,
                        DescriptorLevel* level, Composites* composites) {
    if (list.IsNull()) return;
    if (!list.IsSequence()) {
      error(list, "'descriptors' must be a list of descriptors, got " + shown(list));
      return;
    }
    for (const YAML::Node& element : list) {
      if (!element.IsMap()) {
        error(element, "a list may only contain maps, got " + shown(element));
        continue;
      }
      read_descriptor(element, parent_stat, level, composites);
    }
  }

  void read_descriptor(const YAML::Node& map, const std::string& parent_stat,
                       DescriptorLevel* level, Composites* composites) {
    DescriptorNode node;
    node.mark = mark_of(map);
    std::optional<YAML::Node> rate_limit_key, rate_limit, children;
    std::optional<SourceMark> share_mark;
    fields(map, kDescriptorKeys,
           [&](const std::string& name, const YAML::Node& k, const YAML::Node& v) {
             if (name == "key") {
               read_string(k, v, &node.key);
             } else if (name == "value") {
               read_string(k, v, &node.value);
             } else if (name == "rate_limit") {
               rate_limit_key.emplace(k);
               rate_limit.emplace(v);
             } else if (name == "descriptors") {
               children.emplace(v);
             } else if (name == "shadow_mode") {
               read_bool(k, v, &node.shadow_mode);
             } else if (name == "quota_mode") {
               read_bool(k, v, &node.quota_mode);
             } else if (name == "detailed_metric") {
               read_bool(k, v, &node.detailed_metric);
             } else if (name == "value_to_metric") {
               read_bool(k, v, &node.value_to_metric);
             } else if (name == "share_threshold") {
               read_bool(k, v, &node.share_threshold);
               share_mark = mark_of(k);
             } else if (name == "metadata") {
               read_metadata(k, v, &node);
             }
           });

    std::string composite = node.key;
    if (!node.value.empty()) composite += "_" + node.value;
    node.stat_key = parent_stat + composite;
    bool insert = true;
    if (node.key.empty()) {
      error(node.mark, "descriptor has empty key");
      insert = false;
    } else if (auto [first, inserted] = composites->emplace(composite, node.mark); !inserted) {
      error(node.mark, "duplicate descriptor composite key '" + node.stat_key + "' (first at " +
                           first->second.text() + ")");
      insert = false;
    }
    if (node.key.find('*') != std::string::npos) {
      warning(map, "a '*' in a key is matched literally; wildcards apply to values");
    }

    if (rate_limit_key) node.rule = read_rate_limit(*rate_limit_key, *rate_limit);
    if (node.share_threshold && composite.find('*') == std::string::npos) {
      error(*share_mark,
            "share_threshold can only be used with wildcard values (containing '*'), but found "
            "key '" +
                composite + "'");
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

  void read_metadata(const YAML::Node& key, const YAML::Node& v, DescriptorNode* node) {
    if (v.IsNull()) return;
    if (!v.IsMap()) {
      error(v, "'" + key.Scalar() + "' must be a map, got " + shown(v));
      return;
    }
    auto metadata = std::make_shared<google::protobuf::Struct>();
    for (auto it = v.begin(); it != v.end(); ++it) {
      to_value(it->second, &(*metadata->mutable_fields())[it->first.Scalar()]);
    }
    node->metadata = std::move(metadata);
  }

  static void to_value(const YAML::Node& n, google::protobuf::Value* out) {
    if (n.IsMap()) {
      google::protobuf::Struct* s = out->mutable_struct_value();
      for (auto it = n.begin(); it != n.end(); ++it) {
        to_value(it->second, &(*s->mutable_fields())[it->first.Scalar()]);
      }
    } else if (n.IsSequence()) {
      google::protobuf::ListValue* list = out->mutable_list_value();
      for (const YAML::Node& e : n) to_value(e, list->add_values());
    } else if (n.IsNull()) {
      out->set_null_value(google::protobuf::NULL_VALUE);
    } else {
      IntValue i;
      switch (resolve(n)) {
        case Kind::kBool:
          out->set_bool_value(bool_text(n.Scalar()) == 1);
          break;
        case Kind::kInt:
          parse_int_text(n.Scalar(), &i);
          out->set_number_value(i.negative ? -static_cast<double>(i.magnitude)
                                           : static_cast<double>(i.magnitude));
          break;
        case Kind::kFloat:
          out->set_number_value(std::strtod(n.Scalar().c_str(), nullptr));
          break;
        default:
          out->set_string_value(n.Scalar());
          break;
      }
    }
  }

  // The fields of one rate_limit block, and where each was written.
  struct RateLimitFields {
    std::string unit_text, algorithm, refill_rate, window;
    uint64_t rpu = 0, mult = 1, capacity = 0, limit = 0;
    bool unlimited = false;
    std::optional<SourceMark> unit_at, rpu_at, unlimited_at, mult_at, algorithm_at;
    std::optional<SourceMark> capacity_at, refill_at, limit_at, window_at;
  };

  std::optional<RateLimitRule> read_rate_limit(const YAML::Node& key, const YAML::Node& v) {
    if (v.IsNull())
      return std::nullopt;  // `rate_limit:` alone: no rule, as in envoyproxy/ratelimit
    if (!v.IsMap()) {
      error(v, "'rate_limit' must be a map, got " + shown(v));
      return std::nullopt;
    }
    const SourceMark at = mark_of(key);
    RateLimitRule rule;
    RateLimitFields f;
    std::vector<std::pair<std::string, SourceMark>> replaces;
    bool ok = true;
    fields(
        v, kRateLimitKeys, [&](const std::string& name, const YAML::Node& k, const YAML::Node& x) {
          const SourceMark where = value_mark(k, x);
          bool read = true;
          if (name == "unit") {
            read = read_string(k, x, &f.unit_text);
            f.unit_at = where;
          } else if (name == "requests_per_unit") {
            read = read_uint(k, x, std::numeric_limits<uint32_t>::max(),
                             "an unsigned 32-bit integer", &f.rpu);
            f.rpu_at = where;
          } else if (name == "unlimited") {
            read = read_bool(k, x, &f.unlimited);
            f.unlimited_at = mark_of(k);
          } else if (name == "name") {
            read = read_string(k, x, &rule.name);
          } else if (name == "replaces") {
            read = read_replaces(x, &replaces);
          } else if (name == "unit_multiplier") {
            read = read_uint(k, x, std::numeric_limits<uint32_t>::max(), "an integer of at least 1",
                             &f.mult);
            if (read && f.mult == 0) {
              error(where, "'unit_multiplier' must be an integer of at least 1, got " + shown(x));
              read = false;
            }
            f.mult_at = where;
          } else if (name == "algorithm") {
            read = read_string(k, x, &f.algorithm);
            f.algorithm_at = where;
          } else if (name == "capacity") {
            read = read_uint(k, x, std::numeric_limits<uint64_t>::max(), "an unsigned integer",
                             &f.capacity);
            f.capacity_at = where;
          } else if (name == "refill_rate") {
            read = read_string(k, x, &f.refill_rate);
            f.refill_at = where;
          } else if (name == "limit") {
            read = read_uint(k, x, std::numeric_limits<uint64_t>::max(), "an unsigned integer",
                             &f.limit);
            f.limit_at = where;
          } else if (name == "window") {
            read = read_string(k, x, &f.window);
            f.window_at = where;
          }
          ok = ok && read;
        });

    for (const auto& [name, mark] : replaces) {
      if (name.empty()) {
        error(mark, "should not have an empty replaces entry");
        ok = false;
      } else if (name == rule.name) {
        error(mark, "replaces should not contain name of same descriptor");
        ok = false;
      } else {
        rule.replaces.push_back(name);
      }
    }
    if (!ok) return rule;
    if (f.algorithm_at) {
      build_algorithm(at, f, &rule);
    } else {
      build_envoy(at, f, &rule);
    }
    return rule;
  }

  bool read_replaces(const YAML::Node& v, std::vector<std::pair<std::string, SourceMark>>* out) {
    if (v.IsNull()) return true;
    if (!v.IsSequence()) {
      error(v, "'replaces' must be a list of {name: ...}, got " + shown(v));
      return false;
    }
    bool ok = true;
    for (const YAML::Node& item : v) {
      if (!item.IsMap()) {
        error(item, "a list may only contain maps, got " + shown(item));
        ok = false;
        continue;
      }
      std::string name;
      fields(item, kReplacesKeys,
             [&](const std::string&, const YAML::Node& k, const YAML::Node& x) {
               ok = read_string(k, x, &name) && ok;
             });
      out->emplace_back(name, mark_of(item));
    }
    return ok;
  }

  // envoyproxy/ratelimit's rule: a fixed window of one unit (times unit_multiplier).
  void build_envoy(const SourceMark& at, const RateLimitFields& f, RateLimitRule* rule) {
    const std::pair<const std::optional<SourceMark>*, const char*> orphans[] = {
        {&f.capacity_at, "capacity"},
        {&f.refill_at, "refill_rate"},
        {&f.limit_at, "limit"},
        {&f.window_at, "window"}};
    bool orphan = false;
    for (const auto& [where, name] : orphans) {
      if (where->has_value()) {
        error(**where, std::string("'") + name +
                           "' needs 'algorithm' (token_bucket, gcra, fixed_window, sliding_log "
                           "or sliding_window)");
        orphan = true;
      }
    }
    if (orphan) return;
    Unit unit = Unit::kUnknown;
    const bool valid_unit = parse_unit(f.unit_text, &unit);
    if (f.unlimited) {
      if (valid_unit) error(*f.unit_at, "should not specify rate limit unit when unlimited");
      rule->unlimited = true;
      return;
    }
    if (!valid_unit) {
      error(f.unit_at.value_or(at), "invalid rate limit unit '" + f.unit_text + "'");
      return;
    }
    rule->requests_per_unit = static_cast<uint32_t>(f.rpu);
    rule->unit = unit;
    rule->window = unit_length(unit) * static_cast<int64_t>(f.mult);
    if (f.rpu == 0) return;  // refuses every request
    Result<Limit> limit = Limit::fixed_window(f.rpu, rule->window);
    if (!limit.ok()) {
      error(at, "rate_limit: " + limit.error().message);
      return;
    }
    rule->limit = *limit;
  }

  // Sluice's extension: any algorithm, any period.
  void build_algorithm(const SourceMark& at, const RateLimitFields& f, RateLimitRule* rule) {
    Algorithm algorithm;
    if (!parse_algorithm(f.algorithm, &algorithm)) {
      error(*f.algorithm_at, "unknown algorithm '" + f.algorithm +
                                 "' (token_bucket, gcra, fixed_window, sliding_log or "
                                 "sliding_window)");
      return;
    }
    const std::string name(algorithm_name(algorithm));
    if (f.unlimited_at) {
      error(*f.unlimited_at, "'unlimited' cannot be combined with 'algorithm'");
      return;
    }
    const bool bucket = algorithm == Algorithm::kTokenBucket || algorithm == Algorithm::kGcra;
    const std::optional<SourceMark>& own_a = bucket ? f.capacity_at : f.limit_at;
    const std::optional<SourceMark>& own_b = bucket ? f.refill_at : f.window_at;
    const std::pair<const std::optional<SourceMark>*, const char*> others[] = {
        {bucket ? &f.limit_at : &f.capacity_at, bucket ? "limit" : "capacity"},
        {bucket ? &f.window_at : &f.refill_at, bucket ? "window" : "refill_rate"}};
    const std::string own_names = bucket ? "'capacity' and 'refill_rate'" : "'limit' and 'window'";
    for (const auto& [where, other] : others) {
      if (where->has_value()) {
        error(**where, name + " takes " + own_names +
                           " (or 'requests_per_unit' and 'unit'), not '" + other + "'");
        return;
      }
    }
    const bool own = own_a.has_value() || own_b.has_value();
    const bool generic = f.rpu_at.has_value() || f.unit_at.has_value() || f.mult_at.has_value();
    if (own && generic) {
      error(at, "use either " + own_names + " or 'requests_per_unit' and 'unit', not both");
      return;
    }
    LimitSpec spec;
    spec.algorithm = algorithm;
    if (own) {
      if (!own_a || !own_b) {
        error(at, name + " needs " + own_names);
        return;
      }
      if (bucket) {
        Result<Rate> rate = parse_rate(f.refill_rate);
        if (!rate.ok()) {
          error(*f.refill_at, "'refill_rate' " + rate.error().message);
          return;
        }
        spec.capacity = f.capacity;
        spec.refill_tokens = rate->tokens;
        spec.refill_period = rate->period;
      } else {
        Result<Nanos> window = parse_duration(f.window);
        if (!window.ok()) {
          error(*f.window_at, "'window' " + window.error().message);
          return;
        }
        spec.limit = f.limit;
        spec.window = *window;
      }
    } else {
      if (!generic) {
        error(at, name + " needs " + own_names + " (or 'requests_per_unit' and 'unit')");
        return;
      }
      Unit unit = Unit::kUnknown;
      if (!parse_unit(f.unit_text, &unit)) {
        error(f.unit_at.value_or(at), "invalid rate limit unit '" + f.unit_text + "'");
        return;
      }
      const Nanos period = unit_length(unit) * static_cast<int64_t>(f.mult);
      if (bucket) {
        spec.capacity = f.rpu;
        spec.refill_tokens = f.rpu;
        spec.refill_period = period;
      } else {
        spec.limit = f.rpu;
        spec.window = period;
      }
    }
    Result<Limit> limit = Limit::create(spec);
    if (!limit.ok()) {
      error(at, "rate_limit: " + limit.error().message);
      return;
    }
    rule->sluice_algorithm = true;
    rule->limit = *limit;
    rule->requests_per_unit = static_cast<uint32_t>(
        std::min<uint64_t>(limit->size(), std::numeric_limits<uint32_t>::max()));
    rule->unit = unit_of_length(limit->period());
    rule->window = limit->period();
  }

  const LoadOptions& options_;
  LoadResult* result_;
  RlsConfig config_;
  std::string file_;
  std::map<std::string, Composites, std::less<>> root_composites_;
};

}  // namespace

std::string LoadResult::error_text() const {
  std::string out;
  for (const std::string& e : errors) {
    out += e;
    out += '\n';
  }
  return out;
}

LoadResult load_rls_config(std::span<const RlsFile> files, const LoadOptions& options) {
  LoadResult result;
  Loader loader(options, &result);
  for (const RlsFile& file : files) loader.load_file(file);
  loader.finish();
  return result;
}

LoadResult load_rls_config_dir(const std::string& dir, const LoadOptions& options) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<fs::path> paths;
  fs::recursive_directory_iterator it(dir, ec), end;
  if (ec) {
    LoadResult result;
    result.errors.push_back(dir + ": cannot read the folder: " + ec.message());
    return result;
  }
  for (; it != end; it.increment(ec)) {
    if (ec) break;
    const std::string name = it->path().filename().string();
    if (!name.empty() && name[0] == '.') {
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    const std::string ext = it->path().extension().string();
    if (it->is_regular_file() && (ext == ".yaml" || ext == ".yml")) paths.push_back(it->path());
  }
  if (ec) {
    LoadResult result;
    result.errors.push_back(dir + ": cannot read the folder: " + ec.message());
    return result;
  }
  std::sort(paths.begin(), paths.end());
  std::vector<RlsFile> files;
  std::vector<std::string> read_errors;
  for (const fs::path& p : paths) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    if (!in.good() && !in.eof()) {
      read_errors.push_back(p.string() + ": cannot read the file: " + std::strerror(errno));
      continue;
    }
    files.push_back(RlsFile{p.string(), text.str()});
  }
  LoadResult result = load_rls_config(files, options);
  if (!read_errors.empty()) {
    result.errors.insert(result.errors.begin(), read_errors.begin(), read_errors.end());
    result.config.reset();
  }
  return result;
}

}  // namespace sluice::rls
