// DenyCache: the Redis store's memory of keys Redis has just denied, so that
// an attacker already over a limit costs no Redis round trip.
//
// When Redis denies (limit, key) for `cost` with retry_after R, the limit
// alone denies that key, for that cost or a larger one, until R has passed:
// every algorithm's retry_after is the shortest wait if nothing else consumes
// (token_bucket, gcra: the refill that makes `cost` fit; fixed_window: the
// window's end; sliding_log: the oldest entries leaving; sliding_window: the
// previous window's weight falling), other instances only consume meanwhile,
// and a larger cost needs at least as long. A limit with a block denies
// every cost during the lockout, which a denial of it always starts or
// reports. So answering such a request locally decides exactly what Redis
// would. Its Retry-After is exact too for the same cost (a charge this
// instance makes on the key drops the denial, which would now wait longer;
// another instance's charges lengthen the true wait unseen, so a client
// retrying then may be denied again, as one Redis answered just before those
// charges would be); a larger cost waits
// longer by an amount only the state knows, except in a fixed window (its
// end) and a lockout (its end): only those answer a larger cost here, the
// others send it to Redis rather than report a wait that is too short. What would end a denial
// early is a refund or a reset: this instance's own (refund(), reset()) forget the key here;
// another instance's are not seen (docs/CONFIG.md says so).
//
// Clocks. With time_source local the script decides at the caller's `now`
// and the cache compares the caller's later `now` with `decided + R`:
// exactly Redis's arithmetic. With time_source redis the script reads Redis
// TIME, which this process does not know; the cache then runs on the steady
// clock, and the denial holds until `issued + R - R / 1000`: Redis decided
// after the call was issued, and the two clocks may drift apart by 1,000 ppm
// (ClockOffset's assumption), so the local end is never later than Redis's.
// The Retry-After it reports is counted from the reply's arrival, after
// Redis decided, so it never exceeds Redis's own.
//
// A fixed window (without block) that an allowed charge leaves empty is
// remembered as denied too, for every cost until the window's end: the
// denial Redis would give the next request, learnt without asking for it.
//
// Bounded and cheap. A fixed table of `entries` slots in sets of 4, chosen
// by a keyed 64-bit hash of (limit fingerprint, key) with a random
// per-process seed, so a client can aim neither at a set nor at another
// client's entry; each set behind its own spin lock (a probe of 4 slots
// under it). A new denial takes an empty or expired slot of its set, else
// the one that expires first. Flooding it with keys only evicts denials,
// which then cost a Redis call again: it can never allow or deny wrongly.
// Two (limit, key) pairs are confused only if their 64-bit hashes are equal:
// about n / 2^64 per lookup with n entries.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "sluice/store.h"
#include "store/spin_lock.h"

namespace sluice::redis {

// One limit's denial, in the cache's clock (nanoseconds).
struct CachedDenial {
  uint64_t cost = 0;          // denied for this cost
  bool larger_costs = false;  // and any larger one, with the same wait
  int64_t until = 0;          // answered locally while now < until
  int64_t retry_at = 0;       // Retry-After reported: retry_at - now
  int64_t reset_at = 0;       // reset_after reported: reset_at - now (at least 0)
  uint64_t remaining = 0;     // what Redis said was left
};

// The denial Redis answered with `d` to a call of `cost` issued at `issued`
// and answered at `answered` (cache clock). `same_clock`: the cache's clock
// is the one the script decided with (time_source local): d.decided_at is
// then the time Redis's retry_after counts from. `same_wait`: every larger
// cost waits as long (a fixed window; a lockout, which also denies every
// smaller cost: `lockout`).
CachedDenial denial_of(const Decision& d, uint64_t cost, bool same_wait, bool lockout,
                       int64_t issued, int64_t answered, bool same_clock);

// What record() needs of a call sent to Redis.
struct DenyCall {
  struct Limit {
    uint64_t id = 0;
    uint64_t cost = 0;
    bool lockout = false;
    bool same_wait = false;  // fixed_window or lockout (denial_of)
    bool hit = false;        // answer(): a cached denial holds
    CachedDenial denial;
  };
  std::vector<Limit> limits;
  uint64_t generation = 0;
  int64_t issued = 0;
};

class DenyCache {
 public:
  static constexpr size_t kWays = 4;

  // `entries`: slots in all, rounded up to a power of two (at least kWays).
  // `caller_clock`: time_source local (see above).
  DenyCache(size_t entries, bool caller_clock);
  DenyCache(const DenyCache&) = delete;
  DenyCache& operator=(const DenyCache&) = delete;

  // The cache's clock at the caller's `now`.
  int64_t tick(Nanos now) const;

  // Before a call. True: every limit of the request has a cached denial
  // for its cost, `out` holds them and no Redis call is needed. False:
  // `call` is filled for record(). A request the store would refuse (null
  // limit, cost 0 or above the limit, a limit twice, `cluster` and limits
  // of several client keys, a concurrency limit) is never answered here, so the store reports
  // its error.
  bool answer(std::span<const AcquireRequest> requests, Nanos now, bool cluster,
              std::span<Decision> out, DenyCall* call);

  // After Redis answered `call` with `out`: remembers its denials, unless a
  // forget() came in between (its denial may predate the reset).
  void record(const DenyCall& call, std::span<const Decision> out);

  // (limit, key) was reset or given back here: its denial no longer holds.
  void forget(const Limit& limit, std::string_view key);

  // The table itself (tests).
  uint64_t identity(const Limit& limit, std::string_view key) const;
  bool find(uint64_t id, uint64_t cost, int64_t now, CachedDenial* out);
  void count_hit(uint64_t id);
  void insert(uint64_t id, const CachedDenial& denial, int64_t now, uint64_t generation);
  uint64_t generation() const { return generation_.load(std::memory_order_seq_cst); }

  // Requests answered here since creation.
  uint64_t hits() const;
  size_t capacity() const { return set_count_ * kWays; }

 private:
  struct Slot {
    uint64_t id = 0;  // 0: empty
    CachedDenial denial;
  };
  struct Set {
    store::SpinLock lock;
    Slot slots[kWays];
    std::atomic<uint64_t> hits{0};  // requests answered by a denial of this set
  };

  Set& set_of(uint64_t id) const { return sets_[id & mask_]; }
  void erase(uint64_t id);

  const uint64_t seed_;
  const bool caller_clock_;
  size_t set_count_ = 1;
  uint64_t mask_ = 0;
  std::unique_ptr<Set[]> sets_;
  std::atomic<uint64_t> generation_{0};
};

}  // namespace sluice::redis
