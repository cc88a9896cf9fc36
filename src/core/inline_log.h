// InlineLog: a sliding log (core/sliding_log.h) of at most two entries packed
// into the 16 bytes of a PackedState, so that a store keeps a key with few
// entries in its table slot, with no heap allocation behind it: a concurrency
// key holding one or two slots (the common case: a slot is given back when
// its request ends), a sliding_log key with one or two requests in its window.
// The algorithms run on it exactly as on a SlidingLog; an entry it cannot
// hold makes push_back() refuse, and the store moves the log to a SlidingLog.
//
// Packing: a = the first entry's time; b = (the second entry's time minus the
// first's, 48 bits) << 16 | the second entry's cost << 8 | the first's cost.
// A cost is 1..255 and 0 marks no entry, so a log holding an entry never
// packs b == 0: a store tells an InlineLog from its own pointer (b == 0) by
// packed_in().
//
// Thread-safety: a value; guard it as the state it is packed in.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

#include "core/sliding_log.h"
#include "core/step.h"

namespace sluice::core {

class InlineLog {
 public:
  using Entry = SlidingLog::Entry;
  static constexpr size_t kCapacity = 2;
  static constexpr uint64_t kMaxCost = 255;
  // Entries further apart than this (about 78 hours) do not fit.
  static constexpr int64_t kMaxGapNs = (int64_t{1} << 48) - 1;

  InlineLog() = default;
  // `p`: a state packed_in() accepts, or {0, 0} (empty).
  explicit InlineLog(PackedState p) : first_ns_(p.a), bits_(static_cast<uint64_t>(p.b)) {}

  // Whether `p` holds an InlineLog with at least one entry.
  static bool packed_in(PackedState p) { return p.b != 0; }

  // The log is its packed form (two integers, kept in registers): nothing
  // is unpacked into an array and copied back, which cost a
  // store-forwarding stall per call (perf).
  PackedState packed() const { return {first_ns_, std::bit_cast<int64_t>(bits_)}; }

  size_t size() const { return (first_cost() != 0) + (second_cost() != 0); }
  bool empty() const { return bits_ == 0; }
  uint64_t total_cost() const { return first_cost() + second_cost(); }
  Entry at(size_t i) const {
    return i == 0 ? Entry{first_ns_, first_cost()} : Entry{first_ns_ + gap_ns(), second_cost()};
  }
  Entry back() const { return at(size() - 1); }

  void pop_front(size_t n) {
    if (n == 0) return;
    if (n >= size()) {
      *this = InlineLog();
      return;
    }
    first_ns_ += gap_ns();  // n == 1 of 2: the second entry becomes the first
    bits_ = second_cost();
  }

  // As SlidingLog::push_back (a late entry joins the last), or false, the log
  // unchanged, when the result does not fit: a third entry, a cost above
  // kMaxCost, entries more than kMaxGapNs apart.
  [[nodiscard]] bool push_back(int64_t at_ns, uint64_t cost) {
    if (cost > kMaxCost) return false;
    const size_t n = size();
    if (n == 0) {
      first_ns_ = at_ns;
      bits_ = cost;
      return true;
    }
    if (at_ns <= back().at_ns) {
      // Time ran backwards or stood still: the cost joins the newest entry.
      if (back().cost + cost > kMaxCost) return false;
      bits_ += n == 1 ? cost : cost << 8;
      return true;
    }
    int64_t gap;
    if (n == kCapacity || __builtin_sub_overflow(at_ns, first_ns_, &gap) || gap > kMaxGapNs)
      return false;
    bits_ |= cost << 8 | static_cast<uint64_t>(gap) << 16;
    return true;
  }

  // As SlidingLog::take_back.
  bool take_back(int64_t at_ns, uint64_t cost);

 private:
  uint64_t first_cost() const { return bits_ & 0xff; }
  uint64_t second_cost() const { return (bits_ >> 8) & 0xff; }
  int64_t gap_ns() const { return static_cast<int64_t>(bits_ >> 16); }

  int64_t first_ns_ = 0;
  uint64_t bits_ = 0;  // gap << 16 | second cost << 8 | first cost
};

// sliding_log_commit on an InlineLog: false, the log unchanged, when the
// result does not fit (the caller moves the log to a SlidingLog and commits
// there).
[[nodiscard]] inline bool sliding_log_commit(InlineLog& log, size_t expired, Nanos now,
                                             uint64_t cost) {
  InlineLog next = log;
  next.pop_front(expired);
  if (!next.push_back(now.count(), cost)) return false;
  log = next;
  return true;
}

}  // namespace sluice::core
