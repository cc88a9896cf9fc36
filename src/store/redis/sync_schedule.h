// SyncSchedule: when cached mode syncs (RedisStore, mode cached).
//
// A sync runs `interval` after the previous one began: the over-admission
// bound of docs/SCALING.md needs at most one interval between two syncs.
// fetch_soon() runs one at once (CachedTable::decide() asks for it when
// keys still waiting for their first fetch keep asking Redis: until a sync
// fetches them each of their requests is a Redis call), and the next one
// follows an interval after it.
//
// Thread-safety: fetch_soon() from any thread; the rest on the io_context's
// thread (the store's internal thread).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

namespace sluice::redis {

class SyncSchedule {
 public:
  // `sync` starts one sync (it may find nothing to send); `early` off:
  // fetch_soon() does nothing, only the interval's syncs run.
  SyncSchedule(boost::asio::io_context& io, std::chrono::milliseconds interval, bool early,
               std::function<void()> sync);

  void start();
  void stop();
  void fetch_soon();
  // Syncs begun by the schedule (one with nothing to send makes no Redis call).
  uint64_t rounds() const { return rounds_.load(std::memory_order_relaxed); }

 private:
  void arm(std::chrono::steady_clock::time_point at);
  void run();

  boost::asio::io_context& io_;
  boost::asio::steady_timer timer_;
  const std::chrono::milliseconds interval_;
  const bool early_;
  const std::function<void()> sync_;
  uint64_t generation_ = 0;  // of the timer's current wait; older ones do nothing
  bool stopped_ = false;
  std::atomic<bool> posted_{false};  // a fetch_soon() not run yet
  std::atomic<uint64_t> rounds_{0};
};

}  // namespace sluice::redis
