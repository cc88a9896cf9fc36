// InlineLog: a sliding log of at most two entries packed in 16 bytes. It must
// be the same log as a SlidingLog for every operation it accepts, and refuse
// (unchanged) every one whose result it cannot hold.
#include "core/inline_log.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "test_util.h"

namespace sluice {
namespace {

using namespace std::chrono_literals;
using core::InlineLog;
using core::SlidingLog;
using testing::kNoon;
using testing::must;

std::vector<std::pair<int64_t, uint64_t>> entries(const InlineLog& log) {
  std::vector<std::pair<int64_t, uint64_t>> out;
  for (size_t i = 0; i < log.size(); ++i) out.emplace_back(log.at(i).at_ns, log.at(i).cost);
  return out;
}

std::vector<std::pair<int64_t, uint64_t>> entries(const SlidingLog& log) {
  std::vector<std::pair<int64_t, uint64_t>> out;
  for (size_t i = 0; i < log.size(); ++i) out.emplace_back(log.at(i).at_ns, log.at(i).cost);
  return out;
}

using Entries = std::vector<std::pair<int64_t, uint64_t>>;

TEST(InlineLog, PacksTwoEntriesAndUnpacksThemExactly) {
  const int64_t t = kNoon.count();
  InlineLog log;
  EXPECT_EQ(log.packed().a, 0);
  EXPECT_EQ(log.packed().b, 0);
  EXPECT_FALSE(InlineLog::packed_in(log.packed()));
  ASSERT_TRUE(log.push_back(t, 1));
  ASSERT_TRUE(log.push_back(t + InlineLog::kMaxGapNs, 255));
  const core::PackedState p = log.packed();
  EXPECT_TRUE(InlineLog::packed_in(p));
  const InlineLog back(p);
  EXPECT_EQ(entries(back), (Entries{{t, 1}, {t + InlineLog::kMaxGapNs, 255}}));
  EXPECT_EQ(back.total_cost(), 256u);
  // Negative times pack too (a caller's clock is not checked).
  InlineLog early;
  ASSERT_TRUE(early.push_back(-5, 3));
  EXPECT_EQ(entries(InlineLog(early.packed())), (Entries{{-5, 3}}));
}

TEST(InlineLog, RefusesWhatItCannotHoldAndStaysUnchanged) {
  const int64_t t = kNoon.count();
  InlineLog log;
  EXPECT_FALSE(log.push_back(t, 256));  // a cost above 8 bits
  ASSERT_TRUE(log.push_back(t, 200));
  EXPECT_FALSE(log.push_back(t, 56));                            // joins the entry: 256
  EXPECT_FALSE(log.push_back(t + InlineLog::kMaxGapNs + 1, 1));  // 48 bits of gap
  ASSERT_TRUE(log.push_back(t + 10, 1));
  EXPECT_FALSE(log.push_back(t + 20, 1));  // a third entry
  EXPECT_EQ(entries(log), (Entries{{t, 200}, {t + 10, 1}}));
  // A late entry joins the newest, as in a SlidingLog.
  ASSERT_TRUE(log.push_back(t + 5, 2));
  EXPECT_EQ(entries(log), (Entries{{t, 200}, {t + 10, 3}}));
}

// Random operations on both logs side by side: the same decisions, the same
// entries, the same refunds, for as long as the InlineLog holds the result;
// where it refuses, the SlidingLog's result is indeed beyond it.
TEST(InlineLog, IsTheSameLogAsASlidingLogForEveryStepItHolds) {
  const Limit limit = must(Limit::concurrency(600, 10s));
  std::mt19937_64 rng(7);
  InlineLog small;
  SlidingLog big;
  Nanos now = kNoon;
  int refused = 0;
  int committed = 0;
  for (int i = 0; i < 20'000; ++i) {
    const uint64_t r = rng() % 100;
    // Mostly a few ms apart, sometimes the same instant, sometimes beyond the window.
    now += r < 10 ? 0ns : r < 15 ? 11s : std::chrono::milliseconds(rng() % 4000);
    if (rng() % 3 == 0 && !big.empty()) {
      // Give back part of some entry's charge.
      const SlidingLog::Entry e = big.at(rng() % big.size());  // a copy: big changes
      const uint64_t cost = 1 + rng() % 3;
      const bool from_small = core::sliding_log_refund(small, limit, Nanos{e.at_ns}, now, cost);
      ASSERT_EQ(from_small, core::sliding_log_refund(big, limit, Nanos{e.at_ns}, now, cost));
      ASSERT_EQ(entries(small), entries(big)) << i;
      continue;
    }
    const uint64_t cost = rng() % 10 == 0 ? 100 + rng() % 200 : 1 + rng() % 3;
    Decision from_small;
    Decision from_big;
    const size_t expired = core::sliding_log(limit, small, now, cost, from_small);
    ASSERT_EQ(expired, core::sliding_log(limit, big, now, cost, from_big)) << i;
    ASSERT_EQ(from_small, from_big) << i;
    if (!from_big.allowed) continue;
    core::sliding_log_commit(big, expired, now, cost);
    const InlineLog before = small;
    if (core::sliding_log_commit(small, expired, now, cost)) {
      ++committed;
      ASSERT_EQ(entries(small), entries(big)) << i;
      ASSERT_EQ(entries(InlineLog(small.packed())), entries(big)) << i;
      continue;
    }
    ++refused;
    ASSERT_EQ(entries(small), entries(before)) << i;
    const bool beyond = big.size() > InlineLog::kCapacity || big.back().cost > InlineLog::kMaxCost;
    ASSERT_TRUE(beyond) << i;
    // Start both afresh, as a store would spill and later shrink back.
    small = InlineLog();
    big = SlidingLog();
  }
  // Both paths were taken many times.
  EXPECT_GT(committed, 1000);
  EXPECT_GT(refused, 100);
}

}  // namespace
}  // namespace sluice
