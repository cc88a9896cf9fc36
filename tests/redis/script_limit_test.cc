// The Redis keys a limit's state lives in (store/redis/script_limit.h).
#include "store/redis/script_limit.h"

#include <gtest/gtest.h>

#include "store/redis/connection.h"
#include "test_util.h"

namespace sluice::testing {
namespace {

using redis::append_window_key_bulk;
using redis::key_slot;
using redis::lockout_key;
using redis::state_key;
using redis::window_index;
using redis::window_key;

TEST(WindowKey, IsTheStateKeyWithTheWindowsIndexAfterTheFingerprint) {
  const Limit limit = must(Limit::fixed_window(10, std::chrono::seconds(1)));
  const std::string state = state_key("p:", limit, "route|client#7:x");
  // p:{<16 hex>}<16 hex>:route|client#7:x
  ASSERT_EQ(state.size(), 2 + 34 + 1 + 16u);
  const std::string head = state.substr(0, 36);
  EXPECT_EQ(window_key(state, "p:", 1'780'000'000), head + "#1780000000:route|client#7:x");
  EXPECT_EQ(lockout_key(state, "p:"), head + "!b:route|client#7:x");
  // Same slot as the state (and lockout) key: one script call names them.
  EXPECT_EQ(key_slot(window_key(state, "p:", 12)), key_slot(state));
  // A key that ends in what looks like an index names another counter.
  const std::string other = state_key("p:", limit, "route|client");
  EXPECT_NE(window_key(other, "p:", 7), window_key(state, "p:", 7));
}

TEST(WindowKey, IsWrittenAsTheRespBulkOfTheSameKey) {
  const Limit limit = must(Limit::fixed_window(10, std::chrono::seconds(1)));
  const std::string state = state_key("sluice:", limit, "k");
  std::string frame;
  append_window_key_bulk(frame, state, "sluice:", 123);
  std::string expected;
  redis::append_bulk(expected, window_key(state, "sluice:", 123));
  EXPECT_EQ(frame, expected);
}

TEST(WindowIndex, CountsWindowsFromTheEpoch) {
  EXPECT_EQ(window_index(0, 1'000), 0);
  EXPECT_EQ(window_index(999, 1'000), 0);
  EXPECT_EQ(window_index(1'000, 1'000), 1);
  EXPECT_EQ(window_index(1'780'000'000'123'457, 60'000'000), 29'666'666);
}

}  // namespace
}  // namespace sluice::testing
