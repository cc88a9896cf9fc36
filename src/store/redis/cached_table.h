// CachedTable: cached mode's local state (RedisStore, mode cached): per
// (limit, key), the last global state Redis returned with this instance's
// hits since then applied, and the hits not yet sent.
//
// decide() answers a request locally, with the memory store's arithmetic
// (core::step), when every key of it has been fetched; otherwise it says to
// ask Redis (the exact call), and the next sync fetches the missing keys.
// take_batch() hands a sync what to send: every key decided since the last
// sync (its unsent hits, possibly none: a key that only denied still learns
// what the other instances left) or waiting to be fetched; the hits move to
// "in flight". Idle keys cost the sync nothing. settle() applies the
// answer: the key's local state becomes the global state returned, with the
// hits decided since the batch was taken charged on top. A failed sync leaves
// everything in flight: the same batch is resent (never lost, and the
// script's sequence number keeps it from counting twice).
//
// Bounded: at most max_keys keys; a new key evicts the least recently used
// key that has nothing unsent or in flight (keys with hits to send stay until
// a sync has sent them, so the table may hold more for one sync interval).
//
// Thread-safety: every method may be called from any thread (one mutex:
// each call holds it for a few integer operations per key, never during I/O).
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/step.h"
#include "sluice/store.h"
#include "store/redis/script_limit.h"

namespace sluice::redis {

// One key of a sync call.
struct SyncItem {
  std::string redis_key;
  ScriptLimit limit;
  uint64_t hits = 0;   // tokens or requests charged since the key's last sync
  int64_t window = 0;  // fixed_window: the window the hits were counted in
};

// The script's answer for one key: its state in the scripts' units
// (token_bucket: level in units of the ScriptLimit, time in us; fixed_window:
// window index, count), or found == false for a key Redis does not hold.
struct SyncState {
  bool found = false;
  int64_t a = 0;
  int64_t b = 0;
};

class CachedTable {
 public:
  explicit CachedTable(size_t max_keys) : max_keys_(max_keys) {}

  // Whether cached mode can decide `limit` locally; the error says why not.
  static Status limit_fits(const Limit& limit);

  enum class Outcome { kDecided, kAskRedis };
  // Decides every request at `now`, all-or-nothing, as the memory store
  // would on the local states, and counts the hits to send. kAskRedis (out
  // untouched, nothing charged) when a key is not fetched yet. Errors: the
  // memory store's (cost, max_wait). `fetch_soon` (if given) is set when
  // this kAskRedis brings the requests that asked Redis again for keys
  // waiting for their first fetch, since the last batch, to
  // kAsksBeforeFetch: those keys are hot, and each of their requests costs
  // Redis a call until a sync fetches them, so the caller syncs at once
  // rather than at the next interval (a key asked for once per interval
  // never does: its fetch would save nothing).
  Result<Outcome> decide(std::span<const AcquireRequest> requests, std::string_view key_prefix,
                         Nanos now, std::span<Decision> out, bool* fetch_soon = nullptr);
  static constexpr uint32_t kAsksBeforeFetch = 32;

  // What a sync sends, and the time to send with (the latest `now` decide()
  // saw). Empty when there is nothing to send.
  // Keys for which `hold` is true stay for a later batch, hits and all.
  std::vector<SyncItem> take_batch(Nanos* now,
                                   const std::function<bool(std::string_view)>& hold = nullptr);

  // A sync of `batch` answered `states` (one per item).
  void settle(std::span<const SyncItem> batch, std::span<const SyncState> states);

  // Forgets a key's local state (reset): its next request asks Redis.
  void forget(const std::string& redis_key);

  size_t size() const;

 private:
  struct Entry {
    explicit Entry(const Limit& l, ScriptLimit s) : limit(l), script(s) {}
    Limit limit;
    ScriptLimit script;
    core::PackedState local{0, 0};
    bool fetched = false;
    bool asked = false;  // a request went to Redis while it was not fetched
    // In dirty_: to fetch, or decided since the last sync (its hits to send,
    // and a key that only denied learns what the other instances left).
    bool listed = false;
    uint64_t unsent = 0;
    int64_t unsent_window = 0;
    uint64_t in_flight = 0;
    Nanos last_now{0};
    std::list<std::string_view>::iterator lru;
  };

  Entry* find_or_add(const Limit& limit, std::string redis_key);
  void list_dirty(Entry& e);
  void evict_one();
  // The state Redis returned, in the local arithmetic's units.
  static core::PackedState from_script(const Entry& e, const SyncState& s, Nanos now);
  // `hits` charged at `now` whatever the state holds (a bucket may go into debt).
  static core::PackedState charge(const Entry& e, core::PackedState state, uint64_t hits,
                                  int64_t window, Nanos now);

  const size_t max_keys_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, Entry> entries_;
  std::list<std::string_view> lru_;  // most recently used first; views of entries_' keys
  // The keys the next sync sends, so that a sync costs what was decided,
  // not the table's size. A key evicted or forgotten meanwhile is skipped.
  std::vector<std::string> dirty_;
  Nanos latest_now_{0};
  uint32_t asked_again_ = 0;                                // since the last batch (decide())
  std::vector<std::pair<Entry*, core::PackedState>> undo_;  // scratch of decide()
};

}  // namespace sluice::redis
