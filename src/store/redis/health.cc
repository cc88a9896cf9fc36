#include "store/redis/health.h"

#include <spdlog/spdlog.h>

#include <memory>

#include "store/redis/script_limit.h"
#include "store/redis/script_reply.h"

namespace sluice::redis {
struct HealthCheck::Round {
  uint64_t generation = 0;
  size_t waiting = 0;
  bool answered = true;  // every TIME
  bool replica = false;  // a probe answered READONLY
  bool probes_answered = true;
  std::string refused_by;  // a node whose probe answered OOM, and its message
  std::string refusal;
  bool counted = true;  // every DBSIZE
  size_t keys = 0;
};

void HealthCheck::not_ready() {
  ++generation_;
  ready_.store(false, std::memory_order_relaxed);
}

std::string HealthCheck::probe_key(int slot) {
  // No key of Sluice's is named so (they hold a 16-hex-digit hash tag, or "sync:").
  std::string key = shared_.options.key_prefix + "writable";
  if (slot < 0) return key;
  if (slot_tags_.empty()) slot_tags_ = slot_tags();
  return key + "{" + std::to_string(slot_tags_[static_cast<size_t>(slot)]) + "}";
}

void HealthCheck::run(Client& client, const std::vector<Node>& nodes,
                      std::chrono::milliseconds timeout) {
  auto round = std::make_shared<Round>();
  round->generation = ++generation_;
  round->waiting = 3 * nodes.size();
  const auto done = [this, round] {
    if (--round->waiting == 0) finish(*round);
  };
  for (const Node& n : nodes) {
    const std::string& node = n.name;
    const auto sent = std::chrono::steady_clock::now();
    client.command(command({"TIME"}), node, -1, timeout,
                   [this, round, node, sent, done](Status s, const redisReply* reply) {
                     const auto received = std::chrono::steady_clock::now();
                     int64_t redis_us = 0;
                     if (s.ok() && read_time_reply(reply, &redis_us)) {
                       shared_.clock_of(node).observe(redis_us, ClockOffset::floor_us(sent),
                                                      ClockOffset::ceil_us(received));
                     } else {
                       round->answered = false;
                     }
                     done();
                   });
    client.command(command({"DBSIZE"}), node, -1, timeout,
                   [round, done](Status s, const redisReply* reply) {
                     if (s.ok() && reply != nullptr && reply->type == REDIS_REPLY_INTEGER) {
                       round->keys += static_cast<size_t>(reply->integer);
                     } else {
                       round->counted = false;
                     }
                     done();
                   });
    // An error reply completes the command with a failed status and the reply.
    // Pushes only to a list that exists: none does, so nothing is written.
    client.command(command({"LPUSHX", probe_key(n.slot), "1"}), node, n.slot, timeout,
                   [round, node, done](Status s, const redisReply* reply) {
                     if (!s.ok() && reply == nullptr) {
                       round->probes_answered = false;  // no answer says nothing of writes
                     } else if (!s.ok()) {
                       // Other error replies say nothing of memory: writes
                       // are taken as accepted.
                       const ErrorReply e = read_error_reply(s.error().message);
                       if (e.kind == ErrorReply::Kind::kOutOfMemory) {
                         round->refused_by = node;
                         round->refusal = s.error().message;
                       } else if (e.kind == ErrorReply::Kind::kReadOnly) {
                         round->replica = true;
                       }
                     }
                     done();
                   });
  }
}

void HealthCheck::finish(const Round& round) {
  if (round.generation != generation_) return;  // a later round has begun
  const bool ready = round.answered && !round.replica;
  ready_.store(ready, std::memory_order_relaxed);
  // Without load, the health check is what finds a master gone, perhaps
  // replaced by its replica (cluster), or a master that is a replica now
  // (sentinel).
  if (!ready && shared_.follows_topology() && shared_.request_refresh) shared_.request_refresh();
  if (round.counted) observed_keys_.store(round.keys, std::memory_order_relaxed);
  if (!round.probes_answered) return;
  if (!round.refused_by.empty()) {
    shared_.note_writes_refused(round.refused_by, round.refusal);
  } else if (shared_.writes_refused.exchange(false, std::memory_order_relaxed)) {
    spdlog::info("redis store: Redis accepts writes again");
  }
}

}  // namespace sluice::redis
