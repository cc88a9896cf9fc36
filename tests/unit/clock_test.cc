// SystemClock: wall-clock time since the Unix epoch, never decreasing on a
// thread (its wall clock injected where a test needs it to step back);
// ManualClock: moves only when told.
#include "sluice/clock.h"

#include <atomic>
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

// A wall clock the test sets: what SystemClock(read_set_wall) reads.
std::atomic<int64_t> set_wall_ns{0};
Nanos read_set_wall() {
  return Nanos{set_wall_ns.load()};
}

TEST(SystemClock, HoldsTheLatestTimeWhenTheWallClockStepsBack) {
  std::vector<int64_t> seen;
  // On a thread of its own: the hold is per thread, and this one has read no
  // clock yet.
  std::thread([&] {
    const SystemClock clock(read_set_wall);
    for (int64_t wall : {1'000, 5'000, 2'000, 4'999, 5'000, 5'001, 9'000}) {
      set_wall_ns = wall;
      seen.push_back(clock.now().count());
    }
  }).join();
  // Stepped back to 2000 and 4999: held at 5000 until the wall clock passes it.
  EXPECT_EQ(seen, (std::vector<int64_t>{1'000, 5'000, 5'000, 5'000, 5'000, 5'001, 9'000}));
}

TEST(SystemClock, EachThreadHoldsOnlyWhatItSawItself) {
  const SystemClock clock(read_set_wall);
  int64_t first_thread_after_step = 0;
  int64_t other_thread = 0;
  std::thread([&] {
    set_wall_ns = 5'000;
    ASSERT_EQ(clock.now().count(), 5'000);
    set_wall_ns = 2'000;  // steps back
    first_thread_after_step = clock.now().count();
    // A thread that never saw 5000 reads the wall clock as it is.
    std::thread([&] { other_thread = clock.now().count(); }).join();
  }).join();
  EXPECT_EQ(first_thread_after_step, 5'000);
  EXPECT_EQ(other_thread, 2'000);
}

// A wall clock that steps back by 15 ns on every other read of a thread,
// counted per thread: 1000 + 10 n, less 15 when n is odd (n = 1, 2, ...).
Nanos read_stepping_wall() {
  thread_local int64_t reads = 0;
  ++reads;
  return Nanos{1'000 + 10 * reads - (reads % 2 == 1 ? 15 : 0)};
}

TEST(SystemClock, NeverDecreasesOnAThreadWhileOthersReadIt) {
  const SystemClock clock(read_stepping_wall);
  constexpr int kReads = 100'000;
  std::vector<std::vector<int64_t>> seen(4);
  std::vector<std::thread> threads;
  for (auto& mine : seen) {
    threads.emplace_back([&clock, &mine] {
      mine.reserve(kReads);
      for (int i = 0; i < kReads; ++i) mine.push_back(clock.now().count());
    });
  }
  for (auto& t : threads) t.join();
  // Raw reads 995, 1020, 1015, 1040, 1035, ...: every odd read after the
  // first is held at the even one before it.
  for (const auto& mine : seen) {
    ASSERT_EQ(mine.size(), static_cast<size_t>(kReads));
    EXPECT_EQ(mine[0], 995);
    for (int64_t n = 2; n <= kReads; ++n) {
      const int64_t expected = 1'000 + 10 * (n % 2 == 0 ? n : n - 1);
      ASSERT_EQ(mine[n - 1], expected) << "read " << n;
    }
  }
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
