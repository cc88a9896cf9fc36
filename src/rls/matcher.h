// Matching one request descriptor against a domain's descriptor tree, with the
// semantics of envoyproxy/ratelimit:
//
// - Entries are matched level by level. At each level the entry's exact
//   (key, value) is tried first, then the wildcard values of that key in file
//   order (the first that matches wins), then the key's value-less default.
// - A rule applies only when it sits at the request's depth: a descriptor with
//   more entries than the matching path is deep gets no limit from the path's
//   shallower rules, and one with fewer entries gets none from deeper rules.
// - Matching stops at the first level with no match, and at a matched node
//   without nested descriptors (no fall-back to the default of that level).
// - A matched node without a rule whitelists its value: no limit applies.
//
// Thread-safety: pure functions of their arguments.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rls/config.h"

namespace sluice::rls {

struct EntryView {
  std::string_view key;
  std::string_view value;
};

struct Match {
  const DescriptorNode* node = nullptr;  // the node whose rule applies
  // Empty when no entry matched a share_threshold wildcard. Else one per
  // request entry: the wildcard pattern that stands for the entry's value in
  // the store key (so that every value matching it shares one counter), or
  // nullptr for an entry that keeps its value.
  std::vector<const std::string*> shared_patterns;
  // The metric name, as envoyproxy/ratelimit builds it with detailed_metric,
  // value_to_metric and share_threshold; only built when asked for.
  std::string stat_key;

  const RateLimitRule& rule() const { return *node->rule; }
};

// The rule that applies to `entries` in `domain`, or nothing. Fills
// Match::stat_key when `with_stat_key`.
std::optional<Match> match_descriptor(const Domain& domain, std::span<const EntryView> entries,
                                      bool with_stat_key = true);

// `pattern` split at each '*' ("a*b*" -> {"a", "b", ""}); one part when there is no '*'.
std::vector<std::string> split_glob(std::string_view pattern);

// Whether `value` matches the pattern split into `parts`: each '*' matches any
// run of characters, the empty run included.
bool glob_match(std::span<const std::string> parts, std::string_view value);

}  // namespace sluice::rls
