// DecisionHistory: how many decisions each route made in each of the last
// 900 seconds, kept by the server so that GET /admin/history (and the
// dashboard, which draws it when it opens) can show what happened before
// anyone looked.
//
// Every decision counts as one of three results, mapped from the `result`
// label of sluice_requests_total:
//   allowed  <- allowed (a route without limits too)
//   denied   <- denied, shadow_denied (a shadow route's "would deny": the
//               history shows what the limits decided, let through or not)
//   error    <- error (the store failed; on_failure allow or deny alike)
// A request refused as invalid before any decision is in neither.
//
// Memory is bounded: one RouteHistory per route name (RouteMetrics holds it,
// so the routes of the configs in force, which are bounded), each a fixed
// ring of kSlots seconds. A reload keeps a route's history when the route
// keeps its name (the new config's RouteMetrics finds the ring the old one
// still holds); a route that goes away loses its history once no State holds
// it, and starts from zeros if it comes back later.
//
// Thread-safety: RouteHistory::record() takes no lock (one compare-exchange
// on the slot's word); DecisionHistory's map of names takes a mutex, at
// config load and when read, never on a decision.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace sluice::observe {

enum class HistoryResult : uint8_t { kAllowed, kDenied, kError };
inline constexpr size_t kHistoryResults = 3;

class RouteHistory {
 public:
  // The most seconds a read may ask for.
  static constexpr size_t kSeconds = 900;

  // One decision made during `unix_second`. A decision older than the ring
  // holds (a thread that stalled past a whole turn of it) is dropped.
  void record(int64_t unix_second, HistoryResult result);
  // The same, for a decision made at `now` (nanoseconds since the epoch).
  void record_at(std::chrono::nanoseconds now, HistoryResult result) {
    record(std::chrono::floor<std::chrono::seconds>(now).count(), result);
  }

  // The counts of `result` in the `seconds` whole seconds before `end`
  // (end - seconds ... end - 1), oldest first; seconds <= kSeconds.
  std::vector<uint64_t> read(int64_t end, size_t seconds, HistoryResult result) const;

 private:
  // One more than kSeconds: the second being counted now never shares a
  // slot with the kSeconds whole seconds before it.
  static constexpr size_t kSlots = kSeconds + 1;

  // Each word holds the second it counts (its low 32 bits, the tag) above a
  // 32-bit count, so that moving a slot on to a new second and counting in
  // it is one compare-exchange: no count is lost or carried over when
  // threads record across a second's boundary at once.
  using Slot = std::array<std::atomic<uint64_t>, kHistoryResults>;
  std::array<Slot, kSlots> slots_{};
};

class DecisionHistory {
 public:
  // The ring of route `name`: the one some RouteMetrics already holds, else
  // a new one. It lives as long as someone holds it.
  std::shared_ptr<RouteHistory> route(const std::string& name);

  struct Counts {
    std::vector<uint64_t> allowed, denied, error;
  };
  // Every route held now, by name, over `seconds` whole seconds before `end`.
  std::map<std::string, Counts> read(int64_t end, size_t seconds) const;

 private:
  mutable std::mutex mutex_;
  mutable std::map<std::string, std::weak_ptr<RouteHistory>> routes_;
};

}  // namespace sluice::observe
