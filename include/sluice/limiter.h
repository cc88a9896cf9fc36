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
//
// Concurrency limits (Limit::concurrency) count what is in flight: take a
// Permit with acquire(), and its slots go back when it is destroyed (or
// release() is called), exactly once:
//
//   sluice::Limiter limiter(store, {sluice::Limit::concurrency(4,
//   std::chrono::seconds(60)).value()}); sluice::Result<sluice::Permit> p =
//   limiter.acquire("report:42"); if (p.ok() && p->allowed()) { /* run the report */ }   // the
//   slot goes back here
//
// A slot never given back (a crash) frees itself after the lease.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/clock.h"
#include "sluice/decision.h"
#include "sluice/limit.h"
#include "sluice/result.h"
#include "sluice/store.h"

namespace sluice {

class Limiter;

// The slots of one allowed acquire(), held until release() or destruction.
// Move-only; the Limiter that made it must outlive it. Not thread-safe (one
// owner), but permits of one Limiter may live on any threads.
class Permit {
 public:
  Permit() = default;  // holds nothing
  Permit(Permit&& other) noexcept;
  Permit& operator=(Permit&& other) noexcept;
  Permit(const Permit&) = delete;
  Permit& operator=(const Permit&) = delete;
  ~Permit();

  // The most restrictive decision, as Limiter::try_acquire returns it.
  const Decision& decision() const { return decision_; }
  bool allowed() const { return decision_.allowed; }
  // Whether it still holds slots to give back.
  bool held() const { return limiter_ != nullptr; }

  // Gives the slots back now (Store::refund of each concurrency limit's
  // charge); later calls, and the destructor, do nothing. The store's error
  // if it could not (the slots then free themselves when their lease ends).
  Status release();

 private:
  friend class Limiter;
  Limiter* limiter_ = nullptr;  // null: nothing held
  std::string key_;
  uint64_t cost_ = 0;
  Decision decision_;
};

class Limiter {
 public:
  Limiter(std::shared_ptr<Store> store, std::vector<Limit> limits,
          const Clock& clock = SystemClock::instance());

  // Charges `cost` to `key` under every limit, or to none. Returns the most
  // restrictive decision (see most_restrictive()).
  Result<Decision> try_acquire(std::string_view key, uint64_t cost = 1);

  // try_acquire() for a request that ends later: when allowed, the Permit
  // holds the slots of the concurrency limits (if any) until it goes. Other
  // limits are charged as try_acquire() charges them and stay charged. A
  // denied Permit holds nothing.
  Result<Permit> acquire(std::string_view key, uint64_t cost = 1);

  // Forgets `key` under every limit.
  Status reset(std::string_view key);

  const std::vector<Limit>& limits() const { return limits_; }

 private:
  friend class Permit;
  // Refunds `permit`'s charge under every concurrency limit.
  Status give_back(const Permit& permit);

  std::shared_ptr<Store> store_;
  std::vector<Limit> limits_;
  const Clock& clock_;
};

}  // namespace sluice
