// CachedSync: cached mode's sync. Sends what CachedTable::take_batch() gives
// (every key's unsent hits, and the keys to fetch) to Redis in one call of
// scripts/cached_sync.lua and hands the answer to CachedTable::settle().
//
// One sync at a time: a sync asked for while one is in flight runs after
// it. A failed call (timeout, connection, error reply) keeps its batch and
// sequence number and is sent again, as it was, by the next sync; the script
// applies a sequence number at most once, so a call Redis applied whose
// reply was lost does not count twice. The hits decided meanwhile wait for
// the sync after. Failures are counted and logged (rate-limited).
//
// Thread-safety: run() and forget() on the store's internal thread only; the counters
// may be read from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
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
  void start(Client& client, std::vector<Done> waiters);
  void send(Client& client, bool use_eval);
  void finish(Client& client, Status status);

  CachedTable& table_;
  Shared& shared_;
  const std::string sequence_key_;
  uint64_t sequence_ = 0;
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
