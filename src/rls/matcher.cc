#include "rls/matcher.h"

namespace sluice::rls {

std::vector<std::string> split_glob(std::string_view pattern) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    const size_t star = pattern.find('*', start);
    if (star == std::string_view::npos) {
      parts.emplace_back(pattern.substr(start));
      return parts;
    }
    parts.emplace_back(pattern.substr(start, star - start));
    start = star + 1;
  }
}

bool glob_match(std::span<const std::string> parts, std::string_view value) {
  if (parts.size() == 1) return parts[0] == value;
  const std::string& first = parts.front();
  const std::string& last = parts.back();
  size_t fixed = 0;
  for (const std::string& p : parts) fixed += p.size();
  if (value.size() < fixed) return false;
  if (!value.starts_with(first) || !value.ends_with(last)) return false;
  // The middle parts, in order, inside what the first and last parts leave.
  // Taking the leftmost occurrence of each is enough: '*' absorbs any gap, so
  // an earlier occurrence never rules out a later part.
  std::string_view rest = value.substr(first.size(), value.size() - first.size() - last.size());
  for (size_t i = 1; i + 1 < parts.size(); ++i) {
    const size_t at = rest.find(parts[i]);
    if (at == std::string_view::npos) return false;
    rest.remove_prefix(at + parts[i].size());
  }
  return true;
}

namespace {

void append_entry(std::string* out, std::string_view key, std::string_view value) {
  if (out == nullptr) return;
  out->push_back('.');
  out->append(key);
  if (!value.empty()) {
    out->push_back('_');
    out->append(value);
  }
}

}  // namespace

std::optional<Match> match_descriptor(const Domain& domain, std::span<const EntryView> entries,
                                      bool with_stat_key) {
  const DescriptorLevel* level = &domain.root;
  const DescriptorNode* found = nullptr;
  std::vector<const std::string*> shared;  // sized on the first shared pattern
  // The metric name as it grows level by level: a value appears when it was
  // matched exactly or value_to_metric asks for it; a wildcard shows its
  // pattern (share_threshold or not) unless value_to_metric asks for the value.
  std::string stat_key;
  if (with_stat_key) stat_key = domain.name;
  std::string* stat = with_stat_key ? &stat_key : nullptr;

  for (size_t i = 0; i < entries.size(); ++i) {
    const EntryView& e = entries[i];
    enum class How { kNone, kValue, kWildcard, kDefault } how = How::kNone;
    const DescriptorNode* node = level->find_value(e.key, e.value);
    if (node != nullptr) how = How::kValue;
    if (node == nullptr) {
      for (size_t index : level->wildcards) {
        const DescriptorNode& w = level->nodes[index];
        if (w.key == e.key && glob_match(w.glob_parts, e.value)) {
          node = &w;
          how = How::kWildcard;
          break;
        }
      }
    }
    if (node == nullptr) {
      node = level->find_default(e.key);
      if (node != nullptr) how = How::kDefault;
    }

    switch (how) {
      case How::kNone:
        append_entry(stat, e.key, {});
        break;
      case How::kValue:
        append_entry(stat, e.key, e.value);
        break;
      case How::kWildcard:
        if (node->share_threshold) {
          if (shared.empty()) shared.resize(entries.size(), nullptr);
          shared[i] = &node->value;
        }
        append_entry(stat, e.key,
                     node->value_to_metric && !node->share_threshold ? e.value : node->value);
        break;
      case How::kDefault:
        append_entry(stat, e.key, node->value_to_metric ? e.value : std::string_view{});
        break;
    }

    if (node != nullptr && node->rule.has_value() && i + 1 == entries.size()) found = node;
    if (node == nullptr || node->children.nodes.empty()) break;
    level = &node->children;
  }

  if (found == nullptr) return std::nullopt;
  Match match;
  match.node = found;
  if (found->detailed_metric && with_stat_key) {
    // Every entry with its own value, except the shared wildcard patterns.
    stat_key = domain.name;
    for (size_t i = 0; i < entries.size(); ++i) {
      const bool is_shared = !shared.empty() && shared[i] != nullptr;
      append_entry(&stat_key, entries[i].key,
                   is_shared ? std::string_view(*shared[i]) : entries[i].value);
    }
  }
  match.stat_key = std::move(stat_key);
  match.shared_patterns = std::move(shared);
  return match;
}

}  // namespace sluice::rls
