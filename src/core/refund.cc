#include "core/refund.h"

#include <algorithm>

#include "core/int_math.h"

namespace sluice::core {
namespace {

std::optional<PackedState> refund_token_bucket(const Limit& limit, PackedState packed, Nanos now,
                                               uint64_t cost) {
  TokenBucketState s = token_bucket_refill(limit, detail::unpack<TokenBucketState>(packed), now);
  const int64_t full = static_cast<int64_t>(limit.size()) * limit.token_units();
  if (s.level_units >= full) return std::nullopt;
  const int64_t back = static_cast<int64_t>(cost) * limit.token_units();
  s.level_units = back >= full - s.level_units ? full : s.level_units + back;
  return detail::pack(s);
}

std::optional<PackedState> refund_gcra(const Limit& limit, PackedState packed, Nanos now,
                                       uint64_t cost) {
  const GcraState s = detail::unpack<GcraState>(packed);
  const int64_t rate = limit.units_per_ns();
  const i128 ahead = static_cast<i128>(s.tat_ns - now.count()) * rate + s.tat_frac;
  if (ahead <= 0) return std::nullopt;  // full already
  const i128 back = static_cast<i128>(cost) * limit.token_units();
  const int64_t debt = ahead > back ? static_cast<int64_t>(ahead - back) : 0;
  return detail::pack(GcraState{now.count() + debt / rate, debt % rate});
}

std::optional<PackedState> refund_fixed_window(const Limit& limit, PackedState packed,
                                               Nanos charged_at, uint64_t cost) {
  FixedWindowState s = detail::unpack<FixedWindowState>(packed);
  if (s.window_index != floor_div(charged_at.count(), limit.period().count()) || s.count == 0)
    return std::nullopt;
  s.count -= std::min(s.count, static_cast<int64_t>(cost));
  return detail::pack(s);
}

std::optional<PackedState> refund_sliding_window(const Limit& limit, PackedState packed,
                                                 Nanos charged_at, uint64_t cost) {
  SlidingWindowState s = detail::unpack<SlidingWindowState>(packed);
  const int64_t charged_index = floor_div(charged_at.count(), limit.period().count());
  // The state keeps the counts of its own window and the one before.
  uint32_t* count = nullptr;
  if (s.window_index == charged_index) count = &s.current;
  if (s.window_index == charged_index + 1) count = &s.previous;
  if (count == nullptr || *count == 0) return std::nullopt;
  *count -= static_cast<uint32_t>(std::min<uint64_t>(*count, cost));
  return detail::pack(s);
}

}  // namespace

std::optional<PackedState> refund(const Limit& limit, PackedState state, Nanos charged_at,
                                  Nanos now, uint64_t cost) {
  switch (limit.algorithm()) {
    case Algorithm::kTokenBucket:
      return refund_token_bucket(limit, state, now, cost);
    case Algorithm::kGcra:
      return refund_gcra(limit, state, now, cost);
    case Algorithm::kFixedWindow:
      return refund_fixed_window(limit, state, charged_at, cost);
    case Algorithm::kSlidingWindow:
      return refund_sliding_window(limit, state, charged_at, cost);
    case Algorithm::kSlidingLog:
    case Algorithm::kConcurrency:
      break;
  }
  return std::nullopt;
}

}  // namespace sluice::core
