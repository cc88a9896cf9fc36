// RedisStore: limit state in Redis or a Redis Cluster, shared by every Sluice
// instance that points at it, so that instances stay stateless.
//
// Each acquire() is one Lua script call (EVALSHA) that decides every limit of
// the request and writes all of them or none (all-or-nothing). The scripts
// compute exactly the memory store's algorithms in integer microseconds: for
// times that are whole microseconds the decisions (allowed, limit, remaining)
// are identical, and reset_after / retry_after are the memory store's rounded
// up to a whole microsecond. Keys expire after their state is back to "full"
// (at most its time to full later: the TTL is set to twice what is needed
// when a write needs a later expiry, and kept otherwise), so idle keys
// disappear from Redis.
//
// Refunds and lockouts are the memory store's too. refund() is a script call
// like acquire(), per cluster slot of its requests; a refund keeps the key's
// TTL (it only makes the state full sooner). A limit with a block keeps its
// lockout in a key of its own beside the state (redis_lockout_key(), same
// slot), holding when the lockout ends and expiring then, so every instance
// on the same Redis sees it; reset() deletes both. Decision::decided_at is
// the time the script decided at: the caller's `now` (time_source local, in
// whole microseconds) or Redis TIME; for a fixed window, the time its window
// was taken at (below).
//
// A fixed window counts in a key per window (redis_window_key()), an integer,
// as envoyproxy/ratelimit's INCRBY + EXPIRE does: the client names the key,
// so it takes the window at the caller's `now` (time_source local) or, with
// time_source redis, at the node's clock as this process reads it (the
// lower bound of its offset, learnt from every reply: early by at most the
// fastest round trip; this process's clock before the first reply). Each
// window's count is exact; the reading decides only which of two windows a
// request at their edge counts in. Time that runs backwards counts in the
// earlier window (the memory store, with one state per key, keeps counting
// in the later one).
//
// Threads and event loops. The client is Sluice's own, on Asio sockets (TLS
// through OpenSSL when asked), reading replies with hiredis's RESP reader:
//   - A server gives every worker thread its own io_context (one per core).
//     Each worker thread calls attach(io) once, on that thread, before its
//     first acquire_async(). The store then keeps one connection per attached
//     thread (per master in a cluster), driven by that thread's loop, opened
//     by attach() and kept open (reconnected in the background with backoff;
//     ready() is false until every one is up); everything issued in one loop
//     turn goes out in one write (pipelining), and `done` runs on that thread.
//   - acquire() (synchronous, for embedding) runs the call on an internal I/O
//     thread and waits. acquire_async() from a thread that never called
//     attach() also runs there, and then `done` runs on the internal thread.
//   - Shutdown: stop the attached io_contexts (or call detach() on each worker
//     thread), then destroy the store, then the io_contexts. The store must not
//     outlive an io_context it was attached to.
//
// Failure. A call that Redis does not answer within `timeout` completes with
// kStoreUnavailable (its late reply is ignored); so does, at once, a call made
// while its connection is not up, connecting included (reconnection runs in
// the background with backoff; a refused TLS handshake or AUTH counts as
// down, logged with the reason), so that the timeout never pays for a connect
// or a handshake; and a call made while `max_in_flight` calls already wait on
// the connection (no unbounded queue). A call is never sent twice unless
// Redis said it applied nothing (NOSCRIPT, a cluster redirection, READONLY is
// not resent): a lost connection fails the calls it carried. The caller applies its on_failure
// policy to kStoreUnavailable. A call that Redis receives after its timeout (a paused Redis meeting
// its backlog) is not applied: each request carries its deadline, converted to the node's clock
// with a lower bound of the clock offset learnt from the replies to TIME (every connection's
// handshake, the health checks) and to the script, and the script compares it with Redis TIME. The
// deadline is never later than the true one, and a connection is up only once its TIME has
// answered, so every call carries one (a new master after a failover included). One case stays:
// Redis applies a call in time but its reply comes late (Redis stopped between running the script
// and writing the reply); stats() counts those (late_applied). Errors are counted by kind (stats())
// and logged at most once per second per kind through spdlog.
//
// Limits. Every quantity must stay exact in the doubles of Redis Lua (below
// 2^53). Window algorithms always fit. token_bucket and gcra need
// 2 * capacity * unit + rate <= 2^53, where unit / rate is refill_period_us /
// refill_tokens reduced by their gcd; check_limit() (limit_fits() without a
// store) says whether a limit fits
// and acquire() refuses one that does not with kInvalidArgument. A block
// always fits (whole microseconds, at most 10 years). Times (`now`, a
// refund's charged_at) must be at or after the epoch.
//
// Deny cache (options.deny_cache, on by default). Once Redis denies a key
// under a limit for a cost with retry_after R, this store denies the same
// limit and key for that cost without calling Redis until R has passed (a
// fixed window or a lockout: any larger cost too; a lockout: any cost). A
// request is answered so when every one of its limits is; the others go to
// Redis, which alone knows what their other limits have left. This is
// exact, Retry-After included: R is the shortest wait if nothing else
// consumes, and other instances only consume (their charges lengthen the
// true wait, as they would after an answer from Redis). With time_source
// redis the local end is taken from when the call was issued, less 1,000
// ppm of R for clock drift, so it is never later than Redis's. A refund or
// reset through this store forgets the key; another instance's are not seen
// until R passes. deny_cache.h has the details.
//
// Cached mode (options.mode kCached, opt-in; docs/SCALING.md). Each store
// decides locally, with the memory store's arithmetic (src/core), from the
// last global state Redis gave it plus its own hits not yet sent, and sends
// its hits to Redis every sync_interval in one script call (one Redis; a
// cluster is refused). The first request for a key goes to Redis exactly
// (an ordinary call) and the next sync fetches the key's state; from then on
// the key is decided locally. A sync applies the hits to the global state
// (a bucket may go into debt: hits are never dropped) and returns it. Over-
// admission across instances is bounded (docs/SCALING.md derives the
// bound). token_bucket and fixed_window only, without block: check_limit()
// refuses the others. A failed sync keeps deciding locally and resends the
// same hits under the same sequence number, which the script applies at
// most once. reset() forgets the local state too; destruction sends the
// unsent hits (one last sync). stats().syncs counts the syncs answered.
//
// Thread-safety: all methods may be called from any thread, with the rules on
// attach()/detach() above.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/store.h"

namespace boost::asio {
class io_context;
}

namespace sluice {

enum class RedisTimeSource {
  kRedis,  // the script reads Redis TIME (default): instances with skewed clocks agree
  kLocal,  // the caller's `now` is passed to the script (tests, simulations)
};

// TLS to Redis (every node of a cluster alike). The server's certificate is
// always verified: against ca_file, and for the name it must carry.
struct RedisTlsOptions {
  // On also when an address is a rediss:// URL.
  bool enabled = false;
  // PEM CA certificates to verify the server with; "" = OpenSSL's default
  // paths (the system's CAs).
  std::string ca_file;
  // A client certificate (PEM chain) and its private key, for servers that
  // ask for one (tls-auth-clients): both or neither.
  std::string cert_file;
  std::string key_file;
  // The name the server's certificate must carry (DNS name, or IP address),
  // also sent as SNI; "" = the host of the address being connected to (a
  // cluster node's: as the cluster announces it).
  std::string server_name;
  friend bool operator==(const RedisTlsOptions&, const RedisTlsOptions&) = default;
};

// Redis Sentinel: the master's address is asked from the sentinels (SENTINEL
// GET-MASTER-ADDR-BY-NAME, the first that answers, each in turn) at start,
// after a lost connection to the master, a call that timed out, a READONLY
// reply (the node is a replica now), a failed health check, and every
// topology_refresh; and each sentinel's +switch-master message moves the
// store to the new master at once. Calls made while no master answers fail
// (kStoreUnavailable) as calls to a Redis that is down do. TLS to the
// sentinels is the store's `tls`, as to Redis.
struct RedisSentinelOptions {
  // The master's name, as the sentinels monitor it; "" = no Sentinel.
  std::string master;
  // "host:port" or "redis[s]://[[user]:password@]host[:port]" of each sentinel.
  std::vector<std::string> addresses;
  // AUTH to a sentinel whose address carries no credentials ("" = none).
  std::string username;
  std::string password;
  friend bool operator==(const RedisSentinelOptions&, const RedisSentinelOptions&) = default;
};

enum class RedisMode {
  kExact,   // every decision is a Redis script call (default)
  kCached,  // local decisions, hits sent every sync_interval (see the class comment)
};

struct RedisStoreOptions {
  // "host:port" or "redis[s]://[[user]:password@]host[:port][/database]"
  // (rediss: TLS, see `tls`; all addresses alike). With
  // cluster == false the first address is used; with cluster == true these
  // are the seeds from which the slot map is read. Empty with a sentinel.
  std::vector<std::string> addresses{"127.0.0.1:6379"};
  bool cluster = false;
  // The sentinels that name the master (not with cluster, nor addresses):
  // the master then takes username, password, database and tls from here.
  RedisSentinelOptions sentinel;
  // Per call, from issue to reply, including redirects and retries. A call
  // never waits for a connection: one made while its node's connection is not
  // up fails at once (kStoreUnavailable), so this never pays for a connect or
  // a TLS handshake.
  std::chrono::milliseconds timeout{5};
  // AUTH and SELECT on every connection; an address's URL may override them.
  std::string username;
  std::string password;
  int database = 0;
  RedisTimeSource time_source = RedisTimeSource::kRedis;
  // Prepended to every Redis key (see redis_key()).
  std::string key_prefix = "sluice:";
  // Added to every key's TTL. With time_source kLocal the caller's clock and
  // Redis's may differ: set this to at least the possible skew so a key never
  // expires before its state is full again by the caller's clock.
  std::chrono::milliseconds ttl_extra{0};
  // Calls waiting for replies on one connection; more fail at once.
  size_t max_in_flight = 10'000;
  // The calls issued in one event-loop turn to one node (in a cluster, of
  // any of its slots) travel in one script call, up to this many: Redis pays
  // a script call's fixed cost once per batch. While a script call of the
  // same thread is in flight to the node, the next batch keeps filling until
  // its reply comes, unless it reaches this size or spans max_hold. Each
  // request is still decided on its own, all-or-nothing, in issue order per
  // slot. 1 sends every call alone.
  size_t max_batch = 64;
  // How long after its first call a batch waiting behind a call in flight
  // takes more: a Redis that stalls gets the waiting requests in batches of
  // this span, so a batch's one deadline (its earliest) refuses none much
  // before its own.
  std::chrono::milliseconds max_hold{2};
  std::chrono::milliseconds connect_timeout{1'000};
  // Reconnection backoff: doubles from min to max after each failed attempt.
  std::chrono::milliseconds reconnect_min{20};
  std::chrono::milliseconds reconnect_max{500};
  // A connection whose oldest call waits longer than this is dropped and
  // reconnected (a Redis that stopped answering without closing the socket).
  std::chrono::milliseconds stall_timeout{2'000};
  // How often the internal thread asks every master for TIME: for ready(),
  // and to refresh the clock offsets that convert call deadlines.
  std::chrono::milliseconds health_interval{500};
  // Cluster: how often the slot map is re-read (it is also re-read after
  // MOVED and after a node's connection fails).
  std::chrono::milliseconds topology_refresh{5'000};
  RedisTlsOptions tls;
  // Deny cache: a key Redis denied for a cost is denied here, with no Redis
  // call, for the same or a larger cost until its retry_after (exact: see
  // the class comment). Bounded to `deny_cache_entries` denials (about 48
  // bytes each); a reset() or refund() of a key forgets its denial here.
  bool deny_cache = true;
  size_t deny_cache_entries = 65'536;
  // An acquire whose only limit is a fixed_window without a block goes to a
  // script of its own, cheaper for Redis, on the same keys and values (it
  // decides exactly as the general script). Off: every acquire goes to the
  // general script (for comparison; there is no other reason to turn it off).
  bool fixed_window_fast_path = true;
  // Cached mode: decide locally, send hits every sync_interval (a timer on
  // the internal thread; sync() sends at once). cached_keys bounds the local
  // table: idle keys without unsent hits are evicted, least recently used
  // first. The deny cache is not used in cached mode (nothing to save).
  RedisMode mode = RedisMode::kExact;
  std::chrono::milliseconds sync_interval{50};
  size_t cached_keys = 100'000;
  // Cached mode: keys waiting for their first fetch that keep asking Redis
  // (CachedTable::kAsksBeforeFetch requests since the last sync) bring the
  // next sync forward to once Redis has answered, so that their requests
  // stop going to Redis sooner. Off: syncs only every sync_interval (tests
  // that count calls around syncs they trigger themselves).
  bool early_fetch = true;
};

// Connections by state: up (the node answered its handshake), down
// (connecting, or waiting to reconnect).
struct RedisConnectionCounts {
  int64_t up = 0;
  int64_t down = 0;
};

// Error counters since the store was created.
struct RedisStoreStats {
  uint64_t timeouts = 0;            // calls not answered within the timeout
  uint64_t connection_errors = 0;   // connect failures, lost connections, calls made while down
  uint64_t script_errors = 0;       // error replies to the script, unexpected replies
  uint64_t server_errors = 0;       // LOADING, BUSY, OOM, CLUSTERDOWN, NOAUTH... refusals
  uint64_t overloaded = 0;          // calls refused because max_in_flight were waiting
  uint64_t out_of_memory = 0;       // calls Redis refused with OOM (maxmemory, nothing to evict)
  uint64_t script_loads = 0;        // NOSCRIPT answered by sending the script again
  uint64_t moved = 0;               // cluster MOVED redirections followed
  uint64_t ask = 0;                 // cluster ASK redirections followed
  uint64_t tryagain = 0;            // cluster TRYAGAIN retries
  uint64_t slot_splits = 0;         // cluster node calls of several slots resent per slot
  uint64_t reconnects = 0;          // connections (re)established
  uint64_t topology_refreshes = 0;  // slot maps read
  uint64_t expired = 0;       // requests the script skipped: Redis received them past the deadline
  uint64_t late_replies = 0;  // replies to calls that had already timed out (dropped)
  uint64_t late_applied = 0;  // of those, calls Redis applied: charged, though the caller
                              // had the on_failure answer
  uint64_t master_switches = 0;  // sentinel: times the master the store uses moved
  uint64_t deny_cache_hits = 0;  // requests denied by the deny cache, with no Redis call
  uint64_t syncs = 0;            // cached mode: sync calls Redis answered
  uint64_t sync_failures = 0;    // cached mode: sync calls that failed (hits kept, resent)
  uint64_t sync_rounds = 0;      // cached mode: scheduled syncs begun (nothing to send: no call)
};

class RedisStore final : public Store {
 public:
  // Parses the options, loads the TLS files, and starts the internal I/O
  // thread, which connects in the background: a store is returned even when
  // Redis is down (ready() says so). Errors: kInvalidArgument for bad
  // addresses or options, or TLS files that cannot be loaded.
  static Result<std::shared_ptr<RedisStore>> create(RedisStoreOptions options);
  ~RedisStore() override;
  RedisStore(const RedisStore&) = delete;
  RedisStore& operator=(const RedisStore&) = delete;

  // Whether `limit` can be computed exactly by the Redis scripts (see above);
  // the error explains why not. check_limit() for a config not yet served.
  // In cached mode also whether the limit can be decided locally.
  static Status limit_fits(const Limit& limit, RedisMode mode = RedisMode::kExact);
  Status check_limit(const Limit& limit) const override;

  // Binds the calling thread to `io`, which this thread runs: later
  // acquire_async() calls from this thread use a connection driven by `io`.
  // Idempotent for the same io_context.
  void attach(boost::asio::io_context& io);
  // Closes the calling thread's connections; calls in flight complete with
  // kStoreUnavailable. Call on the attached thread, or after its loop stopped.
  void detach();

  Status acquire(std::span<const AcquireRequest> requests, Nanos now,
                 std::span<Decision> out) override;
  void acquire_async(std::span<const AcquireRequest> requests, Nanos now, std::span<Decision> out,
                     Done done) override;

  // Store::refund(), as acquire() and acquire_async() (threads, timeout):
  // one script call per cluster slot of the requests, each request given
  // back on its own. Errors: kInvalidArgument (null limit, cost 0, a limit
  // the scripts cannot count, a time before the epoch), and then nothing is
  // given back; kStoreUnavailable when a call fails, which, as for acquire(),
  // Redis may still have applied if its reply came late.
  Status refund(std::span<const RefundRequest> requests, Nanos now) override;
  void refund_async(std::span<const RefundRequest> requests, Nanos now, Done done) override;

  // True while the internal thread's last health check (TIME of every master,
  // and a write probe) was answered in time, every attached thread's
  // connections to every master are up, Redis accepts writes
  // (writes_refused()), and, in a cluster, the slot map covers every slot;
  // with a sentinel, a master is known. False from create() until then.
  bool ready() const override;

  // Whether Redis refuses writes (it answered OOM: maxmemory reached and
  // nothing to evict): set by any OOM reply, cleared by the next health
  // check whose write probe Redis accepts.
  bool writes_refused() const;

  // The store's connections to Redis nodes (every attached thread's and the
  // internal thread's), and to the sentinels.
  RedisConnectionCounts connections() const;
  RedisConnectionCounts sentinel_connections() const;

  // Sentinel: the master's "host:port" in use ("" until the sentinels named one).
  std::string master() const;

  // DEL of the key's state and lockout (synchronous, through the internal
  // thread); true if either existed.
  Result<bool> reset(const Limit& limit, std::string_view key) override;

  // Keys in the database (DBSIZE, summed over masters; synchronous): this
  // counts every key, so give Sluice a database of its own. 0 if unavailable.
  size_t size() const override;
  // The same count as of the last health check (every health_interval),
  // without waiting; 0 until one has answered.
  size_t observed_size() const override;
  std::string_view backend() const override { return "redis"; }
  // maintain() is Store's, a no-op: the internal thread keeps the store up
  // (health checks, cached mode's syncs), and Redis expires its keys itself.

  // Blocks until ready() or `timeout` passes; returns ready().
  bool wait_ready(std::chrono::milliseconds timeout) const;

  // Blocks until ready(), or until a connect to Redis failed (refused, timed
  // out, a refused TLS handshake or AUTH), no node gave a slot map or no
  // sentinel named the master, after this call began; or until `timeout`
  // passes. A Redis slow to connect is waited for, an unreachable one is not.
  // kInvalidArgument when the sentinels answered that they know no master of
  // that name; otherwise OK, and ready() says whether the store is ready.
  Status wait_connected(std::chrono::milliseconds timeout) const;

  // Cached mode: sends every unsent hit (and fetches the keys not yet
  // fetched) now, in one call, and waits for it. The timer does this every
  // sync_interval; tests call it to sync at a chosen moment. A sync already
  // in flight is waited for first. OK at once in exact mode; the failure's
  // status when the call fails (the hits stay, and are resent).
  Status sync();

  RedisStoreStats stats() const;
  const RedisStoreOptions& options() const;

  // The Redis key holding `key`'s state under `limit`:
  //   <key_prefix>{<16 hex digits>}<limit fingerprint, 16 hex digits>:<key>
  // The hash tag is a hash of the part of `key` after its first '|' (the
  // client key of the server's "<scope>|<client key>" store keys; all of
  // `key` if it has no '|'), so the limits of one request share a cluster slot.
  std::string redis_key(const Limit& limit, std::string_view key) const;

  // The Redis key holding `key`'s lockout under `limit` (a limit with a
  // block): redis_key() with "!b" before the ':', so in the same slot:
  //   <key_prefix>{<16 hex digits>}<limit fingerprint>!b:<key>
  // Its value is when the lockout ends, in microseconds since the epoch.
  std::string redis_lockout_key(const Limit& limit, std::string_view key) const;

  // The Redis key counting `key`'s requests under the fixed_window `limit` in
  // the window of the time `at` (its index: floor(at / window), windows
  // aligned to the epoch): redis_key() with "#<index>" before the ':', so in
  // the same slot. Its value is the count, an integer; it expires 100 ms
  // after its window's end.
  //   <key_prefix>{<16 hex digits>}<limit fingerprint>#<index>:<key>
  std::string redis_window_key(const Limit& limit, std::string_view key, Nanos at) const;

  // The cluster slot (CRC16 of the hash tag, mod 16384) of a Redis key.
  static uint16_t key_slot(std::string_view redis_key);

  class Impl;

 private:
  explicit RedisStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice
