// The Redis store's reading of replies (src/store/redis/script_reply.h), on
// reply trees built by hiredis's reader (redisReaderCreate / Feed / GetReply)
// from the input, as the client gets them off the network.
//
// The reader is bounded as the client's connections are (bound_reply_arrays).
// The first byte chooses how many calls a batch had (1 to 4) and what each
// was (an acquire of one or two limits, or a refund). Each reply is read as
// the client reads it: an error reply classified (read_error_reply), an
// array read (read_script_reply, and read_fast_reply as the fast path's
// reply to as many calls of a fixed window of 10 per 1,000 us), as
// Client::deliver does; and as a handshake's TIME, a sentinel's answer for
// the master (read_master_address) and, for a string, a +switch-master
// message (read_switch_master).
//
// Asserts: a redirect names a slot in [0, 16384) and a non-empty node inside
// the message; a reply read has one flag per call, one answer per applied
// limit, durations that are not negative and no retry_after when allowed; a
// TIME after the epoch; a master's address "host:port" with a port.
#include <hiredis/hiredis.h>

#include <string>
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

// `calls` calls, acquires of one or two limits or refunds as the first
// byte says, so that short replies can match.
std::vector<CallShape> shapes_for(uint8_t selector, size_t calls) {
  std::vector<CallShape> shapes;
  for (size_t i = 0; i < calls; ++i) {
    const unsigned bits = (selector >> (2 + 2 * i)) & 3;
    shapes.push_back(CallShape{bits == 2 ? 2u : 1u, bits == 3});
  }
  return shapes;
}

// What every reply read says of its limits.
void check_answers(const ScriptAnswer& answer) {
  for (const LimitAnswer& a : answer.limits) {
    FUZZ_CHECK(a.reset_after.count() >= 0 && a.retry_after.count() >= 0,
               "negative durations: reset %lld retry %lld",
               static_cast<long long>(a.reset_after.count()),
               static_cast<long long>(a.retry_after.count()));
    FUZZ_CHECK(!a.allowed || a.retry_after.count() == 0, "allowed with a retry_after");
  }
}

void check_fast_reply(const redisReply* reply, uint8_t selector, size_t calls) {
  const int64_t now_us = (selector & 4) != 0 ? 1'780'000'000'123'457 : 0;
  const std::vector<FastShape> shapes(calls, FastShape{10, 1'000, now_us});
  ScriptAnswer answer;
  if (!read_fast_reply(reply, shapes, &answer)) return;
  FUZZ_CHECK(answer.expired.size() == calls, "one expired flag per call");
  const size_t applied = answer.expired.front() ? 0 : calls;
  FUZZ_CHECK(answer.limits.size() == applied, "one answer per applied call");
  for (const LimitAnswer& a : answer.limits)
    FUZZ_CHECK(a.remaining <= 10, "remaining above the limit");
  check_answers(answer);
}

// A node name as the client connects to it: "host:port", port 1 to 65535.
void check_node(const std::string& node) {
  const size_t colon = node.rfind(':');
  FUZZ_CHECK(colon != std::string::npos && colon > 0 && colon + 1 < node.size(),
             "not host:port: %s", node.c_str());
  const int port = std::stoi(node.substr(colon + 1));
  FUZZ_CHECK(port >= 1 && port <= 65'535, "port %d", port);
}

void check_topology_replies(const redisReply* reply) {
  int64_t us = 0;
  if (read_time_reply(reply, &us)) FUZZ_CHECK(us > 0, "TIME %lld", static_cast<long long>(us));
  std::string node;
  if (read_master_address(reply, &node) && !node.empty()) check_node(node);
  if (reply->type == REDIS_REPLY_STRING &&
      read_switch_master(std::string_view(reply->str, reply->len), "mymaster", &node))
    check_node(node);
}

void check_script_reply(const redisReply* reply, uint8_t selector, size_t calls) {
  check_fast_reply(reply, selector, calls);
  const std::vector<CallShape> shapes = shapes_for(selector, calls);
  ScriptAnswer answer;
  if (!read_script_reply(reply, shapes, &answer)) return;
  FUZZ_CHECK(answer.expired.size() == calls, "one expired flag per call");
  size_t applied = 0;
  for (size_t i = 0; i < calls; ++i) {
    if (!answer.expired[i] && !shapes[i].refund) applied += shapes[i].limits;
  }
  FUZZ_CHECK(answer.limits.size() == applied, "one answer per applied limit");
  check_answers(answer);
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
        check_script_reply(r, data[0], calls);
        check_topology_replies(r);
      }
      freeReplyObject(reply);
      reply = nullptr;
    }
  }
  redisReaderFree(reader);
  return 0;
}
