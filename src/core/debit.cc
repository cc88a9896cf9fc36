#include "core/debit.h"

#include <algorithm>

#include "core/int_math.h"

namespace sluice::core {
namespace {

// The deepest a debit takes a bucket below empty (as queueing's cap).
constexpr i128 kMaxDebtUnits = i128{1} << 61;

std::optional<Debited> debit_token_bucket(const Limit& limit, std::optional<PackedState> packed,
                                          Nanos now, uint64_t cost) {
  TokenBucketState s =
      packed ? token_bucket_refill(limit, detail::unpack<TokenBucketState>(*packed), now)
             : token_bucket_fresh(limit, now);
  const i128 full = static_cast<i128>(limit.size()) * limit.token_units();
  const i128 level = std::max<i128>(
      static_cast<i128>(s.level_units) - static_cast<i128>(cost) * limit.token_units(),
      -kMaxDebtUnits);
  s.level_units = static_cast<int64_t>(level);
  // As a decision's reset_after: from the bucket's own clock.
  return Debited{detail::pack(s),
                 Nanos{ceil_div(full - static_cast<i128>(level), i128{limit.units_per_ns()})}};
}

std::optional<Debited> debit_gcra(const Limit& limit, std::optional<PackedState> packed, Nanos now,
                                  uint64_t cost) {
  const int64_t rate = limit.units_per_ns();
  i128 debt = 0;  // units missing from a full bucket
  if (packed) {
    const GcraState s = detail::unpack<GcraState>(*packed);
    debt = std::max<i128>(0, static_cast<i128>(s.tat_ns - now.count()) * rate + s.tat_frac);
  }
  const i128 full = static_cast<i128>(limit.size()) * limit.token_units();
  debt = std::min(debt + static_cast<i128>(cost) * limit.token_units(), full + kMaxDebtUnits);
  const GcraState next{now.count() + static_cast<int64_t>(debt / rate),
                       static_cast<int64_t>(debt % rate)};
  return Debited{detail::pack(next), Nanos{static_cast<int64_t>(ceil_div(debt, i128{rate}))}};
}

std::optional<Debited> debit_fixed_window(const Limit& limit, std::optional<PackedState> packed,
                                          Nanos charged_at, Nanos now, uint64_t cost) {
  const int64_t window = limit.period().count();
  const int64_t charged_index = floor_div(charged_at.count(), window);
  FixedWindowState s{charged_index, 0};
  if (packed) {
    s = detail::unpack<FixedWindowState>(*packed);
    if (s.window_index != charged_index) return std::nullopt;  // that window has ended
  } else if (floor_div(now.count(), window) != charged_index) {
    return std::nullopt;
  }
  // Counts stay far below 2^62: each debit is at most 2^32.
  constexpr int64_t kMaxCount = int64_t{1} << 62;
  s.count = static_cast<int64_t>(std::min<i128>(static_cast<i128>(s.count) + cost, kMaxCount));
  return Debited{detail::pack(s),
                 Nanos{std::max<int64_t>(0, (charged_index + 1) * window - now.count())}};
}

}  // namespace

bool takes_debit(Algorithm algorithm) {
  return algorithm == Algorithm::kTokenBucket || algorithm == Algorithm::kGcra ||
         algorithm == Algorithm::kFixedWindow;
}

std::optional<Debited> debit(const Limit& limit, std::optional<PackedState> state, Nanos charged_at,
                             Nanos now, uint64_t cost) {
  switch (limit.algorithm()) {
    case Algorithm::kTokenBucket:
      return debit_token_bucket(limit, state, now, cost);
    case Algorithm::kGcra:
      return debit_gcra(limit, state, now, cost);
    case Algorithm::kFixedWindow:
      return debit_fixed_window(limit, state, charged_at, now, cost);
    case Algorithm::kSlidingWindow:
    case Algorithm::kSlidingLog:
    case Algorithm::kConcurrency:
      break;
  }
  return std::nullopt;
}

}  // namespace sluice::core
