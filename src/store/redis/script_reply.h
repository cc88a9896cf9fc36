// Reading Redis's answers to the client's calls (client.cc), as pure
// functions of the reply: the redisReply tree hiredis's reader built from
// bytes off the network. Kept apart from the client's event-loop code so
// that a fuzz target (fuzz/redis_reply.cc) feeds them any tree hiredis can
// build, and so that what the client trusts in a reply is written in one place.
//
// Thread-safety: pure functions.
#pragma once

#include <hiredis/hiredis.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/decision.h"

namespace sluice::redis {

// What an error reply ("-MOVED 3999 127.0.0.1:6381") asks of the client.
struct ErrorReply {
  enum class Kind {
    kNoScript,     // NOSCRIPT: the node lost the script; send it with EVAL
    kMoved,        // MOVED <slot> <node>: the slot lives elsewhere now
    kAsk,          // ASK <slot> <node>: ask that node once (slot migrating)
    kBadRedirect,  // MOVED or ASK without a valid slot and node
    kTryAgain,     // TRYAGAIN: keys split by a migration; retry shortly
    kNotLocal,     // NOTLOCAL (entry.lua): a key group's slot is not served there;
                   // nothing was written
    kOutOfMemory,  // OOM: maxmemory reached and nothing to evict; nothing was written
    kReadOnly,     // READONLY: a replica (a failover moved the master); nothing was written
    kServer,       // the server cannot serve now (LOADING, BUSY, MASTERDOWN, ...)
    kScript,       // anything else: the script failed
  };
  Kind kind = Kind::kScript;
  int slot = -1;          // kMoved, kAsk: 0 to 16383
  std::string_view node;  // kMoved, kAsk: "host:port", a view into the message
};

ErrorReply read_error_reply(std::string_view message);

// TIME's reply (seconds, microseconds, as strings) in microseconds since the
// epoch; false for anything else (or a time at or before the epoch).
bool read_time_reply(const redisReply* reply, int64_t* us);

// SENTINEL GET-MASTER-ADDR-BY-NAME's reply: "host:port" (IPv6 hosts in
// brackets) of the master, or "" when the sentinel knows no master of that
// name (a nil reply). False for anything else.
bool read_master_address(const redisReply* reply, std::string* node);

// A +switch-master message, "<master> <old ip> <old port> <new ip> <new
// port>", of the master `master`: the new "host:port". False when it names
// another master or is not of that form.
bool read_switch_master(std::string_view message, std::string_view master, std::string* node);

// What the client sent of one call of a batch, for reading its answer.
struct CallShape {
  size_t limits = 0;
  bool refund = false;
};

// One limit's answer (its `limit` is the limit's own: the client knows it).
struct LimitAnswer {
  bool allowed = false;
  uint64_t remaining = 0;
  Nanos reset_after{0};
  Nanos retry_after{0};
};

// The rate limit script's reply to a batch (src/store/redis/scripts/entry.lua).
struct ScriptAnswer {
  int64_t redis_time_us = 0;  // the Redis TIME the call read
  // Per call: whether Redis received it past its deadline (nothing applied).
  std::vector<uint8_t> expired;
  // The limits of the acquires that were applied, in call order.
  std::vector<LimitAnswer> limits;
};

// Reads the script's reply to a batch of `calls`: an array of integers, the
// Redis TIME it read (> 0, and few enough microseconds to hold in
// nanoseconds), then per call -1 (past its deadline), or 1 for a refund, or
// for an acquire, per limit, remaining * 2 + allowed (>= 0, remaining below
// 2^53), reset_after and, when not allowed, retry_after in microseconds (>= 0,
// and few enough to hold in nanoseconds), with nothing left over. False when
// `reply` is anything else: the client then fails the batch ("unexpected
// reply").
bool read_script_reply(const redisReply* reply, std::span<const CallShape> calls,
                       ScriptAnswer* answer);

// What the client sent of one request of a fast-path batch
// (scripts/fast_fixed_window.lua): its limit, window and the time its window
// is taken at.
struct FastShape {
  uint64_t limit = 0;      // >= 1
  uint64_t window_us = 0;  // >= 1
  int64_t now_us = 0;
};

// Reads the fast path's reply to a batch of `calls` into `answer`, as
// read_script_reply() does for the script's: an array of integers, the Redis
// TIME (> 0, and few enough microseconds to hold in nanoseconds), then -1
// alone (the batch was past its deadline: every call expired), or per call
// remaining * 2 + allowed (>= 0, remaining at most the limit), with nothing
// left over. reset_after and retry_after are the time from the request's
// now_us to the end of its window; a denial's reset_after is 0 when its
// window holds nothing (remaining is the limit). False for anything else.
bool read_fast_reply(const redisReply* reply, std::span<const FastShape> calls,
                     ScriptAnswer* answer);

// The most elements a reply array may have: far more than any reply the
// client asks for (a batch of max_batch calls, CLUSTER SLOTS), far less than
// what hiredis would allocate for a header like "*700000000" before a single
// element arrived (5.6 GB of pointers).
inline constexpr int kMaxReplyElements = 1 << 20;

// Makes `reader` refuse an array header above kMaxReplyElements: hiredis
// then reports an error ("Out of memory") and the connection is dropped, as
// for any protocol error, instead of allocating for it. Call once per reader,
// before it reads (Connection does, on every new connection).
void bound_reply_arrays(redisReader* reader);

}  // namespace sluice::redis
