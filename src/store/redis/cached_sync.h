// CachedSync: cached mode's sync. Sends what CachedTable::take_batch() gives
// (every key's unsent hits, and the keys to fetch) to Redis in one call of
// scripts/cached_sync.lua per node, and hands each node's answer to
// CachedTable::settle().
//
// In a cluster the keys are grouped by slot, and a master's slots travel in
// one call (the first slot's keys declared, the others as key groups, as
// the decision script's batches do); each slot carries its own sequence
// key, so a resend that groups the slots otherwise (the slot map changed)
// still applies each slot's hits once.
//
// One sync at a time: a sync asked for while one is in flight runs after
// it. A call that fails (timeout, connection, error reply, a slot moved)
// keeps its keys and their hits, with its batch's sequence number, for the
// next sync to send again (Redis applies a sequence number at most once per
// slot, so a call it applied whose reply was lost does not count twice).
// Until then its slots are held back: hits decided meanwhile on their keys
// wait (on one Redis, every key's), while the other slots' keys go on being
// synced in new batches, so a master that is down holds back only its own.
// Failures are counted and logged (rate-limited).
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
  std::string state_key_of(const SyncItem& item) const;
  // Items sent under one sequence number, at one time.
  struct Batch {
    uint64_t sequence = 0;
    Nanos now{0};
    std::vector<SyncItem> items;
  };
  // One node's call: a batch's items in groups, one per slot (one in all on
  // one Redis), and the slot that routes it (-1: one Redis).
  struct Group {
    std::string sequence_key;
    std::vector<size_t> items;  // indices into the batch's items
  };
  struct Part {
    size_t batch = 0;  // index into flight_
    int slot = -1;
    std::vector<Group> groups;
  };
  // A sync in flight: calls not answered yet, and the first error.
  struct Round {
    size_t pending = 0;
    Status status;
    std::vector<std::vector<size_t>> failed;  // per batch, items to send again
  };

  void start(Client& client, std::vector<Done> waiters);
  // A batch in parts, by the current slot map in a cluster; false (`error`
  // says why) when the map serves not every slot of the batch.
  bool plan(size_t batch, std::vector<Part>* parts, std::string* error) const;
  void send(Client& client, const std::shared_ptr<Round>& round,
            const std::shared_ptr<const Part>& part, bool use_eval);
  void part_done(Client& client, const std::shared_ptr<Round>& round, const Part& part,
                 Status status);
  void finish(Client& client, const Round& round);
  void drop(std::vector<Batch>& batches, const std::string& redis_key);

  CachedTable& table_;
  Shared& shared_;
  const std::string sequence_key_;
  std::vector<uint32_t> slot_tags_;  // cluster: per slot, a number whose text hashes to it
  uint64_t sequence_ = 0;
  std::vector<Batch> flight_;           // in flight
  std::vector<Batch> pending_;          // failed, to be sent again
  std::vector<std::string> forgotten_;  // reset while in flight
  bool in_flight_ = false;
  std::vector<Done> current_;  // waiting for the call in flight
  std::vector<Done> queued_;   // asked while it was in flight: the next sync
  std::atomic<uint64_t> syncs_{0};
  std::atomic<uint64_t> failures_{0};
};

}  // namespace sluice::redis
