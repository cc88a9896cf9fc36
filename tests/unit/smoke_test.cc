#include <gtest/gtest.h>

#include "sluice/sluice.h"

TEST(Smoke, TokenBucketBurst) {
  using namespace std::chrono_literals;
  auto store = std::make_shared<sluice::MemoryStore>();
  sluice::ManualClock clock(1000s);
  sluice::Limiter limiter(store, {sluice::Limit::token_bucket(3, 1, 1s).value()}, clock);
  int allowed = 0;
  for (int i = 0; i < 5; ++i) allowed += limiter.try_acquire("k")->allowed;
  EXPECT_EQ(allowed, 3);
}
