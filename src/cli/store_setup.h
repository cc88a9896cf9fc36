// The store `sluice serve` runs on (store.backend, docs/CONFIG.md): the memory
// store, or the Redis / Redis Cluster store together with the hooks that bind
// it to the server's worker threads (attach before serving, detach at
// shutdown) and export its error counters in /metrics.
//
// Thread-safety: call on the main thread before the server starts.
#pragma once

#include <memory>

#include "cli/deployment.h"
#include "http/server.h"
#include "policy/config.h"
#include "sluice/redis_store.h"
#include "sluice/result.h"
#include "sluice/store.h"

namespace sluice::cli {

struct ServeStore {
  std::shared_ptr<Store> store;
  http::StoreHooks hooks;  // empty for the memory store
};

// The RedisStore options of a config's store.redis section.
RedisStoreOptions redis_store_options(const policy::RedisConfig& redis);

// Store::check_limit of the store `store` describes, without building it (for
// `sluice validate` and reloads): the Redis store's exactness rule for redis,
// nothing for memory.
LimitCheck limit_check_for(const policy::StoreConfig& store);

// Builds the store the config asks for. A Redis store is returned even when
// Redis is down (it connects in the background; /readyz says 503 meanwhile).
// Errors: options the Redis store refuses (the message says which).
Result<ServeStore> make_serve_store(const policy::Config& config);

}  // namespace sluice::cli
