// The Redis store's reading of replies (src/store/redis/script_reply.h) on
// replies built by hiredis's reader from bytes, as fuzz/redis_reply.cc builds
// them. No Redis server.
#include "store/redis/script_reply.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

namespace sluice::redis {
namespace {

// A reader bounded as the store's connections bound theirs.
class Reader {
 public:
  Reader() : reader_(redisReaderCreate()) { bound_reply_arrays(reader_); }
  ~Reader() {
    if (reply_ != nullptr) freeReplyObject(reply_);
    redisReaderFree(reader_);
  }
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  // REDIS_OK with a reply, REDIS_OK without one (incomplete), or REDIS_ERR.
  int read(std::string_view bytes) {
    if (redisReaderFeed(reader_, bytes.data(), bytes.size()) != REDIS_OK) return REDIS_ERR;
    return redisReaderGetReply(reader_, &reply_);
  }
  const redisReply* reply() const { return static_cast<const redisReply*>(reply_); }

 private:
  redisReader* reader_;
  void* reply_ = nullptr;
};

std::string array_header(long long elements) {
  return "*" + std::to_string(elements) + "\r\n";
}

// "*700000000" made hiredis allocate 5.6 GB of element pointers before one
// element arrived (fuzz/redis_reply.cc ran out of memory on it): a reply
// header, from a server or anything on the path to it, chose how much the
// store allocates.
TEST(ScriptReply, AnArrayHeaderAboveTheBoundIsRefusedBeforeAllocating) {
  Reader reader;
  EXPECT_EQ(reader.read(array_header(700'000'000)), REDIS_ERR);
  EXPECT_EQ(reader.reply(), nullptr);
}

TEST(ScriptReply, ANestedArrayHeaderAboveTheBoundIsRefusedToo) {
  Reader reader;
  EXPECT_EQ(reader.read("*2\r\n:1\r\n" + array_header(kMaxReplyElements + 1)), REDIS_ERR);
}

TEST(ScriptReply, ArraysUpToTheBoundAreRead) {
  Reader reader;
  EXPECT_EQ(reader.read(array_header(kMaxReplyElements)), REDIS_OK);
  EXPECT_EQ(reader.reply(), nullptr);  // incomplete: waits for the elements
  Reader small;
  ASSERT_EQ(small.read("*2\r\n:1\r\n:2\r\n"), REDIS_OK);
  ASSERT_NE(small.reply(), nullptr);
  EXPECT_EQ(small.reply()->elements, 2u);
}

TEST(ScriptReply, RedirectionsNameASlotAndANode) {
  const ErrorReply moved = read_error_reply("MOVED 3999 127.0.0.1:6381");
  EXPECT_EQ(moved.kind, ErrorReply::Kind::kMoved);
  EXPECT_EQ(moved.slot, 3999);
  EXPECT_EQ(moved.node, "127.0.0.1:6381");
  EXPECT_EQ(read_error_reply("ASK 0 h:1").kind, ErrorReply::Kind::kAsk);
  for (const char* bad :
       {"MOVED 16384 h:1", "MOVED -1 h:1", "MOVED 12 ", "MOVED 12", "ASK x h:1"}) {
    EXPECT_EQ(read_error_reply(bad).kind, ErrorReply::Kind::kBadRedirect) << bad;
  }
  EXPECT_EQ(read_error_reply("MOVEDX 1 h:1").kind, ErrorReply::Kind::kScript);
  EXPECT_EQ(read_error_reply("NOSCRIPT No matching script").kind, ErrorReply::Kind::kNoScript);
  EXPECT_EQ(read_error_reply("TRYAGAIN Multiple keys").kind, ErrorReply::Kind::kTryAgain);
  EXPECT_EQ(read_error_reply("NOTLOCAL ERR Script attempted to access a non local key").kind,
            ErrorReply::Kind::kNotLocal);
  EXPECT_EQ(read_error_reply("ERR Script attempted to access a non local key").kind,
            ErrorReply::Kind::kScript);  // raised after a write: not entry.lua's NOTLOCAL
  EXPECT_EQ(read_error_reply("LOADING Redis is loading").kind, ErrorReply::Kind::kServer);
  EXPECT_EQ(read_error_reply("OOM command not allowed when used memory > 'maxmemory'. script: "
                             "bf5f, on @user_script:596.")
                .kind,
            ErrorReply::Kind::kOutOfMemory);
  EXPECT_EQ(read_error_reply("READONLY You can't write against a read only replica.").kind,
            ErrorReply::Kind::kReadOnly);
  EXPECT_EQ(read_error_reply("OOMX").kind, ErrorReply::Kind::kScript);
  EXPECT_EQ(read_error_reply("ERR user_script:1: oops").kind, ErrorReply::Kind::kScript);
}

TEST(ScriptReply, TheScriptsReplyIsCheckedAgainstTheCalls) {
  // TIME, then an acquire of one limit (remaining 9 * 2 + allowed, reset_after
  // in microseconds), then an acquire of two: the first denied (remaining 0,
  // reset_after, retry_after), the second allowed; then a refund, then a call
  // past its deadline.
  Reader reader;
  ASSERT_EQ(reader.read("*10\r\n:100\r\n:19\r\n:1500\r\n:0\r\n:700\r\n:300\r\n:5\r\n:9\r\n"
                        ":1\r\n:-1\r\n"),
            REDIS_OK);
  const std::vector<CallShape> calls{{1, false}, {2, false}, {1, true}, {3, false}};
  ScriptAnswer answer;
  ASSERT_TRUE(read_script_reply(reader.reply(), calls, &answer));
  EXPECT_EQ(answer.redis_time_us, 100);
  EXPECT_EQ(answer.expired, (std::vector<uint8_t>{0, 0, 0, 1}));
  ASSERT_EQ(answer.limits.size(), 3u);
  EXPECT_TRUE(answer.limits[0].allowed);
  EXPECT_EQ(answer.limits[0].remaining, 9u);
  EXPECT_EQ(answer.limits[0].reset_after, std::chrono::microseconds(1500));
  EXPECT_EQ(answer.limits[0].retry_after, Nanos{0});
  EXPECT_FALSE(answer.limits[1].allowed);
  EXPECT_EQ(answer.limits[1].remaining, 0u);
  EXPECT_EQ(answer.limits[1].reset_after, std::chrono::microseconds(700));
  EXPECT_EQ(answer.limits[1].retry_after, std::chrono::microseconds(300));
  EXPECT_TRUE(answer.limits[2].allowed);
  EXPECT_EQ(answer.limits[2].remaining, 2u);
  EXPECT_EQ(answer.limits[2].reset_after, std::chrono::microseconds(9));

  // The same reply read against other calls: too few or too many elements.
  EXPECT_FALSE(read_script_reply(reader.reply(), std::vector<CallShape>{{1, false}}, &answer));
  EXPECT_FALSE(read_script_reply(
      reader.reply(), std::vector<CallShape>{{1, false}, {3, false}, {1, true}, {1, false}},
      &answer));
  // A refund answers 1, nothing else.
  EXPECT_FALSE(read_script_reply(
      reader.reply(), std::vector<CallShape>{{1, true}, {2, false}, {1, true}, {1, false}},
      &answer));
}

TEST(ScriptReply, TheFastPathsReplyGivesTheTimesFromTheWindow) {
  // Limit 10 per window of 1,000 us, every call's window taken at 5,300 us:
  // the first allowed with 7 left, its window ending in 700 us; the second
  // denied with 0 left; the third denied with all 10 left (an empty window:
  // reset_after 0); the fourth allowed with 4 left.
  Reader reader;
  ASSERT_EQ(reader.read("*5\r\n:9999\r\n:15\r\n:0\r\n:20\r\n:9\r\n"), REDIS_OK);
  const std::vector<FastShape> calls(4, FastShape{10, 1'000, 5'300});
  ScriptAnswer answer;
  ASSERT_TRUE(read_fast_reply(reader.reply(), calls, &answer));
  EXPECT_EQ(answer.redis_time_us, 9'999);
  EXPECT_EQ(answer.expired, (std::vector<uint8_t>{0, 0, 0, 0}));
  ASSERT_EQ(answer.limits.size(), 4u);
  using std::chrono::microseconds;
  EXPECT_TRUE(answer.limits[0].allowed);
  EXPECT_EQ(answer.limits[0].remaining, 7u);
  EXPECT_EQ(answer.limits[0].reset_after, microseconds(700));
  EXPECT_EQ(answer.limits[0].retry_after, Nanos{0});
  EXPECT_FALSE(answer.limits[1].allowed);
  EXPECT_EQ(answer.limits[1].remaining, 0u);
  EXPECT_EQ(answer.limits[1].reset_after, microseconds(700));
  EXPECT_EQ(answer.limits[1].retry_after, microseconds(700));
  EXPECT_FALSE(answer.limits[2].allowed);
  EXPECT_EQ(answer.limits[2].remaining, 10u);
  EXPECT_EQ(answer.limits[2].reset_after, Nanos{0});
  EXPECT_EQ(answer.limits[2].retry_after, microseconds(700));
  EXPECT_TRUE(answer.limits[3].allowed);
  EXPECT_EQ(answer.limits[3].remaining, 4u);
  EXPECT_EQ(answer.limits[3].reset_after, microseconds(700));

  // Each call's window is the one of its own time, not of the Redis TIME.
  const std::vector<FastShape> own{
      {10, 1'000, 999}, {10, 1'000, 1'000}, {10, 1'000, 0}, {10, 1'000, 12'345}};
  ASSERT_TRUE(read_fast_reply(reader.reply(), own, &answer));
  EXPECT_EQ(answer.limits[0].reset_after, microseconds(1));
  EXPECT_EQ(answer.limits[1].retry_after, microseconds(1'000));
  EXPECT_EQ(answer.limits[2].retry_after, microseconds(1'000));
  EXPECT_EQ(answer.limits[3].reset_after, microseconds(655));

  // Too few or too many calls, a remaining above the limit, a window of 0, a
  // negative code, a negative time.
  EXPECT_FALSE(read_fast_reply(reader.reply(), std::vector<FastShape>(3, calls[0]), &answer));
  EXPECT_FALSE(read_fast_reply(reader.reply(), std::vector<FastShape>(5, calls[0]), &answer));
  EXPECT_FALSE(
      read_fast_reply(reader.reply(), std::vector<FastShape>(4, FastShape{9, 1'000, 0}), &answer));
  EXPECT_FALSE(
      read_fast_reply(reader.reply(), std::vector<FastShape>(4, FastShape{10, 0, 0}), &answer));
  EXPECT_FALSE(read_fast_reply(reader.reply(), std::vector<FastShape>(4, FastShape{10, 1'000, -1}),
                               &answer));
  Reader negative;
  ASSERT_EQ(negative.read("*2\r\n:5300\r\n:-3\r\n"), REDIS_OK);
  EXPECT_FALSE(read_fast_reply(negative.reply(), std::vector<FastShape>(1, calls[0]), &answer));
}

TEST(ScriptReply, TheFastPathsReplyPastTheDeadlineExpiresTheWholeBatch) {
  Reader reader;
  ASSERT_EQ(reader.read("*2\r\n:5300\r\n:-1\r\n"), REDIS_OK);
  ScriptAnswer answer;
  ASSERT_TRUE(
      read_fast_reply(reader.reply(), std::vector<FastShape>(3, FastShape{10, 1'000, 0}), &answer));
  EXPECT_EQ(answer.expired, (std::vector<uint8_t>{1, 1, 1}));
  EXPECT_TRUE(answer.limits.empty());
}

// reset_after and retry_after are microseconds, read into nanoseconds: a
// value above INT64_MAX / 1000 overflowed the multiplication (undefined
// behaviour; UBSan in fuzz/redis_reply.cc). Such a reply is not the script's.
TEST(ScriptReply, DurationsBeyondWhatNanosecondsHoldAreNotWellFormed) {
  const std::vector<CallShape> one{{1, false}};
  ScriptAnswer answer;
  for (const char* reply :
       {"*3\r\n:1\r\n:19\r\n:9223372036854775807\r\n",
        "*4\r\n:1\r\n:0\r\n:1\r\n:9223372036854776\r\n", "*3\r\n:1\r\n:19\r\n:-1\r\n"}) {
    Reader reader;
    ASSERT_EQ(reader.read(reply), REDIS_OK);
    EXPECT_FALSE(read_script_reply(reader.reply(), one, &answer)) << reply;
  }
  Reader largest;
  ASSERT_EQ(largest.read("*4\r\n:1\r\n:0\r\n:1\r\n:9223372036854775\r\n"), REDIS_OK);
  ASSERT_TRUE(read_script_reply(largest.reply(), one, &answer));
  EXPECT_EQ(answer.limits[0].retry_after, Nanos{9'223'372'036'854'775'000});
}

// The call's Redis TIME becomes decisions' decided_at, in nanoseconds: the
// same bound holds, and a TIME of 0 is not one Redis read.
TEST(ScriptReply, ATimeBeyondWhatNanosecondsHoldIsNotWellFormed) {
  const std::vector<CallShape> one{{1, false}};
  ScriptAnswer answer;
  for (const char* reply :
       {"*3\r\n:9223372036854776\r\n:19\r\n:1\r\n", "*3\r\n:0\r\n:19\r\n:1\r\n"}) {
    Reader reader;
    ASSERT_EQ(reader.read(reply), REDIS_OK);
    EXPECT_FALSE(read_script_reply(reader.reply(), one, &answer)) << reply;
  }
  Reader largest;
  ASSERT_EQ(largest.read("*3\r\n:9223372036854775\r\n:19\r\n:1\r\n"), REDIS_OK);
  EXPECT_TRUE(read_script_reply(largest.reply(), one, &answer));
}

TEST(ScriptReply, TimeIsSecondsAndMicroseconds) {
  Reader time;
  ASSERT_EQ(time.read("*2\r\n$10\r\n1780000000\r\n$6\r\n123457\r\n"), REDIS_OK);
  int64_t us = 0;
  ASSERT_TRUE(read_time_reply(time.reply(), &us));
  EXPECT_EQ(us, 1'780'000'000'123'457);
  for (const char* bad :
       {"*2\r\n$1\r\n1\r\n$7\r\n1000000\r\n", "*2\r\n:1\r\n:2\r\n", "*1\r\n$1\r\n1\r\n",
        "*2\r\n$2\r\n-1\r\n$1\r\n0\r\n", "*2\r\n$1\r\n0\r\n$1\r\n0\r\n"}) {
    Reader reader;
    ASSERT_EQ(reader.read(bad), REDIS_OK) << bad;
    EXPECT_FALSE(read_time_reply(reader.reply(), &us)) << bad;
  }
}

TEST(ScriptReply, ASentinelNamesTheMasterOrNoMaster) {
  std::string node = "unchanged";
  Reader address;
  ASSERT_EQ(address.read("*2\r\n$8\r\n10.0.0.5\r\n$4\r\n6379\r\n"), REDIS_OK);
  ASSERT_TRUE(read_master_address(address.reply(), &node));
  EXPECT_EQ(node, "10.0.0.5:6379");
  Reader v6;
  ASSERT_EQ(v6.read("*2\r\n$3\r\n::1\r\n$4\r\n6380\r\n"), REDIS_OK);
  ASSERT_TRUE(read_master_address(v6.reply(), &node));
  EXPECT_EQ(node, "[::1]:6380");
  Reader nil;
  ASSERT_EQ(nil.read("*-1\r\n"), REDIS_OK);
  ASSERT_TRUE(read_master_address(nil.reply(), &node));
  EXPECT_EQ(node, "");  // the sentinel knows no such master
  for (const char* bad :
       {"*2\r\n$1\r\nh\r\n$1\r\n0\r\n", "*2\r\n$0\r\n\r\n$2\r\n10\r\n",
        "*2\r\n$1\r\nh\r\n:6379\r\n", "-ERR no\r\n", "*2\r\n$1\r\nh\r\n$5\r\n70000\r\n"}) {
    Reader reader;
    ASSERT_EQ(reader.read(bad), REDIS_OK) << bad;
    EXPECT_FALSE(read_master_address(reader.reply(), &node)) << bad;
  }
}

TEST(ScriptReply, ASwitchMasterMessageOfThisMasterNamesTheNewOne) {
  std::string node;
  ASSERT_TRUE(read_switch_master("mymaster 10.0.0.5 6379 10.0.0.6 6380", "mymaster", &node));
  EXPECT_EQ(node, "10.0.0.6:6380");
  EXPECT_FALSE(read_switch_master("other 10.0.0.5 6379 10.0.0.6 6380", "mymaster", &node));
  EXPECT_FALSE(read_switch_master("mymaster 10.0.0.5 6379 10.0.0.6", "mymaster", &node));
  EXPECT_FALSE(read_switch_master("mymaster 10.0.0.5 6379 10.0.0.6 6380 x", "mymaster", &node));
  EXPECT_FALSE(read_switch_master("mymaster 10.0.0.5 6379 10.0.0.6 port", "mymaster", &node));
}

}  // namespace
}  // namespace sluice::redis
