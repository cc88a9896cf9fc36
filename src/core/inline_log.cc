#include "core/inline_log.h"

#include <algorithm>

namespace sluice::core {

bool InlineLog::take_back(int64_t at_ns, uint64_t cost) {
  Entry entries[kCapacity] = {at(0), at(1)};
  size_t n = size();
  size_t i = 0;
  while (i < n && entries[i].at_ns < at_ns) ++i;
  bool taken = false;
  while (cost > 0 && i < n) {
    const uint64_t take = std::min(entries[i].cost, cost);
    entries[i].cost -= take;
    cost -= take;
    taken = taken || take > 0;
    if (entries[i].cost > 0) {
      ++i;
      continue;
    }
    // Close the gap (the log stays sorted).
    if (i + 1 < n) entries[i] = entries[i + 1];
    --n;
  }
  // Pack what is left: fewer entries and smaller costs always fit.
  *this = InlineLog();
  for (size_t k = 0; k < n; ++k) (void)push_back(entries[k].at_ns, entries[k].cost);
  return taken;
}

}  // namespace sluice::core
