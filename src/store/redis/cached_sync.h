// CachedSync: cached mode's sync. Sends what CachedTable::take_batch() gives
// (every key's unsent hits, and the keys to fetch) to Redis in one call of
// scripts/cached_sync.lua per node, and hands the answer to
// CachedTable::settle() once every node has answered.
//
// In a cluster the keys are grouped by slot, and a master's slots travel in
// one call (the first slot's keys declared, the others as key groups, as
// the decision script's batches do); each slot carries its own sequence
// key, so a resend that groups the slots otherwise (the slot map changed)
// still applies each slot's hits once.
//
// One sync at a time: a sync asked for while one is in flight runs after
// it. A failed call (timeout, connection, error reply, a slot moved) fails
// the sync: the whole batch is sent again, with its sequence number, by the
// next sync (the slots Redis applied only read, by their sequence keys), so
// a call Redis applied whose reply was lost does not count twice. The hits
// decided meanwhile wait for the sync after. Failures are counted and
// logged (rate-limited).
//
// Thread-safety: run() and forget() on the store's internal thread only;
// the counters may be read from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sluice/result.h"
#include "store/redis/cached_table.h"

namespace sluice::redis {

class Client;
struct Shared;

class CachedSync {
 public:
  using Done = std::function<void(Status)>;
  CachedSync(CachedTable& table, Shared& shared);

  // Syncs now through `client`; `done` runs once it is answered (or failed).
  void run(Client& client, Done done);

  // A reset of `redis_key` (before its DEL is sent): its hits in a batch
  // that failed are not sent again. A resend that reached Redis after the
  // DEL would otherwise charge them to the reset key; a batch in flight is
  // ahead of the DEL on the connection, so only its failure matters.
  void forget(const std::string& redis_key);

  uint64_t syncs() const { return syncs_.load(std::memory_order_relaxed); }
  uint64_t failures() const { return failures_.load(std::memory_order_relaxed); }

 private:
  // One node's call: groups of batch_ items, one per slot (one in all on
  // one Redis), and the slot that routes it (-1: one Redis).
  struct Group {
    std::string sequence_key;
    std::vector<size_t> items;  // indices into batch_
  };
  struct Part {
    int slot = -1;
    std::vector<Group> groups;
  };
  // The calls of one sync in flight, and what they answered so far.
  struct Round {
    size_t pending = 0;
    Status status;
    std::vector<SyncState> states;  // per batch_ item
  };

  void start(Client& client, std::vector<Done> waiters);
  // batch_ in parts, by the current slot map in a cluster; false (`error`
  // says why) when the map serves not every slot of the batch.
  bool plan(std::vector<Part>* parts, std::string* error);
  void send(Client& client, const std::shared_ptr<Round>& round,
            const std::shared_ptr<const Part>& part, bool use_eval);
  void part_done(Client& client, const std::shared_ptr<Round>& round, Status status);
  void finish(Client& client, Status status);

  CachedTable& table_;
  Shared& shared_;
  const std::string sequence_key_;
  uint64_t sequence_ = 0;
  std::vector<uint32_t> slot_tags_;     // cluster: per slot, a number whose text hashes to it
  std::vector<SyncItem> batch_;         // in flight, or failed and to be sent again
  std::vector<std::string> forgotten_;  // reset while batch_ was in flight
  Nanos batch_now_{0};
  bool resend_ = false;
  bool in_flight_ = false;
  std::vector<Done> current_;  // waiting for the call in flight
  std::vector<Done> queued_;   // asked while it was in flight: the next sync
  std::atomic<uint64_t> syncs_{0};
  std::atomic<uint64_t> failures_{0};
};

}  // namespace sluice::redis
