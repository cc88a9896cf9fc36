// The Redis store's reading of replies (src/store/redis/script_reply.h), on
// reply trees built by hiredis's reader (redisReaderCreate / Feed / GetReply)
// from the input, as the client gets them off the network.
//
// The reader is bounded as the client's connections are (bound_reply_arrays).
// The first byte chooses how many calls a batch had (1 to 4); their limits
// are spread so that the counts can match the reply's size, so well-formed
// replies are reached. Each reply is read as the client reads it: an error
// reply classified (read_error_reply), an array checked
// (script_reply_well_formed) and, when well formed, every decision taken
// from it (script_decision), as Client::deliver does.
//
// Asserts: a redirect names a slot in [0, 16384) and a non-empty node inside
// the message; a well-formed reply's decisions have allowed exactly when its
// integer is 1 and durations that are not negative.
#include <hiredis/hiredis.h>

#include <vector>

#include "fuzz_check.h"
#include "store/redis/script_reply.h"

namespace {

using namespace sluice;
using namespace sluice::redis;

void check_error(const redisReply* reply) {
  const std::string_view message(reply->str, reply->len);
  const ErrorReply e = read_error_reply(message);
  if (e.kind != ErrorReply::Kind::kMoved && e.kind != ErrorReply::Kind::kAsk) return;
  FUZZ_CHECK(e.slot >= 0 && e.slot < 16384, "slot %d", e.slot);
  FUZZ_CHECK(!e.node.empty() && e.node.data() >= message.data() &&
                 e.node.data() + e.node.size() <= message.data() + message.size(),
             "node outside the message");
}

// `calls` calls whose limits add up so the reply's size can match.
std::vector<size_t> limits_for(const redisReply* reply, size_t calls) {
  std::vector<size_t> limits(calls, 0);
  const size_t elements = reply->type == REDIS_REPLY_ARRAY ? reply->elements : 0;
  if (elements < 1 + calls) return limits;
  const size_t total = (elements - 1 - calls) / 5;
  for (size_t i = 0; i < calls; ++i) limits[i] = total / calls + (i < total % calls ? 1 : 0);
  return limits;
}

void check_script_reply(const redisReply* reply, size_t calls) {
  const std::vector<size_t> limits = limits_for(reply, calls);
  if (!script_reply_well_formed(reply, limits)) return;
  const redisReply* const* e = reply->element + 1;
  for (const size_t n : limits) {
    ++e;  // the call's time
    const bool expired = n > 0 && e[0]->integer < 0;
    for (size_t i = 0; i < n && !expired; ++i) {
      const Decision d = script_decision(e + 5 * i);
      FUZZ_CHECK(d.allowed == (e[5 * i]->integer == 1), "allowed");
      FUZZ_CHECK(d.reset_after.count() >= 0 && d.retry_after.count() >= 0,
                 "negative durations: reset %lld retry %lld",
                 static_cast<long long>(d.reset_after.count()),
                 static_cast<long long>(d.retry_after.count()));
    }
    e += 5 * n;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t calls = 1 + (data[0] & 3);
  redisReader* reader = redisReaderCreate();
  bound_reply_arrays(reader);  // as Connection does for every connection
  if (redisReaderFeed(reader, reinterpret_cast<const char*>(data + 1), size - 1) == REDIS_OK) {
    void* reply = nullptr;
    while (redisReaderGetReply(reader, &reply) == REDIS_OK && reply != nullptr) {
      const auto* r = static_cast<const redisReply*>(reply);
      if (r->type == REDIS_REPLY_ERROR) {
        check_error(r);
      } else {
        check_script_reply(r, calls);
      }
      freeReplyObject(reply);
      reply = nullptr;
    }
  }
  redisReaderFree(reader);
  return 0;
}
