// The Redis store's health check, on its internal thread: a round asks every
// master (the cluster's, the sentinels' master, or the one address) for
//   - TIME: the node answers (ready), and its clock offset is bounded anew;
//   - DBSIZE: the key count for metrics, without a wait on the request path;
//   - a write probe, LPUSHX to a key that never exists (so it writes
//     nothing), which Redis checks as any write: refused with OOM while maxmemory is reached and
//     nothing can be evicted (then Redis refuses writes: Shared::writes_refused), with READONLY on
//     a replica (the master moved: the topology is asked again).
// A round's answers are taken only if no later round began meanwhile.
//
// Thread-safety: run() and not_ready() on the internal thread; the getters
// from any thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "store/redis/client.h"
#include "store/redis/shared.h"

namespace sluice::redis {

class HealthCheck {
 public:
  explicit HealthCheck(Shared& shared) : shared_(shared) {}

  // A node to ask, and (cluster) a slot it serves, for the probe's key; -1 without a cluster.
  struct Node {
    std::string name;  // "host:port"
    int slot = -1;
  };
  // One round over `nodes`, each command with `timeout`.
  void run(Client& client, const std::vector<Node>& nodes, std::chrono::milliseconds timeout);
  // Nothing to ask yet (no slot map, no master): not ready.
  void not_ready();

  // The last round's answer: every node answered TIME, and none is a replica.
  bool ready() const { return ready_.load(std::memory_order_relaxed); }
  // DBSIZE summed at the last round every node answered; 0 before.
  size_t observed_keys() const { return observed_keys_.load(std::memory_order_relaxed); }

 private:
  struct Round;
  void finish(const Round& round);

  // The probe's key: in `slot`'s hash tag (slot_tags()) in a cluster.
  std::string probe_key(int slot);

  Shared& shared_;
  uint64_t generation_ = 0;          // internal thread
  std::vector<uint32_t> slot_tags_;  // cluster, from the first round on
  std::atomic<bool> ready_{false};
  std::atomic<size_t> observed_keys_{0};
};

}  // namespace sluice::redis
