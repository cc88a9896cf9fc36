#include "simulate/simulation_queue.h"

#include <string>

#include "sluice/memory_store.h"

namespace sluice::simulate {

Result<std::vector<QueuedTurn>> replay_queued(const Traffic& traffic, const SimLimit& limit,
                                              Nanos delay) {
  Result<Limit> bucket = Limit::token_bucket(limit.limit, limit.limit, limit.window);
  if (!bucket.ok()) return bucket.error();
  // One shard and room for every key: nothing evicted, every state exact.
  MemoryStore store(MemoryStoreOptions{
      .max_keys = std::max<size_t>(traffic.keys.size(), 1),
      .shards = 1,
      .seed = uint64_t{0x5eed},
  });
  std::vector<QueuedTurn> turns;
  turns.reserve(traffic.requests.size());
  for (const SimRequest& r : traffic.requests) {
    const AcquireRequest request{&*bucket, traffic.keys[r.key], r.cost, delay};
    Decision decision;
    if (Status s = store.acquire({&request, 1}, r.at, {&decision, 1}); !s.ok()) {
      const std::string where =
          r.line > 0 ? traffic.source + ":" + std::to_string(r.line) + ": " : std::string();
      return Error{s.error().code, where + s.error().message};
    }
    turns.push_back({decision.allowed, decision.wait});
  }
  return turns;
}

}  // namespace sluice::simulate
