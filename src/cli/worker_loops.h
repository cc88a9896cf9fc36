// WorkerLoops: the server's worker event loops, registered as each worker
// thread attaches to the store, for work that has to run on one of them: an
// Envoy RLS call on the Redis store is decided on a worker loop, where the
// store's connection of that thread is driven (the HTTP doors' path), rather
// than funnelled through the store's single internal thread.
//
// Thread-safety: add() and remove() from the worker threads, post() from any
// thread. remove() returns once no post() can reach the loop any more.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <functional>
#include <shared_mutex>
#include <vector>

namespace sluice::cli {

class WorkerLoops {
 public:
  // On the worker thread, before its loop serves.
  void add(boost::asio::io_context& io);
  // On the worker thread, after its loop stopped and before `io` is
  // destroyed. Tasks already posted to it are destroyed with it, unrun.
  void remove(boost::asio::io_context& io);
  // Moves `task` onto the next loop (round robin); false, with `task` left
  // as it was, when no loop is registered.
  bool post(std::function<void()>& task);
  size_t size() const;

 private:
  mutable std::shared_mutex mutex_;
  std::vector<boost::asio::io_context*> loops_;
  std::atomic<size_t> next_{0};
};

}  // namespace sluice::cli
