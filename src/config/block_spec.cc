#include "config/block_spec.h"

#include <optional>
#include <string>

namespace sluice::config {

const Keys kBlockKeys = {"first", "factor", "max", "forget_after"};

namespace {

constexpr uint64_t kMaxFactor = 1'000;

}  // namespace

bool read_block(Walker& walker, const Item& item, LimitSpec* spec) {
  if (!item.node.IsMap()) {
    const std::optional<Nanos> d = walker.duration(item, false);
    if (d) spec->block = *d;
    return d.has_value();
  }
  const std::optional<Mapping> m =
      walker.mapping(item, &kBlockKeys,
                     "a duration like 30m, or {first: 1m, factor: 2, max: 1d, forget_after: 1d}");
  if (!m) return false;
  bool ok = true;
  for (const char* key : {"first", "factor", "max", "forget_after"}) {
    if (m->get(key) == nullptr) {
      walker.error(item, std::string("a growing block needs `") + key +
                             "` (all of first, factor, max and forget_after)");
      ok = false;
    }
  }
  std::optional<Nanos> first, max, forget_after;
  std::optional<uint64_t> factor;
  // Each field present is parsed, so that each reports its own error.
  if (const Item* i = m->get("first")) ok = (first = walker.duration(*i, false)).has_value() && ok;
  if (const Item* i = m->get("factor")) {
    factor = walker.integer(*i, 1, kMaxFactor, "a whole number from 1 to 1000");
    ok = factor.has_value() && ok;
  }
  if (const Item* i = m->get("max")) ok = (max = walker.duration(*i, false)).has_value() && ok;
  if (const Item* i = m->get("forget_after")) {
    ok = (forget_after = walker.duration(*i, false)).has_value() && ok;
  }
  if (!ok) return false;
  if (*max < *first) {
    walker.error(*m->get("max"), "must be at least `first` (" + m->get("first")->node.Scalar() +
                                     "): blocks grow from first up to max");
    return false;
  }
  spec->block = *first;
  // Factor 1: every block lasts `first`, which is `block: first`.
  if (*factor > 1) {
    spec->block_factor = static_cast<uint32_t>(*factor);
    spec->block_max = *max;
    spec->block_forget_after = *forget_after;
  }
  return true;
}

}  // namespace sluice::config
