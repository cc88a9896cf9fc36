#include "cli/store_setup.h"

#include <chrono>
#include <string>
#include <utility>

#include <spdlog/spdlog.h>

#include "sluice/memory_store.h"

namespace sluice::cli {

namespace {

// How long `sluice serve` waits at start for a Redis that answers: every
// worker thread's connections (TLS handshakes included) and the sentinels'
// first answer.
constexpr std::chrono::seconds kConnectWait{3};

// Redis store counters in /metrics. Errors are what made a call fail (and
// on_failure apply); events are the store's normal work around Redis.
void register_redis_metrics(const std::shared_ptr<RedisStore>& store, observe::Registry& r) {
  const char* errors = "sluice_redis_errors_total";
  const char* errors_help =
      "Redis store errors, by kind: timeout (no reply within store.redis.timeout), connection "
      "(connect failures, lost connections, calls made while not connected), script (error "
      "replies), server (LOADING, BUSY, READONLY, CLUSTERDOWN, NOAUTH...), oom (Redis refused a "
      "write: maxmemory reached), overloaded (too many calls waiting).";
  const char* events = "sluice_redis_events_total";
  const char* events_help =
      "Redis store events, by kind: script_load (NOSCRIPT answered), moved, ask, tryagain "
      "(cluster redirections), slot_split (a cluster node's call of several slots sent again "
      "per slot: a slot of it moved or is migrating), reconnect (connections established), "
      "topology_refresh (slot maps "
      "read), expired (requests Redis received past their deadline and did not apply), "
      "late_reply (replies to calls that had already timed out), late_applied (of those, calls "
      "Redis applied: charged although on_failure answered them), master_switch (the master "
      "the sentinels name moved).";
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
  add(errors, errors_help, "oom", &RedisStoreStats::out_of_memory);
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
  add(events, events_help, "master_switch", &RedisStoreStats::master_switches);
  r.gauge("sluice_redis_writes_refused",
          "1 while Redis refuses writes (it answered OOM: maxmemory reached and nothing to "
          "evict; /readyz says 503 meanwhile), else 0.",
          {}, [s] { return s->writes_refused() ? 1.0 : 0.0; });
  const char* connections = "sluice_redis_connections";
  const char* connections_help =
      "Connections the Redis store keeps (each worker thread's, to every master, and its own), "
      "by peer (node: Redis; sentinel) and state (up: answered its handshake; down: connecting "
      "or waiting to reconnect).";
  for (const bool sentinel : {false, true}) {
    for (const bool up : {true, false}) {
      r.gauge(connections, connections_help,
              {{"peer", sentinel ? "sentinel" : "node"}, {"state", up ? "up" : "down"}},
              [s, sentinel, up] {
                const RedisConnectionCounts c =
                    sentinel ? s->sentinel_connections() : s->connections();
                return static_cast<double>(up ? c.up : c.down);
              });
    }
  }
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
  if (!redis.sentinel.master.empty()) {
    o.addresses.clear();
    o.sentinel.master = redis.sentinel.master;
    o.sentinel.addresses = redis.sentinel.addresses;
    o.sentinel.password = redis.sentinel.password;
  }
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
  // The store's own connection first (the Envoy RLS port, open before the
  // worker threads are, decides there meanwhile). Sentinels that answer but
  // know no such master: the config names the wrong one, which waiting will
  // not mend.
  if (Status s = redis->wait_connected(kConnectWait); !s.ok())
    return Error{ErrorCode::kInvalidArgument, "store.redis.sentinel.master: " + s.error().message};
  // Each worker thread talks to Redis on its own connection(s), driven by its
  // own event loop, so a decision never crosses threads.
  out.hooks.attach = [redis](boost::asio::io_context& io) { redis->attach(io); };
  out.hooks.detach = [redis](boost::asio::io_context&) { redis->detach(); };
  out.hooks.register_metrics = [redis](observe::Registry& r) { register_redis_metrics(redis, r); };
  // Once every worker thread has opened its connections: the listeners
  // accept from then on, so that the first decisions are Redis's, not
  // on_failure's. A Redis that does not answer is not waited for.
  out.hooks.wait_ready = [redis, allow = config.store.redis.on_failure_allow] {
    (void)redis->wait_connected(kConnectWait);
    if (!redis->ready()) {
      spdlog::warn(
          "redis is not answering yet; it is retried in the background and requests are decided "
          "per store.redis.on_failure ({}) until it answers (/readyz says 503 meanwhile)",
          allow ? "allow" : "deny");
    }
  };
  out.store = std::move(redis);
  return out;
}

}  // namespace sluice::cli
