// Leases: the ids /v1/check answers for a granted concurrency slot, which
// POST /v1/release gives back.
//
// An id carries what the refund needs (policy, key, cost, the charge's time
// and the policy's limit fingerprint) and an HMAC-SHA256 of all of it under
// a secret drawn at random when the server starts. So an id names exactly
// one slot of one key under one policy, and a caller cannot forge one, nor
// edit one to release another key's or another policy's slot: anything not
// issued by this process (or changed since) fails to open. The secret is
// per process: a lease is released on the instance that granted it (with a
// shared Redis store, one not released there frees itself after `lease`).
// An id does not remember being used: release each once (a second release
// would give back another slot of the same key taken at or after it).
//
// Thread-safety: LeaseSigner is immutable after construction.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "sluice/clock.h"

namespace sluice::policy {

struct Lease {
  std::string policy;
  std::string key;
  uint64_t cost = 1;
  Nanos charged_at{0};       // the slot's Decision::decided_at
  uint64_t fingerprint = 0;  // of the policy's limit when it was granted
};

class LeaseSigner {
 public:
  // A fresh random secret (OpenSSL's RAND_bytes).
  LeaseSigner();
  // For tests: a given secret.
  explicit LeaseSigner(std::string_view secret);

  // The id of `lease`: lower-case hex, its fields then its MAC.
  std::string issue(const Lease& lease) const;
  // The lease an id names, or nullopt when the id is malformed or its MAC
  // does not match (not issued by this signer, or altered).
  std::optional<Lease> open(std::string_view id) const;

 private:
  std::array<unsigned char, 32> secret_{};
};

}  // namespace sluice::policy
