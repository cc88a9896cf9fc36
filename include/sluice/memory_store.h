// MemoryStore: the embedded, in-process store.
//
// Keys are spread over independently locked shards (no global lock), hashed
// with a per-process random seed so that clients cannot aim many keys at one
// shard or slot. Each (limit, key) state takes one fixed-size slot (a
// sliding_log or concurrency log of more than two entries also a heap
// block); the key itself is kept as a 64-bit keyed fingerprint, not as a
// string (see docs/ARCHITECTURE.md for why this is safe).
//
// Memory is bounded: at most `max_keys` states are held. When full, a new key
// evicts one state of its shard, chosen from a small sample (the whole shard
// when it is small) in this order: a state back to "full" (it tells nothing),
// then the state that will be full again soonest (least recently used among
// equals), and a state whose last decision denied only when the sample holds
// nothing else, so that flooding new keys cannot free a client from its limit.
// States touched by the request being decided are never evicted. States that
// are back to "full" are also dropped lazily as they are found.
//
// Thread-safety: all methods may be called concurrently from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "sluice/store.h"

namespace sluice {

struct MemoryStoreOptions {
  // Hard bound on the number of states held (approximate by at most one shard's
  // rounding: each shard holds at most ceil(max_keys / shards)).
  size_t max_keys = 1'000'000;
  // Number of independently locked shards; rounded up to a power of two.
  size_t shards = 64;
  // Hash seed; random per process when unset. Fix it only in tests.
  std::optional<uint64_t> seed;
};

class MemoryStore final : public Store {
 public:
  explicit MemoryStore(MemoryStoreOptions options = {});
  ~MemoryStore() override;
  MemoryStore(const MemoryStore&) = delete;
  MemoryStore& operator=(const MemoryStore&) = delete;

  Status acquire(std::span<const AcquireRequest> requests, Nanos now,
                 std::span<Decision> out) override;
  Status refund(std::span<const RefundRequest> requests, Nanos now) override;
  Result<bool> reset(const Limit& limit, std::string_view key) override;
  size_t size() const override;
  std::string_view backend() const override { return "memory"; }
  // collect_expired(now).
  void maintain(Nanos now) override;

  // Drops every state that is back to full at `now`, and returns how many.
  // A server calls it periodically (through maintain()); the store also does
  // this incrementally while inserting.
  size_t collect_expired(Nanos now);

  // Bytes allocated for states (slot tables plus the heap blocks of logs
  // that outgrew their slot).
  size_t memory_bytes() const;

  size_t max_keys() const;

 private:
  class Shard;
  // Several limits, all-or-nothing; acquire() handles one limit itself.
  Status acquire_batch(std::span<const AcquireRequest> requests, Nanos now,
                       std::span<Decision> out);
  std::unique_ptr<Shard[]> shards_;
  size_t shard_count_;
  size_t shard_mask_;
  uint64_t seed_;
  size_t max_keys_;
};

}  // namespace sluice
