#include "rls/config_json.h"

#include "util/json_escape.h"

namespace sluice::rls {
namespace {

void add_string(std::string& out, std::string_view text) {
  out += '"';
  append_json_escaped(text, out);
  out += '"';
}

// Whole microseconds at most (Limit refuses finer periods), so six decimals are exact.
std::string seconds_number(Nanos d) {
  const int64_t us = d.count() / 1000;
  std::string s = std::to_string(us / 1'000'000);
  if (const int64_t frac = us % 1'000'000; frac != 0) {
    std::string digits = std::to_string(1'000'000 + frac).substr(1);
    while (digits.back() == '0') digits.pop_back();
    s += "." + digits;
  }
  return s;
}

void add_rule(std::string& out, const RateLimitRule& rule) {
  out += "{";
  if (!rule.name.empty()) {
    out += "\"name\":";
    add_string(out, rule.name);
    out += ",";
  }
  if (!rule.replaces.empty()) {
    out += "\"replaces\":[";
    for (size_t i = 0; i < rule.replaces.size(); ++i) {
      if (i > 0) out += ",";
      add_string(out, rule.replaces[i]);
    }
    out += "],";
  }
  if (rule.unlimited) {
    out += "\"unlimited\":true}";
    return;
  }
  out += "\"unit\":";
  add_string(out, unit_name(rule.unit));
  out += ",\"requests_per_unit\":" + std::to_string(rule.requests_per_unit);
  if (rule.sluice_algorithm && rule.limit) {
    const LimitSpec& spec = rule.limit->spec();
    out += ",\"algorithm\":";
    add_string(out, algorithm_name(spec.algorithm));
    if (spec.algorithm == Algorithm::kTokenBucket || spec.algorithm == Algorithm::kGcra) {
      out += ",\"capacity\":" + std::to_string(spec.capacity) +
             ",\"refill_tokens\":" + std::to_string(spec.refill_tokens) +
             ",\"refill_period_seconds\":" + seconds_number(spec.refill_period);
    } else {
      out += ",\"limit\":" + std::to_string(spec.limit) +
             ",\"window_seconds\":" + seconds_number(spec.window);
    }
  } else if (const Nanos unit = unit_length(rule.unit);
             unit.count() > 0 && rule.window != unit && rule.window.count() % unit.count() == 0) {
    out += ",\"unit_multiplier\":" + std::to_string(rule.window.count() / unit.count());
  }
  out += "}";
}

void add_level(std::string& out, const DescriptorLevel& level) {
  out += "[";
  for (size_t i = 0; i < level.nodes.size(); ++i) {
    const DescriptorNode& node = level.nodes[i];
    if (i > 0) out += ",";
    out += "{\"key\":";
    add_string(out, node.key);
    if (!node.value.empty()) {
      out += ",\"value\":";
      add_string(out, node.value);
    }
    if (node.rule) {
      out += ",\"rate_limit\":";
      add_rule(out, *node.rule);
    }
    auto flag = [&out](const char* name, bool on) {
      out += std::string(",\"") + name + "\":" + (on ? "true" : "false");
    };
    flag("shadow_mode", node.shadow_mode);
    flag("quota_mode", node.quota_mode);
    flag("detailed_metric", node.detailed_metric);
    out += ",\"descriptors\":";
    add_level(out, node.children);
    out += "}";
  }
  out += "]";
}

}  // namespace

std::string config_json(const RlsConfig& config) {
  std::string out = "{\"domains\":[";
  bool first = true;
  for (const auto& [name, domain] : config.domains) {
    if (!first) out += ",";
    first = false;
    out += "{\"domain\":";
    add_string(out, name);
    out += ",\"file\":";
    add_string(out, domain.mark.file);
    out += ",\"descriptors\":";
    add_level(out, domain.root);
    out += "}";
  }
  out += "]}";
  return out;
}

}  // namespace sluice::rls
