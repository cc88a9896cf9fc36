#include "sluice/memory_store.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/debit.h"
#include "core/inline_log.h"
#include "core/refund.h"
#include "core/sliding_log.h"
#include "core/step.h"
#include "store/key_hash.h"
#include "store/spin_lock.h"

namespace sluice {
namespace {

// A fingerprint is two flags and 62 bits of keyed hash; 0 marks an empty slot.
//
// The top bit marks a slot whose state is a sliding log (sliding_log,
// concurrency): an InlineLog while it fits, else a heap-allocated SlidingLog
// whose address is state.a (see heap_log()). It is part of the identity, so
// that a sliding_log limit can never find another algorithm's state and read
// it as a pointer.
constexpr uint64_t kLogBit = uint64_t{1} << 63;
// Bit 62 of a held fingerprint marks a slot whose last decision denied: the
// state eviction keeps longest (see evict_one). It is not part of the
// identity and never set in a fingerprint being looked up: lookups compare
// without it (one AND per probe) and home() ignores it, so a slot never moves
// when it flips. A slot has no spare byte (32 bytes: one probe per cache
// line), and a bit of `lru` or `expires_s` would cost a read-modify-write on
// every access. Tried and dropped: the mark in the top bit (compared as
// `fp << 1`, no mask) and the log flag in bit 62 took fewer instructions but
// made sliding_log decisions 20-50% slower in CPU time, for no cause found.
constexpr uint64_t kDenyBit = uint64_t{1} << 62;
constexpr uint64_t kEmpty = 0;
// A lockout (Limit::block) lives in a slot of its own beside the limit's
// state, so the state keeps refilling underneath: its fingerprint is the
// state's with these low bits flipped, which leaves the shard (bits 40 and
// up) the same, so one lock guards both. Its state is {until_ns, block_ns}:
// when the last block ends and how long it lasted, the history a growing
// lockout (LimitSpec::block_factor) starts the next one from; such a slot
// is kept until forget_after past its end.
constexpr uint64_t kBlockSalt = 0x5bd1e99573ULL;  // below 2^40
// Tables grow by half until they reach the size their share of max_keys
// needs at this load; linear probing stays short below it.
constexpr double kMaxLoad = 0.8;
constexpr size_t kInitialCapacity = 16;
constexpr int kEvictionSample = 8;
// A table this small is scanned whole for a victim: 1 KiB read in order costs
// no more than the sample's random probes, and the choice is then exact.
constexpr size_t kEvictionScanWholeTable = 32;
constexpr int kSweepPerInsert = 2;

// Aligned so that a slot never straddles two cache lines: one miss per probe.
struct alignas(32) Slot {
  uint64_t fp;
  core::PackedState state;
  uint32_t expires_s;  // seconds since the epoch, rounded up, when the state is full again
  uint32_t lru;        // shard tick of the last access
};
static_assert(sizeof(Slot) == 32);

uint32_t seconds_up(int64_t ns) {
  if (ns <= 0) return 0;
  const int64_t s = (ns + 999'999'999) / 1'000'000'000;
  return s >= UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(s);
}

uint32_t seconds_down(int64_t ns) {
  if (ns <= 0) return 0;
  const int64_t s = ns / 1'000'000'000;
  return s >= UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(s);
}

// When the state `next`, written at `now` by a decision that reported
// `reset_after`, is full again (seconds, rounded up). A token bucket's
// reset_after counts from its own clock, which is ahead of `now` when time
// ran backwards: it refills only from then on, so forgetting it at
// now + reset_after would hand out tokens it does not have.
uint32_t full_again_s(const Limit& limit, const core::PackedState& next, Nanos now,
                      Nanos reset_after) {
  int64_t from = now.count();
  if (limit.algorithm() == Algorithm::kTokenBucket)
    from = std::max(from, core::detail::unpack<core::TokenBucketState>(next).last_ns);
  return seconds_up(from + reset_after.count());
}

// Asks for the line in a writable state (the decision will write it), so a
// line last written by another core moves once, not shared then upgraded.
inline void prefetch_for_write(const void* p) {
#if defined(__x86_64__)
  // PREFETCHW; a no-op on x86 processors that lack it. Never faults.
  asm volatile("prefetchw %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 1);
#endif
}

// A log slot's state is an InlineLog (core/inline_log.h: b != 0), nothing
// yet ({0, 0}, an empty InlineLog), or, once the log outgrew the slot, the
// address of a SlidingLog on the heap in a, with b == 0.
bool heap_log(const core::PackedState& state) {
  return !core::InlineLog::packed_in(state) && state.a != 0;
}

core::SlidingLog* log_of(const Slot& slot) {
  return std::bit_cast<core::SlidingLog*>(slot.state.a);
}

// The sliding_log step on a log slot's state, wherever the log is: writes
// the decision, returns the count of expired entries for commit_log().
size_t log_step(const Limit& limit, const core::PackedState& state, Nanos now, uint64_t cost,
                Decision& decision) {
  if (heap_log(state)) {
    const auto* log = std::bit_cast<const core::SlidingLog*>(state.a);
    return core::sliding_log(limit, *log, now, cost, decision);
  }
  return core::sliding_log(limit, core::InlineLog(state), now, cost, decision);
}

uint64_t random_seed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

}  // namespace

class alignas(64) MemoryStore::Shard {
 public:
  Shard() = default;
  ~Shard() { clear(); }

  void init(size_t max_size) {
    max_size_ = max_size;
    max_capacity_ = std::max<size_t>(static_cast<size_t>(max_size / kMaxLoad) + 1, 2);
    rng_ = random_seed() | 1;
  }

  // Starts loading fp's home slot into this core's cache, before the caller
  // takes the lock: the miss (the slot table is larger than the caches at
  // many keys) then overlaps the hash, the lock and the previous decision's
  // tail. Reads the table's address and size without the lock, through
  // copies that grow() and clear() update; a stale pair only prefetches a
  // useless address (a prefetch never faults).
  void prefetch(uint64_t fp) const {
    const uintptr_t base = table_hint_.load(std::memory_order_relaxed);
    const size_t capacity = capacity_hint_.load(std::memory_order_relaxed);
    if (capacity == 0) return;
    prefetch_for_write(&lock);
    prefetch_for_write(reinterpret_cast<const void*>(base + home(fp, capacity) * sizeof(Slot)));
  }

  size_t find(uint64_t fp) const {
    if (capacity_ == 0) return npos;
    for (size_t i = home(fp);; i = next(i)) {
      if ((slots_[i].fp & ~kDenyBit) == fp) return i;
      if (slots_[i].fp == kEmpty) return npos;
    }
  }

  // A saturated expiry (past 2106-02-07, where 32 bits of seconds end) says
  // "not before then", not "then": it never expires, or every state written
  // after that date would be forgotten at once and limit nothing. Eviction
  // still frees its slot when the shard is full.
  bool expired(const Slot& slot, Nanos now) const {
    return slot.expires_s != UINT32_MAX && seconds_down(now.count()) >= slot.expires_s;
  }

  Slot& at(size_t i) { return slots_[i]; }
  uint32_t touch() { return ++tick_; }
  uint32_t tick() const { return tick_; }

  // Inserts fp (absent). In a full shard evicts one slot (evict_one), but
  // never a slot touched since `protected_since` (the current batch).
  size_t insert(uint64_t fp, Nanos now, uint32_t protected_since) {
    sweep(now, protected_since);
    if (size_ >= max_size_) evict_one(now, protected_since);
    if (size_ + 1 > static_cast<size_t>(capacity_ * kMaxLoad) && capacity_ < max_capacity_) grow();
    size_t i = home(fp);
    while (slots_[i].fp != kEmpty) i = next(i);
    slots_[i] = Slot{fp, {0, 0}, 0, 0};
    ++size_;
    size_atomic_.store(size_, std::memory_order_relaxed);
    return i;
  }

  void erase(size_t i) {
    free_state(slots_[i]);
    // Backward-shift deletion: pull later members of the probe run into the
    // hole, so lookups never need tombstones.
    size_t hole = i;
    for (size_t j = next(hole);; j = next(j)) {
      if (slots_[j].fp == kEmpty) break;
      const size_t h = home(slots_[j].fp);
      // Move j into the hole unless its home lies cyclically in (hole, j].
      const bool home_after_hole = hole <= j ? (h > hole && h <= j) : (h > hole || h <= j);
      if (!home_after_hole) {
        slots_[hole] = slots_[j];
        hole = j;
      }
    }
    slots_[hole].fp = kEmpty;
    --size_;
    size_atomic_.store(size_, std::memory_order_relaxed);
  }

  size_t collect_expired(Nanos now) {
    size_t dropped = 0;
    for (size_t i = 0; i < capacity_;) {
      if (slots_[i].fp != kEmpty && expired(slots_[i], now)) {
        erase(i);  // may shift another slot into i: look at i again
        ++dropped;
      } else {
        ++i;
      }
    }
    return dropped;
  }

  void clear() {
    for (size_t i = 0; i < capacity_; ++i) {
      if (slots_[i].fp != kEmpty) free_state(slots_[i]);
    }
    slots_.reset();
    capacity_ = size_ = 0;
    publish_table();
    size_atomic_.store(0, std::memory_order_relaxed);
  }

  // Records an allowed log step in `slot`: in the slot while the log fits
  // an InlineLog, else in a SlidingLog on the heap, which goes back into
  // the slot once it holds one entry or none (hysteresis: a key that moves
  // between one and three entries allocates once per round, not per call).
  void commit_log(Slot& slot, size_t expired, Nanos now, uint64_t cost) {
    if (!heap_log(slot.state)) {
      core::InlineLog log(slot.state);
      if (core::sliding_log_commit(log, expired, now, cost)) {
        slot.state = log.packed();
        return;
      }
      // A spill: the same entries, on the heap, then the commit there.
      auto* heap = new core::SlidingLog();
      for (size_t i = 0; i < log.size(); ++i) heap->push_back(log.at(i).at_ns, log.at(i).cost);
      log_bytes_ += static_cast<int64_t>(heap->memory_bytes());
      slot.state = {std::bit_cast<int64_t>(heap), 0};
    }
    core::SlidingLog* log = log_of(slot);
    const int64_t before = static_cast<int64_t>(log->memory_bytes());
    core::sliding_log_commit(*log, expired, now, cost);
    log_bytes_ += static_cast<int64_t>(log->memory_bytes()) - before;
    shrink_log(slot);
  }

  // Gives back a charge of a log slot (Store::refund).
  void refund_log(Slot& slot, const RefundRequest& r, Nanos now) {
    if (!heap_log(slot.state)) {
      core::InlineLog log(slot.state);
      if (core::sliding_log_refund(log, *r.limit, r.charged_at, now, r.cost))
        slot.state = log.packed();
      return;
    }
    core::SlidingLog* log = log_of(slot);
    const int64_t before = static_cast<int64_t>(log->memory_bytes());
    core::sliding_log_refund(*log, *r.limit, r.charged_at, now, r.cost);
    log_bytes_ += static_cast<int64_t>(log->memory_bytes()) - before;
    shrink_log(slot);
  }

  // One limit on one key, the common request; a lockout (Limit::block) is
  // checked first and started when the limit denies. Call with `lock` held.
  // Writes the caller's decision in place: a Decision returned by value was
  // assembled on the stack and copied with wide loads of narrow stores just
  // made, which stall store-to-load forwarding (perf: half the samples of
  // MemoryStore::acquire sat on those loads).
  void acquire_one(const AcquireRequest& r, uint64_t fp, Nanos now, Decision& out) {
    if (r.limit->block().count() == 0) return decide_one(r, fp, now, out);
    if (blocked(fp, *r.limit, now, &out)) return;
    // The state decide_one touches is spared if the lockout's insertion evicts.
    const uint32_t since = tick_ + 1;
    decide_one(r, fp, now, out);
    if (!out.allowed) out = start_block(fp, *r.limit, now, since);
  }

  // A lockout in force on fp's key: fills `out` with its denial.
  bool blocked(uint64_t fp, const Limit& limit, Nanos now, Decision* out) {
    const size_t b = find(block_fingerprint(fp));
    if (b == npos || slots_[b].state.a <= now.count()) return false;
    slots_[b].lru = touch();
    *out = block_decision(limit, Nanos{slots_[b].state.a - now.count()});
    return true;
  }

  // Starts the lockout of fp's key (its limit just denied) and returns the
  // denial it answers with.
  Decision start_block(uint64_t fp, const Limit& limit, Nanos now, uint32_t protected_since) {
    const uint64_t bfp = block_fingerprint(fp);
    size_t b = find(bfp);
    Nanos block = limit.block();
    if (b == npos) {
      b = insert(bfp, now, protected_since);
    } else {
      block = limit.next_block(Nanos{slots_[b].state.b}, Nanos{slots_[b].state.a}, now);
    }
    Slot& s = slots_[b];
    const int64_t until = now.count() + block.count();
    // Marked as denying: eviction keeps it as long as anything else can go.
    s.fp = bfp | kDenyBit;
    s.state = {until, block.count()};
    s.expires_s = seconds_up(until + limit.spec().block_forget_after.count());
    s.lru = touch();
    return block_decision(limit, block);
  }

  static uint64_t block_fingerprint(uint64_t fp) { return (fp ^ kBlockSalt) & ~kLogBit; }

  static Decision block_decision(const Limit& limit, Nanos left) {
    Decision d;
    d.limit = limit.size();
    d.reset_after = left;
    d.retry_after = left;
    return d;
  }

  // Gives back a charge (Store::refund). Call with `lock` held.
  void refund_one(const RefundRequest& r, uint64_t fp, Nanos now) {
    if (r.debit) return debit_one(r, fp, now);
    const size_t slot = find(fp);
    if (slot == npos) return;  // forgotten: full already
    Slot& s = slots_[slot];
    if (r.limit->keeps_log()) return refund_log(s, r, now);
    if (expired(s, now)) return;
    // The expiry stays: a refund only brings the state back to full sooner.
    if (auto next = core::refund(*r.limit, s.state, r.charged_at, now, r.cost)) s.state = *next;
  }

  // Charges a settled cost's excess (RefundRequest::debit). Call with
  // `lock` held. The expiry moves out: a debt makes the state full later.
  void debit_one(const RefundRequest& r, uint64_t fp, Nanos now) {
    if (r.limit->keeps_log()) return;  // no debt in a log
    size_t slot = find(fp);
    std::optional<core::PackedState> state;
    if (slot != npos && !expired(slots_[slot], now)) state = slots_[slot].state;
    const std::optional<core::Debited> next =
        core::debit(*r.limit, state, r.charged_at, now, r.cost);
    if (!next) return;
    if (slot == npos) slot = insert(fp, now, tick_ + 1);
    Slot& s = slots_[slot];
    s.fp = fp;
    s.state = next->state;
    s.expires_s = full_again_s(*r.limit, s.state, now, next->reset_after);
    s.lru = touch();
  }

  // One limit on one key without a lockout: one probe, and the state written
  // back in place. Decides and changes state exactly as the batch path of
  // MemoryStore::acquire does for a batch of one. Call with `lock` held.
  void decide_one(const AcquireRequest& r, uint64_t fp, Nanos now, Decision& out) {
    const uint32_t batch_start = tick_ + 1;
    size_t slot = find(fp);
    const bool found = slot != npos;
    if (found) slots_[slot].lru = touch();
    if (r.limit->keeps_log()) {
      const size_t expired = log_step(
          *r.limit, found ? slots_[slot].state : core::PackedState{0, 0}, now, r.cost, out);
      if (out.allowed) {
        // insert() may move slots, but `slot` is only used after it. A slot
        // found was touched above; only a new one needs its tick.
        if (!found) {
          slot = insert(fp, now, batch_start);
          slots_[slot].lru = touch();
        }
        Slot& s = slots_[slot];
        commit_log(s, expired, now, r.cost);
        s.fp = fp;
        s.expires_s = seconds_up(now.count() + out.reset_after.count());
      } else if (found) {
        slots_[slot].fp |= kDenyBit;
      }
      return;
    }
    const bool live = found && !expired(slots_[slot], now);
    // `state` and `next` are pinned to general registers (the empty asm
    // statements). Without that GCC merges the values of either branch in an
    // SSE register, reached from the two general registers a call returns
    // them in by two 8-byte stores and one 16-byte load of the stack, a
    // store-forwarding stall (perf: a fifth of this function, per decision).
    core::PackedState state = live ? slots_[slot].state : core::fresh_state(*r.limit, now);
    asm("" : "+r"(state.a), "+r"(state.b));
    core::PackedState next = core::step(*r.limit, state, now, r.cost, r.max_wait, out);
    asm("" : "+r"(next.a), "+r"(next.b));
    if (out.allowed) {
      // A slot found was touched above; only a new one needs its tick.
      if (!found) {
        slot = insert(fp, now, batch_start);
        slots_[slot].lru = touch();
      }
      Slot& s = slots_[slot];
      s.fp = fp;
      s.state = next;
      s.expires_s = full_again_s(*r.limit, s.state, now, out.reset_after);
    } else if (found) {
      // Kept through eviction while it denies (evict_one); an OR on the
      // slot, already being written, is the cheapest form (callgrind).
      slots_[slot].fp |= kDenyBit;
    }
  }

  size_t size() const { return size_atomic_.load(std::memory_order_relaxed); }
  size_t memory_bytes() const { return capacity_ * sizeof(Slot) + static_cast<size_t>(log_bytes_); }

  static constexpr size_t npos = SIZE_MAX;

 private:
  size_t home(uint64_t fp) const { return home(fp, capacity_); }
  static size_t home(uint64_t fp, size_t capacity) {
    // Remix so that the slot position is independent of the bits that chose the shard.
    // Only the hash bits: a slot must not move when its deny mark flips.
    const uint64_t h = (fp & ~(kLogBit | kDenyBit)) * 0x9e3779b97f4a7c15ULL;
    return static_cast<size_t>((static_cast<unsigned __int128>(h) * capacity) >> 64);
  }
  void publish_table() {
    table_hint_.store(reinterpret_cast<uintptr_t>(slots_.get()), std::memory_order_relaxed);
    capacity_hint_.store(capacity_, std::memory_order_relaxed);
  }
  size_t next(size_t i) const { return i + 1 == capacity_ ? 0 : i + 1; }

  void free_state(Slot& slot) {
    if ((slot.fp & kLogBit) && heap_log(slot.state)) {
      core::SlidingLog* log = log_of(slot);
      log_bytes_ -= static_cast<int64_t>(log->memory_bytes());
      delete log;
    }
  }

  // A heap log down to one entry or none goes back into its slot.
  void shrink_log(Slot& slot) {
    core::SlidingLog* log = log_of(slot);
    if (log->size() > 1) return;
    core::InlineLog small;
    if (!log->empty() && !small.push_back(log->at(0).at_ns, log->at(0).cost)) return;
    log_bytes_ -= static_cast<int64_t>(log->memory_bytes());
    delete log;
    slot.state = small.packed();
  }

  void grow() {
    const size_t grown = capacity_ == 0 ? std::min(kInitialCapacity, max_capacity_)
                                        : std::min(max_capacity_, capacity_ + capacity_ / 2 + 1);
    std::unique_ptr<Slot[]> old = std::move(slots_);
    const size_t old_capacity = capacity_;
    slots_.reset(new Slot[grown]());
    capacity_ = grown;
    publish_table();
    for (size_t i = 0; i < old_capacity; ++i) {
      if (old[i].fp == kEmpty) continue;
      size_t j = home(old[i].fp);
      while (slots_[j].fp != kEmpty) j = next(j);
      slots_[j] = old[i];
    }
  }

  uint64_t random() {
    rng_ ^= rng_ << 13;
    rng_ ^= rng_ >> 7;
    rng_ ^= rng_ << 17;
    return rng_;
  }

  // Amortised idle expiry: look at a couple of slots per insertion.
  void sweep(Nanos now, uint32_t protected_since) {
    for (int k = 0; k < kSweepPerInsert && capacity_ > 0; ++k) {
      if (sweep_cursor_ >= capacity_) sweep_cursor_ = 0;
      Slot& s = slots_[sweep_cursor_];
      if (s.fp != kEmpty && expired(s, now) && !is_protected(s, protected_since)) {
        erase(sweep_cursor_);
      } else {
        ++sweep_cursor_;
      }
    }
  }

  // Touched by the current batch: lru in [protected_since, tick_], cyclically.
  // Before the batch's first touch in this shard the range is empty (tick_ is
  // protected_since - 1), so nothing is protected: a request for a new key
  // touches nothing before it inserts, and must still be able to evict.
  bool is_protected(const Slot& s, uint32_t protected_since) const {
    const uint32_t batch_ticks = tick_ - protected_since + 1;
    return static_cast<uint32_t>(s.lru - protected_since) < batch_ticks;
  }

  // Which state to give up. Dropping a state makes its key full again: the
  // store forgets what the key has used, in the key's favour. So:
  // 1. An expired state first: it is full already, dropping it changes no
  //    decision.
  // 2. Then the state that would be full again soonest (smallest expires_s):
  //    the least forgotten, and forgotten for the shortest time. Ties (expiry
  //    has one-second resolution) go to the least recently used, so among
  //    equals a key in use keeps its state.
  // 3. A state whose last decision denied only when there is nothing else:
  //    it is what holds a client at its limit, and a client flooding new keys
  //    must not be able to buy its eviction (LRU would hand it over: the
  //    flood makes the denied key the least recently used). Among these too,
  //    the one full again soonest.
  // expires_s measures time, not tokens, so states of different limits
  // compare by how long their loss would matter.
  bool evict_before(const Slot& a, const Slot& b) const {
    const bool a_denies = (a.fp & kDenyBit) != 0;
    const bool b_denies = (b.fp & kDenyBit) != 0;
    if (a_denies != b_denies) return b_denies;
    if (a.expires_s != b.expires_s) return a.expires_s < b.expires_s;
    return tick_ - a.lru > tick_ - b.lru;
  }

  // The first in evict_before() order of a sample of occupied slots, as Redis
  // samples for approximate LRU, or of the whole table when it is small. An
  // expired slot is taken at once. Never a slot of the current batch: falls
  // back to a scan of the whole table when the sample finds only those.
  void evict_one(Nanos now, uint32_t protected_since) {
    size_t victim = npos;
    // True when i is expired: nothing comes before it.
    const auto consider = [&](size_t i) {
      const Slot& s = slots_[i];
      if (s.fp == kEmpty || is_protected(s, protected_since)) return false;
      if (expired(s, now)) {
        victim = i;
        return true;
      }
      if (victim == npos || evict_before(s, slots_[victim])) victim = i;
      return false;
    };
    if (capacity_ > kEvictionScanWholeTable) {
      for (int k = 0; k < kEvictionSample; ++k) {
        size_t i = static_cast<size_t>(random() % capacity_);
        for (size_t steps = 0; slots_[i].fp == kEmpty && steps < capacity_; ++steps) i = next(i);
        if (consider(i)) break;
      }
    }
    if (victim == npos) {
      for (size_t i = 0; i < capacity_; ++i) {
        if (consider(i)) break;
      }
    }
    if (victim != npos) erase(victim);
  }

  // Two cache lines per shard. The first is read by every decision but
  // written only when the table is allocated: both cores can keep a copy.
  std::atomic<uintptr_t> table_hint_{0};  // slots_ and capacity_, for prefetch()
  std::atomic<size_t> capacity_hint_{0};
  std::unique_ptr<Slot[]> slots_;
  size_t capacity_ = 0;
  size_t max_capacity_ = 0;
  size_t max_size_ = 0;

 public:
  // The second is written by every decision: the lock and what it guards
  // that changes per decision or per insertion. One line moves between cores
  // when two threads use one shard, not two.
  alignas(64) mutable store::SpinLock lock;

 private:
  uint32_t tick_ = 0;
  size_t size_ = 0;
  size_t sweep_cursor_ = 0;
  uint64_t rng_ = 1;
  int64_t log_bytes_ = 0;
  std::atomic<size_t> size_atomic_{0};
};

MemoryStore::MemoryStore(MemoryStoreOptions options) {
  max_keys_ = std::max<size_t>(options.max_keys, 1);
  // Keep at least 64 keys per shard: with fewer, eviction inside a shard would
  // choose among too few states to spare the ones that matter.
  size_t shards = std::bit_ceil(std::max<size_t>(options.shards, 1));
  while (shards > 1 && max_keys_ / shards < 64) shards /= 2;
  shard_count_ = shards;
  shard_mask_ = shards - 1;
  seed_ = options.seed.has_value() ? *options.seed : random_seed();
  shards_ = std::make_unique<Shard[]>(shard_count_);
  for (size_t i = 0; i < shard_count_; ++i) {
    // Split max_keys exactly: the shards' bounds add up to max_keys.
    shards_[i].init(max_keys_ / shard_count_ + (i < max_keys_ % shard_count_ ? 1 : 0));
  }
}

MemoryStore::~MemoryStore() = default;

namespace {

uint64_t fingerprint(const Limit& limit, std::string_view key, uint64_t seed) {
  uint64_t fp = store::keyed_hash(key, seed ^ limit.fingerprint()) & ~(kLogBit | kDenyBit);
  // kBlockSalt itself would give its lockout slot the empty fingerprint.
  if (fp == kEmpty || fp == kBlockSalt) fp = 1;
  if (limit.keeps_log()) fp |= kLogBit;
  return fp;
}

// Small batches (the common case: one to a few limits per request) live on
// the stack; larger ones allocate.
template <class T, size_t N>
class SmallVector {
 public:
  explicit SmallVector(size_t n) : size_(n) {
    if (n > N) heap_.resize(n);
  }
  T& operator[](size_t i) { return size_ > N ? heap_[i] : inline_[i]; }
  size_t size() const { return size_; }

 private:
  size_t size_;
  T inline_[N]{};
  std::vector<T> heap_;
};

struct Pending {
  uint64_t fp = 0;
  size_t shard = 0;
  size_t slot = 0;  // index found in phase 1, or npos
  core::PackedState next{0, 0};
  size_t log_expired = 0;  // keeps_log(): entries the commit drops
  bool blocked = false;    // a lockout in force answered for it
};

}  // namespace

Status MemoryStore::acquire(std::span<const AcquireRequest> requests, Nanos now,
                            std::span<Decision> out) {
  const size_t n = requests.size();
  if (out.size() != n) {
    return Error{ErrorCode::kInvalidArgument, "acquire: one output decision per request needed"};
  }
  if (n == 0) return {};
  if (n == 1) {
    // The common case, without the batch machinery. The checks are those of
    // the batch path (check_cost() is called only to build its error).
    const AcquireRequest& r = requests[0];
    if (r.limit == nullptr) return Error{ErrorCode::kInvalidArgument, "acquire: null limit"};
    if (r.cost == 0 || r.cost > r.limit->size()) return core::check_cost(*r.limit, r.cost);
    if (r.max_wait.count() != 0) {
      if (Status s = core::check_max_wait(*r.limit, r.max_wait); !s.ok()) return s;
    }
    const uint64_t fp = fingerprint(*r.limit, r.key, seed_);
    Shard& shard = shards_[static_cast<size_t>(fp >> 40) & shard_mask_];
    shard.prefetch(fp);
    std::lock_guard<store::SpinLock> guard(shard.lock);
    shard.acquire_one(r, fp, now, out[0]);
    out[0].decided_at = now;
    return {};
  }
  return acquire_batch(requests, now, out);
}

// Kept out of acquire() so that the one-limit path stays a small function.
[[gnu::noinline]] Status MemoryStore::acquire_batch(std::span<const AcquireRequest> requests,
                                                    Nanos now, std::span<Decision> out) {
  const size_t n = requests.size();
  SmallVector<Pending, 4> pending(n);
  for (size_t i = 0; i < n; ++i) {
    const AcquireRequest& r = requests[i];
    if (r.limit == nullptr) return Error{ErrorCode::kInvalidArgument, "acquire: null limit"};
    if (Status s = core::check_cost(*r.limit, r.cost); !s.ok()) return s;
    if (Status s = core::check_max_wait(*r.limit, r.max_wait); !s.ok()) return s;
    pending[i].fp = fingerprint(*r.limit, r.key, seed_);
    pending[i].shard = static_cast<size_t>(pending[i].fp >> 40) & shard_mask_;
    for (size_t j = 0; j < i; ++j) {
      if (pending[j].fp == pending[i].fp) {
        return Error{ErrorCode::kInvalidArgument,
                     "acquire: the same limit is applied twice to key '" + std::string(r.key) +
                         "' in one request"};
      }
    }
  }

  // Lock the shards involved in ascending order (no deadlock between batches).
  SmallVector<size_t, 4> order(n);
  size_t locked = 0;
  for (size_t i = 0; i < n; ++i) order[locked++] = pending[i].shard;
  std::sort(&order[0], &order[0] + n);
  locked = static_cast<size_t>(std::unique(&order[0], &order[0] + n) - &order[0]);
  for (size_t k = 0; k < locked; ++k) shards_[order[k]].lock.lock();

  // Phase 1: decide every limit against the current state, charging nothing.
  // Slots touched from these ticks on belong to this batch: eviction spares them.
  SmallVector<uint32_t, 4> batch_start(n);
  for (size_t i = 0; i < n; ++i) batch_start[i] = shards_[pending[i].shard].tick() + 1;
  bool allowed = true;
  for (size_t i = 0; i < n; ++i) {
    Shard& shard = shards_[pending[i].shard];
    const AcquireRequest& r = requests[i];
    if (r.limit->block().count() != 0 && shard.blocked(pending[i].fp, *r.limit, now, &out[i])) {
      pending[i].blocked = true;
      allowed = false;
      continue;
    }
    const size_t slot = shard.find(pending[i].fp);
    pending[i].slot = slot;
    const bool live = slot != Shard::npos && !shard.expired(shard.at(slot), now);
    if (slot != Shard::npos) shard.at(slot).lru = shard.touch();
    if (r.limit->keeps_log()) {
      pending[i].log_expired =
          log_step(*r.limit, slot != Shard::npos ? shard.at(slot).state : core::PackedState{0, 0},
                   now, r.cost, out[i]);
    } else {
      const core::PackedState state =
          live ? shard.at(slot).state : core::fresh_state(*r.limit, now);
      pending[i].next = core::step(*r.limit, state, now, r.cost, r.max_wait, out[i]);
    }
    // Marked by its own limit's answer, whatever the batch's: a limit that
    // allowed does not hold its key back, even if another limit denied.
    if (slot != Shard::npos)
      shard.at(slot).fp = pending[i].fp | (out[i].allowed ? uint64_t{0} : kDenyBit);
    allowed = allowed && out[i].allowed;
  }

  // A limit with a lockout that denied starts it, whatever the others said.
  if (!allowed) {
    for (size_t i = 0; i < n; ++i) {
      const AcquireRequest& r = requests[i];
      if (r.limit->block().count() == 0 || pending[i].blocked || out[i].allowed) continue;
      out[i] = shards_[pending[i].shard].start_block(pending[i].fp, *r.limit, now, batch_start[i]);
    }
  }

  // Phase 2: charge every limit, or none. Insertions may move slots (growth,
  // eviction, backward shifts), so each slot is looked up again.
  if (allowed) {
    for (size_t i = 0; i < n; ++i) {
      Shard& shard = shards_[pending[i].shard];
      const AcquireRequest& r = requests[i];
      size_t slot = shard.find(pending[i].fp);
      if (slot == Shard::npos) slot = shard.insert(pending[i].fp, now, batch_start[i]);
      Slot& s = shard.at(slot);
      if (r.limit->keeps_log()) {
        shard.commit_log(s, pending[i].log_expired, now, r.cost);
        s.expires_s = seconds_up(now.count() + out[i].reset_after.count());
      } else {
        s.state = pending[i].next;
        s.expires_s = full_again_s(*r.limit, s.state, now, out[i].reset_after);
      }
      s.lru = shard.touch();
    }
  }

  for (size_t k = locked; k-- > 0;) shards_[order[k]].lock.unlock();
  for (size_t i = 0; i < n; ++i) out[i].decided_at = now;
  return {};
}

Status MemoryStore::refund(std::span<const RefundRequest> requests, Nanos now) {
  for (const RefundRequest& r : requests) {
    if (r.limit == nullptr) return Error{ErrorCode::kInvalidArgument, "refund: null limit"};
    if (r.cost == 0) return Error{ErrorCode::kInvalidArgument, "refund: cost must be at least 1"};
  }
  for (const RefundRequest& r : requests) {
    const uint64_t fp = fingerprint(*r.limit, r.key, seed_);
    Shard& shard = shards_[static_cast<size_t>(fp >> 40) & shard_mask_];
    std::lock_guard<store::SpinLock> guard(shard.lock);
    shard.refund_one(r, fp, now);
  }
  return {};
}

Result<bool> MemoryStore::reset(const Limit& limit, std::string_view key) {
  const uint64_t fp = fingerprint(limit, key, seed_);
  Shard& shard = shards_[static_cast<size_t>(fp >> 40) & shard_mask_];
  std::lock_guard<store::SpinLock> guard(shard.lock);
  // A lockout goes with the state: a reset key starts afresh.
  bool had_state = false;
  for (const uint64_t f : {fp, Shard::block_fingerprint(fp)}) {
    const size_t slot = shard.find(f);
    if (slot == Shard::npos) continue;
    shard.erase(slot);
    had_state = true;
  }
  return had_state;
}

size_t MemoryStore::size() const {
  size_t total = 0;
  for (size_t i = 0; i < shard_count_; ++i) total += shards_[i].size();
  return total;
}

void MemoryStore::maintain(Nanos now) {
  collect_expired(now);
}

size_t MemoryStore::collect_expired(Nanos now) {
  size_t dropped = 0;
  for (size_t i = 0; i < shard_count_; ++i) {
    std::lock_guard<store::SpinLock> guard(shards_[i].lock);
    dropped += shards_[i].collect_expired(now);
  }
  return dropped;
}

size_t MemoryStore::memory_bytes() const {
  size_t total = 0;
  for (size_t i = 0; i < shard_count_; ++i) {
    std::lock_guard<store::SpinLock> guard(shards_[i].lock);
    total += shards_[i].memory_bytes();
  }
  return total;
}

size_t MemoryStore::max_keys() const {
  return max_keys_;
}

}  // namespace sluice
