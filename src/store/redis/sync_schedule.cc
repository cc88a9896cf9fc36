#include "store/redis/sync_schedule.h"

#include <algorithm>
#include <utility>

#include <boost/asio/post.hpp>

namespace sluice::redis {

SyncSchedule::SyncSchedule(boost::asio::io_context& io, std::chrono::milliseconds interval,
                           bool early, std::function<void()> sync)
    : io_(io), timer_(io), interval_(interval), early_(early), sync_(std::move(sync)) {}

SyncSchedule::Clock::time_point SyncSchedule::early_at(Clock::time_point last,
                                                       Clock::time_point now,
                                                       std::chrono::milliseconds interval) {
  return std::max(now, last + interval / 2);
}

void SyncSchedule::start() {
  arm(Clock::now() + interval_);
}

void SyncSchedule::stop() {
  stopped_ = true;
  ++generation_;
  timer_.cancel();
}

void SyncSchedule::new_key() {
  if (!early_ || new_key_posted_.exchange(true, std::memory_order_acq_rel)) return;
  boost::asio::post(io_, [this] {
    new_key_posted_.store(false, std::memory_order_release);
    if (stopped_) return;
    const Clock::time_point now = Clock::now();
    const Clock::time_point at = early_at(last_, now, interval_);
    if (at <= now) {
      run();
    } else if (at < due_) {
      arm(at);
    }
  });
}

void SyncSchedule::arm(Clock::time_point at) {
  // A wait that already completed cannot be cancelled: its handler sees an
  // older generation and does nothing.
  const uint64_t generation = ++generation_;
  due_ = at;
  timer_.expires_at(at);
  timer_.async_wait([this, generation](const boost::system::error_code& ec) {
    if (ec || stopped_ || generation != generation_) return;
    run();
  });
}

void SyncSchedule::run() {
  last_ = Clock::now();
  rounds_.fetch_add(1, std::memory_order_relaxed);
  sync_();
  if (!stopped_) arm(last_ + interval_);
}

}  // namespace sluice::redis
