#include "store/redis/sync_schedule.h"

#include <utility>

#include <boost/asio/post.hpp>

namespace sluice::redis {

SyncSchedule::SyncSchedule(boost::asio::io_context& io, std::chrono::milliseconds interval,
                           bool early, std::function<void()> sync)
    : io_(io), timer_(io), interval_(interval), early_(early), sync_(std::move(sync)) {}

void SyncSchedule::start() {
  arm(std::chrono::steady_clock::now() + interval_);
}

void SyncSchedule::stop() {
  stopped_ = true;
  ++generation_;
  timer_.cancel();
}

void SyncSchedule::fetch_soon() {
  if (!early_ || posted_.exchange(true, std::memory_order_acq_rel)) return;
  boost::asio::post(io_, [this] {
    posted_.store(false, std::memory_order_release);
    if (!stopped_) run();
  });
}

void SyncSchedule::arm(std::chrono::steady_clock::time_point at) {
  // A wait that already completed cannot be cancelled: its handler sees an
  // older generation and does nothing.
  const uint64_t generation = ++generation_;
  timer_.expires_at(at);
  timer_.async_wait([this, generation](const boost::system::error_code& ec) {
    if (ec || stopped_ || generation != generation_) return;
    run();
  });
}

void SyncSchedule::run() {
  const auto began = std::chrono::steady_clock::now();
  rounds_.fetch_add(1, std::memory_order_relaxed);
  sync_();
  if (!stopped_) arm(began + interval_);
}

}  // namespace sluice::redis
