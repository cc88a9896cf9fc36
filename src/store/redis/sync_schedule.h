// SyncSchedule: when cached mode syncs (RedisStore, mode cached).
//
// A sync runs `interval` after the previous one began: the over-admission
// bound of docs/SCALING.md needs at most one interval between two syncs.
// A key seen for the first time makes the next sync come sooner: until a
// sync has fetched its state, each of its requests is a Redis call (the
// exact path), so waiting up to a whole interval costs Redis a call per
// request meanwhile on a key that is hot from its first request. That sync
// runs at once, or half an interval after the previous one began if that is
// later, so that a stream of new keys costs at most two syncs per interval.
// Each sync sets the next one an interval later.
//
// Thread-safety: new_key() from any thread; the rest on the io_context's
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
  using Clock = std::chrono::steady_clock;
  // `sync` starts one sync (it may find nothing to send); `early` off: only
  // the interval's syncs.
  SyncSchedule(boost::asio::io_context& io, std::chrono::milliseconds interval, bool early,
               std::function<void()> sync);

  void start();
  void stop();
  // A key was added to the local table: its state is to be fetched.
  void new_key();
  // Sync rounds begun (a round with nothing to send makes no Redis call).
  uint64_t rounds() const { return rounds_.load(std::memory_order_relaxed); }

  // When the sync fetching a new key seen at `now` runs, the previous sync
  // having begun at `last` (the epoch: none yet).
  static Clock::time_point early_at(Clock::time_point last, Clock::time_point now,
                                    std::chrono::milliseconds interval);

 private:
  void arm(Clock::time_point at);
  void run();

  boost::asio::io_context& io_;
  boost::asio::steady_timer timer_;
  const std::chrono::milliseconds interval_;
  const bool early_;
  const std::function<void()> sync_;
  Clock::time_point last_{};  // when the last sync began
  Clock::time_point due_{};   // when the timer fires
  uint64_t generation_ = 0;   // of the timer's current wait; older ones do nothing
  bool stopped_ = false;
  std::atomic<bool> new_key_posted_{false};
  std::atomic<uint64_t> rounds_{0};
};

}  // namespace sluice::redis
