// Limit: a validated description of one rate limit.
//
// Build one with Limit::create(), which checks the spec and says exactly what
// is wrong with it. A Limit is an immutable value: copy it freely and share it
// between threads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "sluice/clock.h"
#include "sluice/result.h"

namespace sluice {

enum class Algorithm : uint8_t {
  kTokenBucket,
  kGcra,
  kFixedWindow,
  kSlidingLog,
  kSlidingWindow,
  // In-flight requests per key: `limit` is the most held at once (max) and
  // `window` the lease after which a slot not given back (Store::refund)
  // frees itself. A slot is a sliding_log entry whose window is the lease,
  // so every store applies it with sliding_log's arithmetic; only its
  // denial differs: retry_after is at most 1 s (a slot frees when a request
  // ends, which no store can foresee, so the wait is a polling hint).
  kConcurrency,
};

// "token_bucket", "gcra", "fixed_window", "sliding_log", "sliding_window",
// "concurrency".
std::string_view algorithm_name(Algorithm algorithm);
// The inverse of algorithm_name(); false if the name is unknown.
bool parse_algorithm(std::string_view name, Algorithm* out);

// What a user writes. Bucket algorithms (token_bucket, gcra) read capacity,
// refill_tokens and refill_period ("refill_tokens per refill_period"); window
// algorithms read limit and window. Fields the algorithm does not use must be 0.
struct LimitSpec {
  Algorithm algorithm = Algorithm::kTokenBucket;
  uint64_t capacity = 0;
  uint64_t refill_tokens = 0;
  Nanos refill_period{0};
  uint64_t limit = 0;
  Nanos window{0};
  // Lockout: once this limit denies a key, the key is denied for `block`
  // from that moment, whatever refills meanwhile (0 = no lockout). Any
  // algorithm; a whole number of microseconds, at most 10 years.
  Nanos block{0};
  // Lockouts that grow (penalties for repeat offenders): a block that starts
  // before `block_forget_after` has passed since the key's last block ended
  // lasts `block_factor` times that last one, at most `block_max`; otherwise
  // it lasts `block`. Factor 1 to 1000; with factor 1 (the default) every
  // block lasts `block` and the other two must be 0. With a factor above 1,
  // block_max >= block and block_forget_after > 0, whole microseconds, at
  // most 10 years each.
  uint32_t block_factor = 1;
  Nanos block_max{0};
  Nanos block_forget_after{0};
};

class Limit {
 public:
  // Largest sliding_log limit: the log keeps one entry per allowed request,
  // so bigger limits are refused with a pointer to sliding_window.
  static constexpr uint64_t kMaxSlidingLogLimit = 10'000;
  // Upper bound on capacity/limit; keeps every intermediate product exact.
  static constexpr uint64_t kMaxLimit = 4'294'967'295;  // fits 32 bits

  static Result<Limit> create(const LimitSpec& spec);

  // Convenience constructors (same validation).
  static Result<Limit> token_bucket(uint64_t capacity, uint64_t refill_tokens, Nanos refill_period);
  static Result<Limit> gcra(uint64_t capacity, uint64_t refill_tokens, Nanos refill_period);
  static Result<Limit> fixed_window(uint64_t limit, Nanos window);
  static Result<Limit> sliding_log(uint64_t limit, Nanos window);
  static Result<Limit> sliding_window(uint64_t limit, Nanos window);
  // At most `max` (<= kMaxSlidingLogLimit) held at once; a slot not given
  // back frees itself after `lease`.
  static Result<Limit> concurrency(uint64_t max, Nanos lease);

  Algorithm algorithm() const { return spec_.algorithm; }
  // Whether its state is a log of (time, cost) entries: sliding_log and
  // concurrency (whose entries are the slots held).
  bool keeps_log() const {
    return spec_.algorithm == Algorithm::kSlidingLog || spec_.algorithm == Algorithm::kConcurrency;
  }
  const LimitSpec& spec() const { return spec_; }
  // capacity (buckets), limit (windows) or max (concurrency).
  uint64_t size() const { return size_; }
  // The period over which `size()` is granted: the time to refill an empty
  // bucket completely (rounded up), the window, or the lease (concurrency).
  Nanos period() const { return period_; }
  // The lockout after a denial (LimitSpec::block); 0 when none. With a
  // growing lockout, its first block.
  Nanos block() const { return spec_.block; }
  // Whether its lockouts grow (LimitSpec::block_factor above 1).
  bool block_grows() const { return spec_.block_factor > 1; }
  // The block that starts at `now` for a key whose last block lasted `last`
  // and ended at `last_end` (last == 0: none on record): LimitSpec says how.
  Nanos next_block(Nanos last, Nanos last_end, Nanos now) const;

  // Bucket arithmetic in exact integers: one token is `token_units()` units and
  // one nanosecond adds `units_per_ns()` units (refill_tokens / refill_period
  // reduced by their gcd), so refill never rounds.
  int64_t token_units() const { return token_units_; }
  int64_t units_per_ns() const { return units_per_ns_; }

  // A stable 64-bit fingerprint of the definition: two limits with equal specs
  // have equal fingerprints. Stores keep state per (fingerprint, key), so a
  // changed definition starts fresh while an unchanged one keeps its state.
  uint64_t fingerprint() const { return fingerprint_; }

  // "token_bucket capacity=100 refill=10/1s" etc. (" block=30m" when it
  // has one), for logs.
  std::string describe() const;

  friend bool operator==(const Limit& a, const Limit& b) {
    return a.fingerprint_ == b.fingerprint_;
  }

 private:
  Limit() = default;
  LimitSpec spec_;
  uint64_t size_ = 0;
  Nanos period_{0};
  int64_t token_units_ = 1;
  int64_t units_per_ns_ = 1;
  uint64_t fingerprint_ = 0;
};

}  // namespace sluice
