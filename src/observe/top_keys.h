// The most frequently denied keys, approximately: the space-saving algorithm
// over a fixed number of entries. Memory is bounded whatever clients send;
// each reported count over-estimates the true count by at most `error`.
//
// Thread-safety: all methods may be called from any thread (one mutex, taken
// only on the denial path and by /admin/stats).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::observe {

class TopKeys {
 public:
  static constexpr size_t kDefaultCapacity = 32;
  static constexpr size_t kMaxKeyBytes = 256;  // longer keys are truncated

  explicit TopKeys(size_t capacity = kDefaultCapacity) : capacity_(capacity) {}

  void record(std::string_view key);

  struct Entry {
    std::string key;
    uint64_t count = 0;
    uint64_t error = 0;  // count may exceed the true count by at most this
  };
  // Highest count first.
  std::vector<Entry> top() const;
  void clear();

 private:
  size_t capacity_;
  mutable std::mutex mutex_;
  std::vector<Entry> entries_;
};

}  // namespace sluice::observe
