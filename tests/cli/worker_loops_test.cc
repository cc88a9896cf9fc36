// WorkerLoops (src/cli/worker_loops.h): where `sluice serve` posts the RLS
// calls of a store driven by the worker loops.
#include "cli/worker_loops.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>

namespace sluice::cli {
namespace {

TEST(WorkerLoops, WithoutALoopTheTaskIsLeftToTheCaller) {
  WorkerLoops loops;
  int runs = 0;
  std::function<void()> task = [&runs] { ++runs; };
  EXPECT_FALSE(loops.post(task));
  ASSERT_TRUE(task);
  task();
  EXPECT_EQ(runs, 1);
}

TEST(WorkerLoops, TasksAreSpreadRoundRobinOverTheLoops) {
  boost::asio::io_context a;
  boost::asio::io_context b;
  WorkerLoops loops;
  loops.add(a);
  loops.add(b);
  int on_a = 0;
  int on_b = 0;
  for (int i = 0; i < 6; ++i) {
    std::function<void()> task = [&] {
      ++(a.get_executor().running_in_this_thread() ? on_a : on_b);
    };
    ASSERT_TRUE(loops.post(task));
  }
  // Each loop runs its own share: 3 tasks each, none run by the other.
  EXPECT_EQ(a.poll(), 3u);
  EXPECT_EQ(on_a, 3);
  EXPECT_EQ(b.poll(), 3u);
  EXPECT_EQ(on_b, 3);
}

TEST(WorkerLoops, ARemovedLoopGetsNoMoreTasksAndDropsThoseItHeld) {
  auto a = std::make_unique<boost::asio::io_context>();
  boost::asio::io_context b;
  WorkerLoops loops;
  loops.add(*a);
  loops.add(b);
  // Destroyed unrun with the loop that holds it (as an RLS call's task,
  // which then answers its call).
  auto held = std::make_shared<int>(0);
  std::function<void()> first = [held] { ++*held; };
  ASSERT_TRUE(loops.post(first));  // round robin starts at a
  loops.remove(*a);
  EXPECT_EQ(loops.size(), 1u);
  int runs = 0;
  for (int i = 0; i < 3; ++i) {
    std::function<void()> task = [&runs] { ++runs; };
    ASSERT_TRUE(loops.post(task));
  }
  EXPECT_EQ(b.poll(), 3u);
  EXPECT_EQ(runs, 3);
  EXPECT_EQ(held.use_count(), 2);
  a.reset();
  EXPECT_EQ(held.use_count(), 1);
  EXPECT_EQ(*held, 0);
}

}  // namespace
}  // namespace sluice::cli
