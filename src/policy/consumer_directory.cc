#include "policy/consumer_directory.h"

#include <algorithm>
#include <utility>

namespace sluice::policy {
namespace {}  // namespace

ConsumerDirectory::ConsumerDirectory(std::shared_ptr<const ConsumerTable> table,
                                     size_t changes_before_fold)
    : changes_before_fold_(changes_before_fold) {
  auto snapshot = std::make_shared<Snapshot>();
  snapshot->table = table ? std::move(table) : std::make_shared<const ConsumerTable>();
  current_.store(std::move(snapshot));
}

std::optional<uint16_t> ConsumerDirectory::find(std::string_view id) const {
  const std::shared_ptr<const Snapshot> snapshot = current_.load();
  if (!snapshot->changes.empty()) {
    const auto it = snapshot->changes.find(id);
    if (it != snapshot->changes.end()) return it->second;
  }
  return snapshot->table->find(id);
}

size_t ConsumerDirectory::size() const {
  const std::shared_ptr<const Snapshot> snapshot = current_.load();
  size_t n = snapshot->table->size();
  for (const auto& [id, plan] : snapshot->changes) {
    const bool in_table = snapshot->table->find(id).has_value();
    if (plan && !in_table) ++n;
    if (!plan && in_table) --n;
  }
  return n;
}

void ConsumerDirectory::set(std::string_view id, std::optional<uint16_t> plan) {
  const std::shared_ptr<const Snapshot> before = current_.load();
  auto next = std::make_shared<Snapshot>(*before);
  next->changes.insert_or_assign(std::string(id), plan);
  if (next->changes.size() > changes_before_fold_) {
    ConsumerTable::Builder builder(next->table->size() + next->changes.size());
    next->table->for_each([&](std::string_view existing, uint16_t p) {
      if (!next->changes.contains(existing)) builder.add(existing, p);
    });
    for (const auto& [changed, p] : next->changes) {
      if (p) builder.add(changed, *p);
    }
    next->table = std::make_shared<const ConsumerTable>(std::move(builder).build());
    next->changes.clear();
  }
  current_.store(std::move(next));
}

}  // namespace sluice::policy
