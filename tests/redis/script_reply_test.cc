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
  EXPECT_EQ(read_error_reply("LOADING Redis is loading").kind, ErrorReply::Kind::kServer);
  EXPECT_EQ(read_error_reply("ERR user_script:1: oops").kind, ErrorReply::Kind::kScript);
}

TEST(ScriptReply, TheScriptsReplyIsCheckedAgainstTheCalls) {
  // TIME, then one call: its time and one limit (allowed, limit, remaining,
  // reset_after and retry_after in microseconds).
  Reader reader;
  ASSERT_EQ(reader.read("*7\r\n:100\r\n:100\r\n:1\r\n:10\r\n:9\r\n:1500\r\n:0\r\n"), REDIS_OK);
  const std::vector<size_t> one{1};
  const std::vector<size_t> two{2};
  ASSERT_TRUE(script_reply_well_formed(reader.reply(), one));
  EXPECT_FALSE(script_reply_well_formed(reader.reply(), two));
  const Decision d = script_decision(reader.reply()->element + 2);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.limit, 10u);
  EXPECT_EQ(d.remaining, 9u);
  EXPECT_EQ(d.reset_after, std::chrono::microseconds(1500));
  EXPECT_EQ(d.retry_after, Nanos{0});
}

// reset_after and retry_after are microseconds, read into nanoseconds: a
// value above INT64_MAX / 1000 overflowed the multiplication (undefined
// behaviour; UBSan in fuzz/redis_reply.cc). Such a reply is not the script's.
TEST(ScriptReply, DurationsBeyondWhatNanosecondsHoldAreNotWellFormed) {
  const std::vector<size_t> one{1};
  for (const char* reply : {"*7\r\n:1\r\n:1\r\n:1\r\n:10\r\n:9\r\n:9223372036854775807\r\n:0\r\n",
                            "*7\r\n:1\r\n:1\r\n:0\r\n:10\r\n:0\r\n:1\r\n:9223372036854776\r\n"}) {
    Reader reader;
    ASSERT_EQ(reader.read(reply), REDIS_OK);
    EXPECT_FALSE(script_reply_well_formed(reader.reply(), one)) << reply;
  }
  Reader largest;
  ASSERT_EQ(largest.read("*7\r\n:1\r\n:1\r\n:0\r\n:10\r\n:0\r\n:1\r\n:9223372036854775\r\n"),
            REDIS_OK);
  ASSERT_TRUE(script_reply_well_formed(largest.reply(), one));
  EXPECT_EQ(script_decision(largest.reply()->element + 2).retry_after,
            Nanos{9'223'372'036'854'775'000});
}

// A call's time becomes its decisions' decided_at, in nanoseconds: the same
// bound holds.
TEST(ScriptReply, ACallsTimeBeyondWhatNanosecondsHoldIsNotWellFormed) {
  const std::vector<size_t> one{1};
  Reader beyond;
  ASSERT_EQ(beyond.read("*7\r\n:1\r\n:9223372036854776\r\n:1\r\n:10\r\n:9\r\n:1\r\n:0\r\n"),
            REDIS_OK);
  EXPECT_FALSE(script_reply_well_formed(beyond.reply(), one));
  Reader largest;
  ASSERT_EQ(largest.read("*7\r\n:1\r\n:9223372036854775\r\n:1\r\n:10\r\n:9\r\n:1\r\n:0\r\n"),
            REDIS_OK);
  EXPECT_TRUE(script_reply_well_formed(largest.reply(), one));
}

}  // namespace
}  // namespace sluice::redis
