// SystemClock: wall-clock time since the Unix epoch, never decreasing on a
// thread; ManualClock: moves only when told.
#include "sluice/clock.h"

#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace sluice {
namespace {

int64_t wall_ns() {
  return std::chrono::duration_cast<Nanos>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

TEST(SystemClock, ReadsTheWallClock) {
  const int64_t before = wall_ns();
  const int64_t now = SystemClock::instance().now().count();
  const int64_t after = wall_ns();
  EXPECT_GE(now, before);
  EXPECT_LE(now, after);
}

TEST(SystemClock, NeverDecreasesOnAThreadWhileOthersReadIt) {
  std::vector<std::thread> threads;
  std::vector<int> backwards(4, 0);
  for (size_t t = 0; t < backwards.size(); ++t) {
    threads.emplace_back([&, t] {
      int64_t last = 0;
      for (int i = 0; i < 100'000; ++i) {
        const int64_t now = SystemClock::instance().now().count();
        if (now < last) ++backwards[t];
        last = now;
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int b : backwards) EXPECT_EQ(b, 0);
}

TEST(ManualClock, MovesOnlyWhenTold) {
  ManualClock clock(Nanos{5});
  EXPECT_EQ(clock.now(), Nanos{5});
  EXPECT_EQ(clock.now(), Nanos{5});
  clock.advance(Nanos{10});
  EXPECT_EQ(clock.now(), Nanos{15});
}

}  // namespace
}  // namespace sluice
