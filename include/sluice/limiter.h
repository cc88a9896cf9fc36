// Limiter: the entry point for an embedding program.
//
//   auto store = std::make_shared<sluice::MemoryStore>();
//   auto limit = sluice::Limit::token_bucket(100, 10, std::chrono::seconds(1)).value();
//   sluice::Limiter limiter(store, {limit});
//   sluice::Result<sluice::Decision> d = limiter.try_acquire("user:42");
//   if (d.ok() && d->allowed) { /* serve */ }
//
// A Limiter applies its limits (one or several, all-or-nothing) to a key. It
// reads its clock once per call.
//
// Thread-safety: try_acquire may be called from any number of threads at once.
// Failure: an error Result for a cost of 0, a cost above a limit's size (no
// wait would ever allow it), or a store that cannot answer. Being over the
// limit is not an error: it is a Decision with allowed == false.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "sluice/clock.h"
#include "sluice/decision.h"
#include "sluice/limit.h"
#include "sluice/result.h"
#include "sluice/store.h"

namespace sluice {

class Limiter {
 public:
  Limiter(std::shared_ptr<Store> store, std::vector<Limit> limits,
          const Clock& clock = SystemClock::instance());

  // Charges `cost` to `key` under every limit, or to none. Returns the most
  // restrictive decision (see most_restrictive()).
  Result<Decision> try_acquire(std::string_view key, uint64_t cost = 1);

  // Forgets `key` under every limit.
  Status reset(std::string_view key);

  const std::vector<Limit>& limits() const { return limits_; }

 private:
  std::shared_ptr<Store> store_;
  std::vector<Limit> limits_;
  const Clock& clock_;
};

}  // namespace sluice
