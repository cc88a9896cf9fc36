#include "store/redis/deny_cache.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <limits>
#include <mutex>
#include <random>

#include "core/step.h"
#include "store/key_hash.h"
#include "store/redis/clock_offset.h"

namespace sluice::redis {
namespace {

uint64_t random_seed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// The part of a store key after its first '|' (the whole key without one):
// the client key that names the request's cluster slot (state_key()).
std::string_view client_key(std::string_view key) {
  const size_t bar = key.find('|');
  return bar == std::string_view::npos ? key : key.substr(bar + 1);
}

}  // namespace

CachedDenial denial_of(const Decision& d, uint64_t cost, bool same_wait, bool lockout,
                       int64_t issued, int64_t answered, bool same_clock) {
  const int64_t retry = d.retry_after.count();
  const int64_t reset = d.reset_after.count();
  CachedDenial c;
  c.cost = lockout ? 1 : cost;
  c.larger_costs = same_wait || lockout;
  c.remaining = d.remaining;
  if (same_clock) {
    // Redis counted retry_after from decided_at, on this very clock.
    const int64_t decided = d.decided_at.count();
    c.until = decided + retry;
    c.retry_at = decided + retry;
    c.reset_at = decided + reset;
    return c;
  }
  // Redis decided somewhere between issue and answer, by its own clock,
  // which may run up to 1/kDriftDivisor faster or slower than ours: the
  // local answer ends early by that margin. The wait reported is counted
  // from the answer, so it never exceeds Redis's (a lockout's Retry-After
  // stays within its block), and errs long by the round trip.
  const int64_t drift = ceil_div(retry, ClockOffset::kDriftDivisor);
  c.until = issued + retry - drift;
  c.retry_at = answered + retry;
  c.reset_at = answered + reset;
  return c;
}

DenyCache::DenyCache(size_t entries, bool caller_clock)
    : seed_(random_seed()), caller_clock_(caller_clock) {
  const size_t sets = std::max<size_t>(1, (entries + kWays - 1) / kWays);
  set_count_ = std::bit_ceil(sets);
  mask_ = set_count_ - 1;
  sets_ = std::make_unique<Set[]>(set_count_);
}

int64_t DenyCache::tick(Nanos now) const {
  // The script decides at the caller's time in whole microseconds.
  if (caller_clock_) return now.count() - now.count() % 1'000;
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

uint64_t DenyCache::identity(const Limit& limit, std::string_view key) const {
  const uint64_t id = store::keyed_hash(key, seed_ ^ limit.fingerprint());
  return id == 0 ? 1 : id;  // 0 marks an empty slot
}

bool DenyCache::find(uint64_t id, uint64_t cost, int64_t now, CachedDenial* out) {
  Set& set = set_of(id);
  std::lock_guard<store::SpinLock> lock(set.lock);
  for (const Slot& s : set.slots) {
    if (s.id != id) continue;
    if (now >= s.denial.until || cost < s.denial.cost) return false;
    if (cost > s.denial.cost && !s.denial.larger_costs) return false;
    *out = s.denial;
    return true;
  }
  return false;
}

void DenyCache::count_hit(uint64_t id) {
  // One counter per set: threads denying different keys touch different lines.
  set_of(id).hits.fetch_add(1, std::memory_order_relaxed);
}

void DenyCache::insert(uint64_t id, const CachedDenial& denial, int64_t now, uint64_t generation) {
  Set& set = set_of(id);
  std::lock_guard<store::SpinLock> lock(set.lock);
  // Checked under the lock that forget() takes after raising the generation:
  // a denial Redis gave before a reset is either refused here or erased there.
  if (generation_.load(std::memory_order_seq_cst) != generation) return;
  // The key's older denial if it has one; else an empty or expired slot;
  // else the denial that ends first, which saves the fewest Redis calls.
  const auto rank = [&](const Slot& s) {
    if (s.id == id) return std::numeric_limits<int64_t>::min();
    if (s.id == 0 || s.denial.until <= now) return std::numeric_limits<int64_t>::min() + 1;
    return s.denial.until;
  };
  Slot* victim = &set.slots[0];
  for (Slot& s : set.slots) {
    if (rank(s) < rank(*victim)) victim = &s;
  }
  victim->id = id;
  victim->denial = denial;
}

void DenyCache::forget(const Limit& limit, std::string_view key) {
  generation_.fetch_add(1, std::memory_order_seq_cst);
  erase(identity(limit, key));
}

void DenyCache::erase(uint64_t id) {
  Set& set = set_of(id);
  std::lock_guard<store::SpinLock> lock(set.lock);
  for (Slot& s : set.slots) {
    if (s.id == id) s = Slot{};
  }
}

bool DenyCache::answer(std::span<const AcquireRequest> requests, Nanos now, bool cluster,
                       std::span<Decision> out, DenyCall* call) {
  const size_t n = requests.size();
  call->limits.clear();
  if (n == 0 || out.size() != n) return false;
  if (caller_clock_ && now.count() < 0) return false;
  call->generation = generation();
  call->issued = tick(now);
  call->limits.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const AcquireRequest& r = requests[i];
    // A concurrency slot comes free when any instance gives one back, which
    // this one would not see: such requests always ask Redis.
    if (r.limit == nullptr || !core::check_cost(*r.limit, r.cost).ok() ||
        r.limit->algorithm() == Algorithm::kConcurrency) {
      call->limits.clear();
      return false;
    }
    if (cluster && client_key(r.key) != client_key(requests[0].key)) {
      call->limits.clear();
      return false;
    }
    const uint64_t id = identity(*r.limit, r.key);
    for (size_t j = 0; j < i; ++j) {
      if (call->limits[j].id == id) {
        call->limits.clear();
        return false;
      }
    }
    const bool lockout = r.limit->block().count() > 0;
    call->limits[i] = {
        id, r.cost, lockout, lockout || r.limit->algorithm() == Algorithm::kFixedWindow, false, {}};
  }
  // Every limit must be known denied here. One would decide the request
  // (it alone denies), but the others' answers are Redis's to give: what
  // they have left (RateLimit headers list every limit), and for a limit
  // with a block whether it denies too and so starts its lockout.
  for (DenyCall::Limit& l : call->limits) {
    l.hit = find(l.id, l.cost, call->issued, &l.denial);
    if (!l.hit) return false;
  }
  count_hit(call->limits[0].id);
  for (size_t i = 0; i < n; ++i) {
    const CachedDenial& d = call->limits[i].denial;
    Decision& o = out[i];
    o = Decision{};
    o.limit = requests[i].limit->size();
    o.decided_at = caller_clock_ ? Nanos{call->issued} : now;
    o.remaining = d.remaining;
    o.retry_after = Nanos{d.retry_at - call->issued};
    o.reset_after = Nanos{std::max<int64_t>(0, d.reset_at - call->issued)};
  }
  return true;
}

void DenyCache::record(const DenyCall& call, std::span<const Decision> out) {
  if (call.limits.size() != out.size()) return;
  const int64_t answered = caller_clock_ ? call.issued : tick(Nanos{0});
  if (all_allowed(out)) {
    // Charged: a denial held for a larger cost now waits longer than Redis
    // said. Dropped, so that the next such request learns its wait from Redis.
    // A fixed window (without block) this charge left empty denies every
    // cost until its end, the wait Redis would give the next request: known
    // now, without that request's call. (With a block the next request
    // starts a lockout, which only Redis records.)
    for (size_t i = 0; i < out.size(); ++i) {
      const DenyCall::Limit& l = call.limits[i];
      const Decision& d = out[i];
      if (l.same_wait && !l.lockout && d.remaining == 0 && d.reset_after.count() > 0) {
        Decision next = d;
        next.allowed = false;
        next.retry_after = d.reset_after;
        const CachedDenial denial =
            denial_of(next, 1, true, false, call.issued, answered, caller_clock_);
        if (denial.until > answered) {
          insert(l.id, denial, answered, call.generation);
          continue;
        }
      }
      erase(l.id);
    }
    return;
  }
  for (size_t i = 0; i < out.size(); ++i) {
    const Decision& d = out[i];
    if (d.allowed || d.retry_after.count() <= 0) continue;
    const DenyCall::Limit& l = call.limits[i];
    const CachedDenial denial =
        denial_of(d, l.cost, l.same_wait, l.lockout, call.issued, answered, caller_clock_);
    if (denial.until <= answered) continue;  // over already
    insert(l.id, denial, answered, call.generation);
  }
}

uint64_t DenyCache::hits() const {
  uint64_t total = 0;
  for (size_t i = 0; i < set_count_; ++i) total += sets_[i].hits.load(std::memory_order_relaxed);
  return total;
}

}  // namespace sluice::redis
