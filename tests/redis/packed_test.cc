// The numbers the client packs for the scripts (src/store/redis/packed.h):
// their bytes, and Redis's Lua reading them back exactly.
#include "store/redis/packed.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "redis_server.h"

namespace sluice::redis {
namespace {

using testing::RedisServer;
using testing::Reply;

std::string packed(std::initializer_list<int64_t> values) {
  std::string out;
  for (const int64_t v : values) append_packed(out, v);
  return out;
}

TEST(PackedNumbers, AreLittleEndianDoubles) {
  EXPECT_EQ(packed({0}), std::string(8, '\0'));
  EXPECT_EQ(packed({1}), std::string("\0\0\0\0\0\0\xf0\x3f", 8));
  EXPECT_EQ(packed({-2}), std::string("\0\0\0\0\0\0\x00\xc0", 8));
  EXPECT_EQ(packed({1, -2}), packed({1}) + packed({-2}));
}

TEST(PackedNumbers, RedisLuaReadsThemBackExactly) {
  RedisServer server;
  ASSERT_TRUE(server.start());
  constexpr int64_t kMax = (int64_t{1} << 53) - 1;  // the largest a double holds exactly
  const Reply r = server.command({"EVAL", "return {struct.unpack('<dddd', ARGV[1])}", "0",
                                  packed({kMax, -kMax, 1'796'219'970'538'298, -1})});
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->type, REDIS_REPLY_ARRAY);
  // The four numbers, then struct.unpack's next position (33).
  ASSERT_EQ(r->elements, 5u);
  EXPECT_EQ(r->element[0]->integer, kMax);
  EXPECT_EQ(r->element[1]->integer, -kMax);
  EXPECT_EQ(r->element[2]->integer, 1'796'219'970'538'298);
  EXPECT_EQ(r->element[3]->integer, -1);
  EXPECT_EQ(r->element[4]->integer, 33);
}

}  // namespace
}  // namespace sluice::redis
