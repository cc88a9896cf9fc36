// A test-and-test-and-set spin lock for the store's shards.
//
// Critical sections are a hash probe and a few integer operations, never I/O,
// so spinning is cheaper than parking a thread. After a short spin the waiter
// yields, which keeps oversubscribed machines (more threads than cores) fair.
#pragma once

#include <atomic>
#include <thread>

namespace sluice::store {

class SpinLock {
 public:
  void lock() {
    for (;;) {
      if (!locked_.exchange(true, std::memory_order_acquire)) return;
      int spins = 0;
      while (locked_.load(std::memory_order_relaxed)) {
        if (++spins < 64) {
          __builtin_ia32_pause();
        } else {
          std::this_thread::yield();
        }
      }
    }
  }
  void unlock() { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

}  // namespace sluice::store
