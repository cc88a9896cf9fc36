#include "observe/open_family.h"

#include <string>
#include <utility>

#include <spdlog/spdlog.h>

namespace sluice::observe {

OpenCounterFamily::OpenCounterFamily(std::string name, std::string help,
                                     std::vector<std::string> label_names, size_t max_series)
    : name_(std::move(name)),
      help_(std::move(help)),
      label_names_(std::move(label_names)),
      max_series_(max_series) {}

void OpenCounterFamily::attach(Registry& registry) {
  registry.counter_family_function(name_, help_, [this] { return snapshot(); });
}

void OpenCounterFamily::add(std::span<const std::string_view> values, uint64_t n) {
  if (values.size() != label_names_.size()) return;  // a caller's bug; nothing counted
  std::string key;
  for (std::string_view v : values) {
    key.append(std::to_string(v.size()));
    key.push_back(':');
    key.append(v);
  }
  std::lock_guard lock(mutex_);
  if (auto it = by_values_.find(key); it != by_values_.end()) {
    it->second.value += n;
    return;
  }
  if (by_values_.size() < max_series_) {
    Series& s = by_values_[std::move(key)];
    for (size_t i = 0; i < values.size(); ++i) {
      s.labels.emplace_back(label_names_[i], std::string(values[i]));
    }
    s.value = n;
    return;
  }
  if (overflow_ == nullptr) {
    spdlog::warn("metric {}: more than {} label sets; the rest are counted with the value {}",
                 name_, max_series_, kOverflowValue);
    overflow_ = std::make_unique<Series>();
    for (const std::string& label : label_names_) {
      overflow_->labels.emplace_back(label, std::string(kOverflowValue));
    }
  }
  overflow_->value += n;
}

Registry::SeriesValues OpenCounterFamily::snapshot() const {
  std::lock_guard lock(mutex_);
  Registry::SeriesValues out;
  out.reserve(by_values_.size() + 1);
  for (const auto& [key, s] : by_values_) out.emplace_back(s.labels, s.value);
  if (overflow_ != nullptr) out.emplace_back(overflow_->labels, overflow_->value);
  return out;
}

size_t OpenCounterFamily::series() const {
  std::lock_guard lock(mutex_);
  return by_values_.size();
}

}  // namespace sluice::observe
