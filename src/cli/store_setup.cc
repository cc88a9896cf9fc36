#include "cli/store_setup.h"

#include <chrono>
#include <string>
#include <utility>

#include <spdlog/spdlog.h>

#include "sluice/memory_store.h"

namespace sluice::cli {

namespace {

// Redis store counters in /metrics. Errors are what made a call fail (and
// on_failure apply); events are the store's normal work around Redis.
void register_redis_metrics(const std::shared_ptr<RedisStore>& store, observe::Registry& r) {
  const char* errors = "sluice_redis_errors_total";
  const char* errors_help =
      "Redis store errors, by kind: timeout (no reply within store.redis.timeout), connection "
      "(connect failures, lost connections, calls made while down), script (error replies), "
      "server (LOADING, BUSY, OOM, CLUSTERDOWN, NOAUTH...), overloaded (too many calls waiting).";
  const char* events = "sluice_redis_events_total";
  const char* events_help =
      "Redis store events, by kind: script_load (NOSCRIPT answered), moved, ask, tryagain "
      "(cluster redirections), slot_split (a cluster node's call of several slots sent again "
      "per slot: a slot of it moved or is migrating), reconnect (connections established), "
      "topology_refresh (slot maps "
      "read), expired (requests Redis received past their deadline and did not apply), "
      "late_reply (replies to calls that had already timed out), late_applied (of those, calls "
      "Redis applied: charged although on_failure answered them).";
  // The store outlives the registry's readers: both live until serve returns,
  // and the Server (with its registry) is destroyed first.
  RedisStore* s = store.get();
  auto add = [&](const char* family, const char* help, const char* kind,
                 uint64_t RedisStoreStats::*field) {
    r.counter_function(family, help, {{"kind", kind}}, [s, field] { return s->stats().*field; });
  };
  add(errors, errors_help, "timeout", &RedisStoreStats::timeouts);
  add(errors, errors_help, "connection", &RedisStoreStats::connection_errors);
  add(errors, errors_help, "script", &RedisStoreStats::script_errors);
  add(errors, errors_help, "server", &RedisStoreStats::server_errors);
  add(errors, errors_help, "overloaded", &RedisStoreStats::overloaded);
  add(events, events_help, "script_load", &RedisStoreStats::script_loads);
  add(events, events_help, "moved", &RedisStoreStats::moved);
  add(events, events_help, "ask", &RedisStoreStats::ask);
  add(events, events_help, "tryagain", &RedisStoreStats::tryagain);
  add(events, events_help, "slot_split", &RedisStoreStats::slot_splits);
  add(events, events_help, "reconnect", &RedisStoreStats::reconnects);
  add(events, events_help, "topology_refresh", &RedisStoreStats::topology_refreshes);
  add(events, events_help, "expired", &RedisStoreStats::expired);
  add(events, events_help, "late_reply", &RedisStoreStats::late_replies);
  add(events, events_help, "late_applied", &RedisStoreStats::late_applied);
  r.counter_function("sluice_deny_cache_hits_total",
                     "Requests denied by the Redis store's deny cache (store.redis.deny_cache): a "
                     "key Redis had denied, answered with no Redis call until its retry_after.",
                     {}, [s] { return s->stats().deny_cache_hits; });
  r.counter_function("sluice_redis_syncs_total",
                     "Cached mode (store.redis.mode cached): sync calls that sent this instance's "
                     "hits to Redis, by result.",
                     {{"result", "ok"}}, [s] { return s->stats().syncs; });
  r.counter_function("sluice_redis_syncs_total",
                     "Cached mode (store.redis.mode cached): sync calls that sent this instance's "
                     "hits to Redis, by result.",
                     {{"result", "failed"}}, [s] { return s->stats().sync_failures; });
}

}  // namespace

LimitCheck limit_check_for(const policy::StoreConfig& store) {
  if (store.backend == policy::StoreConfig::Backend::kRedis) {
    const RedisMode mode = store.redis.mode_cached ? RedisMode::kCached : RedisMode::kExact;
    return [mode](const Limit& limit) { return RedisStore::limit_fits(limit, mode); };
  }
  return {};
}

RedisStoreOptions redis_store_options(const policy::RedisConfig& redis) {
  RedisStoreOptions o;
  o.addresses.clear();
  for (const policy::HostPort& a : redis.addresses) o.addresses.push_back(a.text());
  o.cluster = redis.cluster;
  o.timeout = redis.timeout;
  o.username = redis.username;
  o.password = redis.password;
  o.database = redis.database;
  o.deny_cache = redis.deny_cache;
  o.mode = redis.mode_cached ? RedisMode::kCached : RedisMode::kExact;
  o.sync_interval = redis.sync_interval;
  o.tls = {redis.tls.enabled, redis.tls.ca_file, redis.tls.cert_file, redis.tls.key_file,
           redis.tls.server_name};
  if (redis.time_source_redis) {
    o.time_source = RedisTimeSource::kRedis;
  } else {
    // Every instance's own clock decides; a key must not expire before its
    // state is full again by a clock somewhat ahead of Redis's.
    o.time_source = RedisTimeSource::kLocal;
    o.ttl_extra = std::chrono::seconds(1);
  }
  return o;
}

Result<ServeStore> make_serve_store(const policy::Config& config) {
  ServeStore out;
  if (config.store.backend == policy::StoreConfig::Backend::kMemory) {
    MemoryStoreOptions options;
    options.max_keys = config.store.max_keys;
    out.store = std::make_shared<MemoryStore>(options);
    return out;
  }
  Result<std::shared_ptr<RedisStore>> created =
      RedisStore::create(redis_store_options(config.store.redis));
  if (!created.ok()) return created.error();
  std::shared_ptr<RedisStore> redis = std::move(created).value();
  // Each worker thread talks to Redis on its own connection(s), driven by its
  // own event loop, so a decision never crosses threads.
  out.hooks.attach = [redis](boost::asio::io_context& io) { redis->attach(io); };
  out.hooks.detach = [redis](boost::asio::io_context&) { redis->detach(); };
  out.hooks.register_metrics = [redis](observe::Registry& r) { register_redis_metrics(redis, r); };
  if (!redis->wait_ready(std::chrono::seconds(1))) {
    spdlog::warn(
        "redis is not answering yet; it is retried in the background and requests are decided "
        "per store.redis.on_failure ({}) until it answers (/readyz says 503 meanwhile)",
        config.store.redis.on_failure_allow ? "allow" : "deny");
  }
  out.store = std::move(redis);
  return out;
}

}  // namespace sluice::cli
