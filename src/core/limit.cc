#include "sluice/limit.h"

#include <numeric>
#include <string>

#include "core/int_math.h"
#include "util/mix64.h"

namespace sluice {
namespace {

constexpr int64_t kMicrosecond = 1'000;
constexpr uint32_t kMaxBlockFactor = 1'000;
// Windows and refill periods up to ten years; with limits up to 2^32 every
// product the algorithms form stays far inside 128 bits, and times in
// microseconds stay below 2^53 for the Redis scripts.
constexpr int64_t kMaxPeriodNs = int64_t{10} * 366 * 24 * 3600 * 1'000'000'000;

Error invalid(std::string message) {
  return Error{ErrorCode::kInvalidArgument, std::move(message)};
}

std::string duration_text(Nanos d) {
  const int64_t ns = d.count();
  struct Unit {
    int64_t ns;
    const char* suffix;
  };
  static constexpr Unit kUnits[] = {{86'400'000'000'000, "d"}, {3'600'000'000'000, "h"},
                                    {60'000'000'000, "m"},     {1'000'000'000, "s"},
                                    {1'000'000, "ms"},         {1'000, "us"}};
  for (const Unit& u : kUnits) {
    if (ns != 0 && ns % u.ns == 0) return std::to_string(ns / u.ns) + u.suffix;
  }
  return std::to_string(ns) + "ns";
}

Status check_period(const char* what, Nanos period) {
  if (period.count() <= 0) return invalid(std::string(what) + " must be greater than 0");
  if (period.count() % kMicrosecond != 0)
    return invalid(std::string(what) + " must be a whole number of microseconds, got " +
                   duration_text(period));
  if (period.count() > kMaxPeriodNs)
    return invalid(std::string(what) + " must be at most 10 years, got " + duration_text(period));
  return {};
}

// The growth of a lockout (LimitSpec::block_factor and what goes with it).
Status check_growth(const LimitSpec& spec) {
  if (spec.block_factor == 1) {
    if (spec.block_max.count() != 0 || spec.block_forget_after.count() != 0)
      return invalid("a block's max and forget_after need a factor above 1");
    return {};
  }
  if (spec.block_factor == 0 || spec.block_factor > kMaxBlockFactor)
    return invalid("a block's factor must be a whole number from 1 to " +
                   std::to_string(kMaxBlockFactor) + ", got " + std::to_string(spec.block_factor));
  if (spec.block.count() == 0) return invalid("a growing block needs its first block");
  if (Status s = check_period("a block's max", spec.block_max); !s.ok()) return s;
  if (Status s = check_period("a block's forget_after", spec.block_forget_after); !s.ok()) return s;
  if (spec.block_max < spec.block)
    return invalid("a block's max (" + duration_text(spec.block_max) +
                   ") must be at least its first block (" + duration_text(spec.block) + ")");
  return {};
}

}  // namespace

std::string_view algorithm_name(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kTokenBucket:
      return "token_bucket";
    case Algorithm::kGcra:
      return "gcra";
    case Algorithm::kFixedWindow:
      return "fixed_window";
    case Algorithm::kSlidingLog:
      return "sliding_log";
    case Algorithm::kSlidingWindow:
      return "sliding_window";
    case Algorithm::kConcurrency:
      return "concurrency";
  }
  return "unknown";
}

bool parse_algorithm(std::string_view name, Algorithm* out) {
  for (Algorithm a : {Algorithm::kTokenBucket, Algorithm::kGcra, Algorithm::kFixedWindow,
                      Algorithm::kSlidingLog, Algorithm::kSlidingWindow, Algorithm::kConcurrency}) {
    if (algorithm_name(a) == name) {
      *out = a;
      return true;
    }
  }
  return false;
}

Result<Limit> Limit::create(const LimitSpec& spec) {
  Limit limit;
  limit.spec_ = spec;
  const std::string name(algorithm_name(spec.algorithm));
  const bool bucket =
      spec.algorithm == Algorithm::kTokenBucket || spec.algorithm == Algorithm::kGcra;
  if (bucket) {
    if (spec.limit != 0 || spec.window.count() != 0)
      return invalid(name + " takes capacity and refill_rate, not limit and window");
    if (spec.capacity == 0) return invalid(name + ": capacity must be at least 1");
    if (spec.capacity > kMaxLimit)
      return invalid(name + ": capacity must be at most " + std::to_string(kMaxLimit));
    if (spec.refill_tokens == 0) return invalid(name + ": refill rate must be greater than 0");
    if (spec.refill_tokens > kMaxLimit)
      return invalid(name + ": refill rate must be at most " + std::to_string(kMaxLimit) +
                     " per period");
    if (Status s = check_period("refill period", spec.refill_period); !s.ok())
      return Error{s.error().code, name + ": " + s.error().message};
    const int64_t period_ns = spec.refill_period.count();
    const int64_t g = std::gcd(static_cast<int64_t>(spec.refill_tokens), period_ns);
    limit.token_units_ = period_ns / g;
    limit.units_per_ns_ = static_cast<int64_t>(spec.refill_tokens) / g;
    limit.size_ = spec.capacity;
    const core::i128 full = static_cast<core::i128>(spec.capacity) * limit.token_units_;
    if (full > (core::i128{1} << 62))
      return invalid(name + ": capacity " + std::to_string(spec.capacity) + " with a refill of " +
                     std::to_string(spec.refill_tokens) + " per " +
                     duration_text(spec.refill_period) + " is too large to count exactly");
    limit.period_ = Nanos{core::ceil_div(full, core::i128{limit.units_per_ns_})};
  } else if (spec.algorithm == Algorithm::kConcurrency) {
    if (spec.capacity != 0 || spec.refill_tokens != 0 || spec.refill_period.count() != 0)
      return invalid("concurrency takes max and lease, not capacity and refill_rate");
    if (spec.limit == 0) return invalid("concurrency: max must be at least 1");
    // Each slot held is one log entry.
    if (spec.limit > kMaxSlidingLogLimit)
      return invalid("concurrency: max must be at most " + std::to_string(kMaxSlidingLogLimit) +
                     " (got " + std::to_string(spec.limit) + ")");
    if (Status s = check_period("lease", spec.window); !s.ok())
      return Error{s.error().code, name + ": " + s.error().message};
    limit.size_ = spec.limit;
    limit.period_ = spec.window;
  } else {
    if (spec.capacity != 0 || spec.refill_tokens != 0 || spec.refill_period.count() != 0)
      return invalid(name + " takes limit and window, not capacity and refill_rate");
    if (spec.limit == 0) return invalid(name + ": limit must be at least 1");
    if (spec.limit > kMaxLimit)
      return invalid(name + ": limit must be at most " + std::to_string(kMaxLimit));
    if (spec.algorithm == Algorithm::kSlidingLog && spec.limit > kMaxSlidingLogLimit)
      return invalid(
          "sliding_log keeps one entry per allowed request, so its limit must be at most " +
          std::to_string(kMaxSlidingLogLimit) + " (got " + std::to_string(spec.limit) +
          "); use sliding_window for large limits");
    if (Status s = check_period("window", spec.window); !s.ok())
      return Error{s.error().code, name + ": " + s.error().message};
    limit.size_ = spec.limit;
    limit.period_ = spec.window;
  }
  if (spec.block.count() != 0) {
    if (Status s = check_period("block", spec.block); !s.ok())
      return Error{s.error().code, name + ": " + s.error().message};
  }
  if (Status s = check_growth(spec); !s.ok())
    return Error{s.error().code, name + ": " + s.error().message};
  uint64_t fp = util::mix64(static_cast<uint64_t>(spec.algorithm) + 1);
  for (uint64_t field :
       {spec.capacity, spec.refill_tokens, static_cast<uint64_t>(spec.refill_period.count()),
        spec.limit, static_cast<uint64_t>(spec.window.count())}) {
    fp = util::mix64(fp ^ util::mix64(field + 0x9e3779b97f4a7c15ULL));
  }
  // Mixed in only when set, so that a limit without a lockout keeps the
  // fingerprint (and the Redis keys) it had before lockouts existed.
  if (spec.block.count() != 0)
    fp = util::mix64(fp ^ util::mix64(static_cast<uint64_t>(spec.block.count())));
  // Likewise the growth of a lockout: a `block: 5m` keeps its keys.
  if (spec.block_factor > 1) {
    for (uint64_t field :
         {uint64_t{spec.block_factor}, static_cast<uint64_t>(spec.block_max.count()),
          static_cast<uint64_t>(spec.block_forget_after.count())}) {
      fp = util::mix64(fp ^ util::mix64(field + 0x7f4a7c159e3779b9ULL));
    }
  }
  limit.fingerprint_ = fp;
  return limit;
}

Result<Limit> Limit::token_bucket(uint64_t capacity, uint64_t refill_tokens, Nanos refill_period) {
  return create({.algorithm = Algorithm::kTokenBucket,
                 .capacity = capacity,
                 .refill_tokens = refill_tokens,
                 .refill_period = refill_period});
}

Result<Limit> Limit::gcra(uint64_t capacity, uint64_t refill_tokens, Nanos refill_period) {
  return create({.algorithm = Algorithm::kGcra,
                 .capacity = capacity,
                 .refill_tokens = refill_tokens,
                 .refill_period = refill_period});
}

Result<Limit> Limit::fixed_window(uint64_t limit, Nanos window) {
  return create({.algorithm = Algorithm::kFixedWindow, .limit = limit, .window = window});
}

Result<Limit> Limit::sliding_log(uint64_t limit, Nanos window) {
  return create({.algorithm = Algorithm::kSlidingLog, .limit = limit, .window = window});
}

Result<Limit> Limit::sliding_window(uint64_t limit, Nanos window) {
  return create({.algorithm = Algorithm::kSlidingWindow, .limit = limit, .window = window});
}

Result<Limit> Limit::concurrency(uint64_t max, Nanos lease) {
  return create({.algorithm = Algorithm::kConcurrency, .limit = max, .window = lease});
}

std::string Limit::describe() const {
  std::string out(algorithm_name(spec_.algorithm));
  if (spec_.algorithm == Algorithm::kTokenBucket || spec_.algorithm == Algorithm::kGcra) {
    out += " capacity=" + std::to_string(spec_.capacity) +
           " refill=" + std::to_string(spec_.refill_tokens) + "/" +
           duration_text(spec_.refill_period);
  } else if (spec_.algorithm == Algorithm::kConcurrency) {
    out += " max=" + std::to_string(spec_.limit) + " lease=" + duration_text(spec_.window);
  } else {
    out += " limit=" + std::to_string(spec_.limit) + " window=" + duration_text(spec_.window);
  }
  if (spec_.block.count() != 0) out += " block=" + duration_text(spec_.block);
  if (block_grows()) {
    out += " factor=" + std::to_string(spec_.block_factor) +
           " max=" + duration_text(spec_.block_max) +
           " forget_after=" + duration_text(spec_.block_forget_after);
  }
  return out;
}

Nanos Limit::next_block(Nanos last, Nanos last_end, Nanos now) const {
  const LimitSpec& s = spec_;
  if (!block_grows() || last.count() <= 0) return s.block;
  // Forgotten once forget_after has passed since the last block ended.
  if (now.count() - last_end.count() >= s.block_forget_after.count()) return s.block;
  // last <= max <= 10 years: the product is formed only below max.
  if (last.count() > s.block_max.count() / s.block_factor) return s.block_max;
  return Nanos{last.count() * s.block_factor};
}

}  // namespace sluice
