#include "core/sliding_window.h"

#include "core/int_math.h"

namespace sluice::core {

SlidingWindowState sliding_window_fresh(const Limit& limit, Nanos now) {
  return {floor_div(now.count(), limit.period().count()), 0, 0};
}

SlidingWindowState sliding_window(const Limit& limit, const SlidingWindowState& state, Nanos now,
                                  uint64_t cost, Decision& decision) {
  const int64_t window = limit.period().count();
  const i128 max = static_cast<i128>(limit.size());
  int64_t index = floor_div(now.count(), window);
  int64_t current = 0;
  int64_t previous = 0;
  if (state.window_index >= index) {
    // Same window (or a later one, if time ran backwards: keep counting there).
    index = state.window_index;
    current = state.current;
    previous = state.previous;
  } else if (state.window_index == index - 1) {
    previous = state.current;
  }
  const int64_t window_start = index * window;
  // Clamped at 0 for a state from a later window (time ran backwards).
  const int64_t elapsed = now.count() > window_start ? now.count() - window_start : 0;
  const int64_t remaining_time = window - elapsed;  // in (0, window]

  // All in units of 1/window of a request: weighted = previous * (window - elapsed).
  const i128 weighted_previous = static_cast<i128>(previous) * remaining_time;
  const int64_t after = current + static_cast<int64_t>(cost);
  const i128 budget = max * window;

  SlidingWindowState next;
  decision = Decision{};
  decision.limit = limit.size();
  const auto until_restored = [&](int64_t cur, int64_t prev) -> int64_t {
    if (cur > 0) return window_start + 2 * window - now.count();
    if (prev > 0) return window_start + window - now.count();
    return 0;
  };
  if (weighted_previous + static_cast<i128>(after) * window <= budget) {
    decision.allowed = true;
    decision.remaining = static_cast<uint64_t>(
        (budget - weighted_previous - static_cast<i128>(after) * window) / window);
    decision.reset_after = Nanos{until_restored(after, previous)};
    next = {index, static_cast<uint32_t>(after), static_cast<uint32_t>(previous)};
    return next;
  }

  decision.allowed = false;
  const i128 left = budget - weighted_previous - static_cast<i128>(current) * window;
  decision.remaining = left > 0 ? static_cast<uint64_t>(left / window) : 0;
  decision.reset_after = Nanos{until_restored(current, previous)};
  next = state;

  // Earliest retry. In this window, `previous` weighs less as time passes:
  // allowed once previous * (window - e) <= slack * window, i.e. at
  // e = window - floor(slack * window / previous).
  const int64_t slack = static_cast<int64_t>(limit.size()) - after;
  if (slack >= 0 && previous > 0) {
    const int64_t e = window - static_cast<int64_t>(static_cast<i128>(slack) * window / previous);
    if (e < window) {
      decision.retry_after = Nanos{window_start + e - now.count()};
      return next;
    }
  }
  // Next window: `current` becomes the previous count and nothing is current.
  // When only `previous` kept this window from admitting, room can exceed
  // `current` and the formula goes below 0: the next window admits at its
  // start, never before it.
  int64_t e_next = 0;
  if (current > 0) {
    const int64_t room = static_cast<int64_t>(limit.size()) - static_cast<int64_t>(cost);
    e_next = window - static_cast<int64_t>(static_cast<i128>(room) * window / current);
    if (e_next < 0) e_next = 0;
  }
  decision.retry_after = Nanos{window_start + window + e_next - now.count()};
  return next;
}

}  // namespace sluice::core
