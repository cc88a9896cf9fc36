// Leases: the ids /v1/check answers for a granted concurrency slot, which
// POST /v1/release gives back.
//
// The server holds each lease (what the refund needs: policy, store key,
// cost, the charge's time, the limit's fingerprint) under a random id: 128
// random bits (RAND_bytes) and an HMAC-SHA256 of them, cut to 128 bits,
// under a secret drawn when the server starts. So an id shows nothing of the
// key, cannot be guessed, and one not issued by this process (forged,
// altered, from another instance or an earlier run) is told apart from one
// issued here and no longer held.
//
// Taking a lease out for its release removes it: a lease is released once,
// and a second release finds it no longer held (it frees nothing). The
// table is bounded: a lease is dropped when it ends (its slot has then
// freed itself in the store), and when `capacity` leases are held, issuing
// another drops the one that ends first (its slot frees itself when its
// lease ends; it can no longer be given back early). The table is per
// process: with several instances on one Redis a lease is released on the
// instance that granted it (docs/API.md).
//
// Thread-safety: every method may be called from any thread (one mutex).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "sluice/clock.h"

namespace sluice::policy {

struct Lease {
  std::string policy;
  std::string store_key;  // the slot's store key (bounded: key_bound.h)
  uint64_t cost = 1;
  Nanos charged_at{0};       // the slot's Decision::decided_at
  uint64_t fingerprint = 0;  // of the policy's limit when it was granted
  Nanos ends_at{0};          // charged_at + the policy's lease: the slot has freed itself
};

class LeaseTable {
 public:
  static constexpr size_t kDefaultCapacity = 100'000;

  // A fresh random secret (OpenSSL's RAND_bytes).
  explicit LeaseTable(size_t capacity = kDefaultCapacity);
  // For tests: a given secret.
  LeaseTable(size_t capacity, std::string_view secret);

  // Holds `lease` and returns its id (64 lower-case hex digits). Leases
  // ended by `now` are dropped first; then, at capacity, the one that ends
  // first.
  std::string issue(Lease lease, Nanos now);

  enum class Outcome {
    kTaken,    // the lease, now removed: give its slot back
    kNotHeld,  // issued here, but released already, ended or dropped
    kUnknown,  // not an id this table issued (malformed, forged, another process's)
  };
  struct Taken {
    Outcome outcome = Outcome::kUnknown;
    Lease lease;  // with kTaken
  };
  // Removes the lease `id` names and returns it, when it is still held at `now`.
  Taken take(std::string_view id, Nanos now);

  size_t size() const;

 private:
  static constexpr size_t kTokenBytes = 16;
  using ByEnd = std::multimap<Nanos, const std::string*>;
  struct Entry {
    Lease lease;
    ByEnd::iterator by_end;
  };

  // The MAC of a token, cut to 128 bits.
  std::array<unsigned char, 16> mac_of(std::string_view token) const;
  // Removes a held lease (the caller holds mutex_).
  void erase(std::unordered_map<std::string, Entry>::iterator it);
  void drop_ended(Nanos now);

  const size_t capacity_;
  std::array<unsigned char, 32> secret_{};
  mutable std::mutex mutex_;
  // Token (16 raw bytes) -> lease; by_end_ points at the tokens, which
  // never move while held (unordered_map nodes are stable). Both under mutex_.
  std::unordered_map<std::string, Entry> held_;
  ByEnd by_end_;
};

}  // namespace sluice::policy
