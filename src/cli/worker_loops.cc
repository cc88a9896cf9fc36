#include "cli/worker_loops.h"

#include <boost/asio/post.hpp>
#include <mutex>

namespace sluice::cli {

void WorkerLoops::add(boost::asio::io_context& io) {
  std::unique_lock lock(mutex_);
  loops_.push_back(&io);
}

void WorkerLoops::remove(boost::asio::io_context& io) {
  std::unique_lock lock(mutex_);
  std::erase(loops_, &io);
}

bool WorkerLoops::post(std::function<void()>& task) {
  // Shared: posts from several gRPC threads do not wait for each other, and
  // remove() waits for a post in progress to the loop it removes.
  std::shared_lock lock(mutex_);
  if (loops_.empty()) return false;
  const size_t i = next_.fetch_add(1, std::memory_order_relaxed) % loops_.size();
  boost::asio::post(*loops_[i], std::move(task));
  return true;
}

size_t WorkerLoops::size() const {
  std::shared_lock lock(mutex_);
  return loops_.size();
}

}  // namespace sluice::cli
