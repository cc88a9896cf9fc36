#include "sluice/redis_store.h"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <charconv>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "store/redis/cached_sync.h"
#include "store/redis/cached_table.h"
#include "store/redis/client.h"
#include "store/redis/deny_cache.h"
#include "store/redis/health.h"
#include "store/redis/script_limit.h"
#include "store/redis/sentinel.h"
#include "store/redis/shared.h"
#include "store/redis/sync_schedule.h"
#include "store/redis/tls.h"

namespace sluice {
namespace {

using redis::Client;
using redis::Shared;

std::atomic<uint64_t> next_store_id{1};

// Which client each thread uses, per store. Store ids are never reused, so an
// entry left behind by a destroyed store never matches again.
struct Binding {
  uint64_t store_id;
  Client* client;
};
thread_local std::vector<Binding> tls_bindings;

Client* bound_client(uint64_t store_id) {
  for (const Binding& b : tls_bindings) {
    if (b.store_id == store_id) return b.client;
  }
  return nullptr;
}

Error invalid(std::string message) {
  return Error{ErrorCode::kInvalidArgument, std::move(message)};
}

// Loads the TLS files into the context every connection uses. `plain_url`:
// an address was written redis://, which must not quietly become TLS (nor
// the other addresses plain).
Status set_up_tls(const RedisTlsOptions& tls, bool plain_url, redis::Shared& shared) {
  if (!tls.enabled) {
    if (!(tls == RedisTlsOptions{}))
      return invalid(
          "redis store: tls settings are given but TLS is off (use rediss:// or tls.enabled)");
    return {};
  }
  if (plain_url) return invalid("redis store: TLS is on, but an address is a plain redis:// URL");
  Result<std::shared_ptr<boost::asio::ssl::context>> ctx = redis::make_tls_context(tls);
  if (!ctx.ok()) return ctx.error();
  shared.tls = std::move(ctx).value();
  return {};
}

// Requests (AcquireRequest, RefundRequest) copied for a call that runs later
// on another thread.
template <class Request>
struct OwnedRequests {
  explicit OwnedRequests(std::span<const Request> requests)
      : keys(requests.size()), list(requests.begin(), requests.end()) {
    for (size_t i = 0; i < requests.size(); ++i) {
      keys[i].assign(requests[i].key);
      list[i].key = keys[i];
    }
  }
  std::vector<std::string> keys;
  std::vector<Request> list;
};

// CLUSTER SLOTS -> slot map. `asked` names the node that answered, for
// entries whose host is empty (a node that does not know its own address).
bool parse_cluster_slots(const redisReply* reply, const std::string& asked, redis::SlotMap* map) {
  if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY) return false;
  std::string asked_host;
  int asked_port = 0;
  redis::split_host_port(asked, &asked_host, &asked_port);
  for (size_t i = 0; i < reply->elements; ++i) {
    const redisReply* range = reply->element[i];
    if (range->type != REDIS_REPLY_ARRAY || range->elements < 3) return false;
    const redisReply* first = range->element[0];
    const redisReply* last = range->element[1];
    const redisReply* master = range->element[2];
    if (first->type != REDIS_REPLY_INTEGER || last->type != REDIS_REPLY_INTEGER ||
        master->type != REDIS_REPLY_ARRAY || master->elements < 2 ||
        master->element[0]->type != REDIS_REPLY_STRING ||
        master->element[1]->type != REDIS_REPLY_INTEGER)
      return false;
    if (first->integer < 0 || last->integer > 16383 || first->integer > last->integer) return false;
    redis::Endpoint ep;
    ep.host.assign(master->element[0]->str, master->element[0]->len);
    if (ep.host.empty() || ep.host == "?") ep.host = asked_host;
    ep.port = static_cast<int>(master->element[1]->integer);
    const int16_t node = static_cast<int16_t>(map->node_index(ep.name()));
    for (long long s = first->integer; s <= last->integer; ++s)
      map->slot_node[static_cast<size_t>(s)] = node;
  }
  return true;
}

}  // namespace

class RedisStore::Impl {
 public:
  explicit Impl(std::shared_ptr<Shared> shared)
      : shared_(std::move(shared)),
        id_(next_store_id.fetch_add(1)),
        work_(boost::asio::make_work_guard(io_)),
        health_timer_(io_),
        refresh_timer_(io_),
        health_(*shared_) {}

  ~Impl() { stop(); }

  void start() {
    shared_->request_refresh = [this] {
      if (refresh_requested_.exchange(true)) return;
      boost::asio::post(io_, [this] { refresh_soon(); });
    };
    thread_ = std::thread([this] { io_.run(); });
    boost::asio::post(io_, [this] {
      internal_ = std::make_unique<Client>(io_, *shared_);
      internal_->on_state_change = [this](const std::string& node, bool up) {
        if (shared_->is_sentinel(node)) return;
        if (up) {
          health_check();  // report ready as soon as a node is back
        } else {
          health_.not_ready();
        }
      };
      internal_->keep_connected();
      if (shared_->sentinel()) {
        sentinel_ = std::make_unique<redis::SentinelWatch>(
            io_, *shared_, *internal_, health_timeout(), [this] { master_changed(); },
            [this](redis::SentinelWatch::Outcome outcome) { sentinel_round(outcome); });
        sentinel_->start();
      }
      if (shared_->options.cluster) refresh_topology();
      health_check();
      schedule_health();
      if (shared_->follows_topology()) schedule_refresh();
      if (sync_schedule_ != nullptr) sync_schedule_->start();
    });
  }

  void stop() {
    if (!thread_.joinable()) return;
    // Graceful: the hits not yet sent leave in one last sync.
    if (cached_sync_ != nullptr) (void)sync();
    boost::asio::post(io_, [this] {
      // Handlers already queued still run: they see stopping_ and re-arm nothing.
      stopping_ = true;
      health_timer_.cancel();
      refresh_timer_.cancel();
      if (sync_schedule_ != nullptr) sync_schedule_->stop();
      sentinel_.reset();
      internal_.reset();
      work_.reset();
    });
    thread_.join();
    shared_->request_refresh = nullptr;
    // Attached clients belong to io_contexts that no longer run (documented).
    std::lock_guard<std::mutex> lock(attached_mutex_);
    attached_.clear();
  }

  // Runs `start(client, finish)` on the internal thread and waits for finish().
  template <class Start>
  Status run_sync(Start&& start) {
    if (std::this_thread::get_id() == thread_.get_id())
      return Error{ErrorCode::kInternal,
                   "a synchronous Redis store call from the store's own I/O thread would deadlock"};
    struct Waiter {
      std::mutex mutex;
      std::condition_variable cv;
      bool finished = false;
      Status status;
    } waiter;
    auto finish = [&waiter](Status status) {
      std::lock_guard<std::mutex> lock(waiter.mutex);
      waiter.status = std::move(status);
      waiter.finished = true;
      waiter.cv.notify_one();
    };
    boost::asio::post(io_, [&] {
      if (internal_ == nullptr) {
        finish(Error{ErrorCode::kStoreUnavailable, "the Redis store is shutting down"});
        return;
      }
      start(*internal_, finish);
    });
    std::unique_lock<std::mutex> lock(waiter.mutex);
    waiter.cv.wait(lock, [&] { return waiter.finished; });
    return std::move(waiter.status);
  }

  // --- attached threads ---

  void attach(boost::asio::io_context& io) {
    if (Client* c = bound_client(id_)) {
      if (&c->io() == &io) return;
      detach();
    }
    auto client = std::make_unique<Client>(io, *shared_);
    // Its connections open now, not at its first call: ready() waits for them.
    client->keep_connected();
    tls_bindings.push_back({id_, client.get()});
    std::lock_guard<std::mutex> lock(attached_mutex_);
    attached_.push_back(std::move(client));
  }

  // Every client's connections to the nodes its calls go to are up.
  bool clients_connected() {
    std::lock_guard<std::mutex> lock(attached_mutex_);
    for (const auto& c : attached_) {
      if (!c->connected()) return false;
    }
    return true;
  }

  // The slot map or the master changed: every attached client connects to
  // the new nodes now, on its own thread, rather than at its next watch.
  void reconnect_clients() {
    std::lock_guard<std::mutex> lock(attached_mutex_);
    for (const auto& c : attached_) {
      boost::asio::post(c->io(), [client = c.get(), alive = c->alive_token()] {
        if (!alive.expired()) client->keep_connected();
      });
    }
  }

  // --- sentinel (internal thread) ---

  void master_changed() {
    internal_->keep_connected();
    reconnect_clients();
    health_check();
  }

  void sentinel_round(redis::SentinelWatch::Outcome outcome) {
    using Outcome = redis::SentinelWatch::Outcome;
    unknown_master_.store(outcome == Outcome::kUnknownMaster, std::memory_order_relaxed);
    if (outcome != Outcome::kMaster) failed_rounds_.fetch_add(1, std::memory_order_relaxed);
  }

  void detach() {
    Client* c = bound_client(id_);
    if (c == nullptr) return;
    std::erase_if(tls_bindings, [&](const Binding& b) { return b.store_id == id_; });
    std::unique_ptr<Client> owned;
    {
      std::lock_guard<std::mutex> lock(attached_mutex_);
      for (auto& p : attached_) {
        if (p.get() == c) owned = std::move(p);
      }
      std::erase(attached_, nullptr);
    }
    owned.reset();  // completes its calls in flight, on this thread
  }

  Client* client_of_this_thread() const { return bound_client(id_); }

  void post_acquire(std::span<const AcquireRequest> requests, Nanos now, std::span<Decision> out,
                    Done done) {
    auto owned = std::make_shared<OwnedRequests<AcquireRequest>>(requests);
    boost::asio::post(io_, [this, owned, now, out, done = std::move(done)]() mutable {
      if (internal_ == nullptr) {
        done(Error{ErrorCode::kStoreUnavailable, "the Redis store is shutting down"});
        return;
      }
      internal_->acquire(owned->list, now, out,
                         [owned, done = std::move(done)](Status s) { done(std::move(s)); });
    });
  }

  void post_refund(std::span<const RefundRequest> requests, Nanos now, Done done) {
    auto owned = std::make_shared<OwnedRequests<RefundRequest>>(requests);
    boost::asio::post(io_, [this, owned, now, done = std::move(done)]() mutable {
      if (internal_ == nullptr) {
        done(Error{ErrorCode::kStoreUnavailable, "the Redis store is shutting down"});
        return;
      }
      internal_->refund(owned->list, now,
                        [owned, done = std::move(done)](Status s) { done(std::move(s)); });
    });
  }

  // --- cached mode's sync (internal thread) ---

  void timed_sync() {
    if (stopping_ || internal_ == nullptr) return;
    cached_sync_->run(*internal_, [](Status) {});
  }

  Status sync() {
    if (cached_sync_ == nullptr) return {};
    return run_sync([this](Client& client, auto finish) { cached_sync_->run(client, finish); });
  }

  // --- health and topology (internal thread) ---

  void schedule_health() {
    health_timer_.expires_after(shared_->options.health_interval);
    health_timer_.async_wait([this](const boost::system::error_code& ec) {
      if (ec || stopping_) return;
      health_check();
      schedule_health();
    });
  }

  std::chrono::milliseconds health_timeout() const {
    return std::max<std::chrono::milliseconds>(shared_->options.timeout,
                                               std::chrono::milliseconds(250));
  }

  // Every master (in a cluster, of a map that covers every slot; with a
  // sentinel, the one it named), in one round (health.h). A cluster without
  // a full map, or a sentinel without a master, is not ready, and asks again.
  void health_check() {
    if (internal_ == nullptr) return;
    std::vector<redis::HealthCheck::Node> nodes;
    if (shared_->options.cluster) {
      auto map = shared_->topology.snapshot();
      if (map != nullptr && map->covers_all()) {
        // Each master once, with the first slot it serves.
        std::vector<int> first_slot(map->nodes.size(), -1);
        for (size_t slot = 0; slot < map->slot_node.size(); ++slot) {
          int& first = first_slot[static_cast<size_t>(map->slot_node[slot])];
          if (first < 0) first = static_cast<int>(slot);
        }
        for (size_t i = 0; i < first_slot.size(); ++i) {
          if (first_slot[i] >= 0) nodes.push_back({map->nodes[i], first_slot[i]});
        }
      }
    } else if (shared_->sentinel()) {
      if (std::string master = shared_->master.get(); !master.empty())
        nodes.push_back({std::move(master), -1});
    } else {
      nodes.push_back({shared_->seeds.front().name(), -1});
    }
    if (nodes.empty()) {
      health_.not_ready();
      if (shared_->request_refresh) shared_->request_refresh();
      return;
    }
    health_.run(*internal_, nodes, health_timeout());
  }

  void schedule_refresh() {
    refresh_timer_.expires_after(shared_->options.topology_refresh);
    refresh_timer_.async_wait([this](const boost::system::error_code& ec) {
      if (ec || stopping_) return;
      refresh_topology();
      schedule_refresh();
    });
  }

  // Debounced: at most one refresh per 100 ms however many MOVEDs arrive.
  void refresh_soon() {
    const auto now = std::chrono::steady_clock::now();
    const auto due = last_refresh_ + std::chrono::milliseconds(100);
    if (now >= due) {
      refresh_requested_.store(false);
      refresh_topology();
      return;
    }
    auto timer = std::make_shared<boost::asio::steady_timer>(io_, due);
    timer->async_wait([this, timer](const boost::system::error_code& ec) {
      if (ec || stopping_) return;
      refresh_requested_.store(false);
      refresh_topology();
    });
  }

  // Asks the known masters, then the seeds, in turn, until one answers;
  // with a sentinel, asks the sentinels.
  void refresh_topology() {
    if (sentinel_ != nullptr) {
      last_refresh_ = std::chrono::steady_clock::now();
      sentinel_->ask();
      return;
    }
    if (internal_ == nullptr || refreshing_) return;
    refreshing_ = true;
    last_refresh_ = std::chrono::steady_clock::now();
    auto candidates = std::make_shared<std::vector<std::string>>();
    if (auto map = shared_->topology.snapshot()) *candidates = map->nodes;
    for (const redis::Endpoint& seed : shared_->seeds) candidates->push_back(seed.name());
    ask_slots(candidates, 0);
  }

  void ask_slots(std::shared_ptr<std::vector<std::string>> candidates, size_t i) {
    if (internal_ == nullptr) return;
    if (i >= candidates->size()) {
      refreshing_ = false;
      failed_rounds_.fetch_add(1, std::memory_order_relaxed);
      shared_->log.log(redis::ErrorKind::kConnection,
                       "cannot read the cluster slot map from any node");
      return;
    }
    const std::string node = (*candidates)[i];
    internal_->command(
        redis::command({"CLUSTER", "SLOTS"}), node, -1, health_timeout(),
        [this, candidates, i, node](Status s, const redisReply* reply) {
          auto map = std::make_shared<redis::SlotMap>();
          if (s.ok() && parse_cluster_slots(reply, node, map.get()) && !map->nodes.empty()) {
            // Counted after publishing: tests wait for the count, then expect
            // the map in use.
            shared_->topology.publish(std::move(map));
            redis::Counters::add(shared_->counters.topology_refreshes);
            refreshing_ = false;
            reconnect_clients();
            return;
          }
          ask_slots(candidates, i + 1);
        });
  }

  std::shared_ptr<Shared> shared_;
  const uint64_t id_;
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::thread thread_;
  std::unique_ptr<Client> internal_;  // lives on the internal thread
  boost::asio::steady_timer health_timer_;
  boost::asio::steady_timer refresh_timer_;
  redis::HealthCheck health_;
  std::unique_ptr<redis::SentinelWatch> sentinel_;  // with a sentinel; internal thread
  // Slot map reads and sentinel rounds that found no node to answer (the
  // health check counts its own), for wait_connected().
  std::atomic<uint64_t> failed_rounds_{0};
  // The last sentinel round: they answered, but know no master of that name.
  std::atomic<bool> unknown_master_{false};
  std::atomic<bool> refresh_requested_{false};
  bool stopping_ = false;  // internal thread only
  bool refreshing_ = false;
  std::chrono::steady_clock::time_point last_refresh_{};
  std::mutex attached_mutex_;
  std::vector<std::unique_ptr<Client>> attached_;
  std::unique_ptr<redis::DenyCache> deny_cache_;  // null with options.deny_cache off
  // Cached mode's local states and their sync; null in exact mode.
  std::unique_ptr<redis::CachedTable> cached_;
  std::unique_ptr<redis::CachedSync> cached_sync_;
  std::unique_ptr<redis::SyncSchedule> sync_schedule_;  // on the internal thread
};

Result<std::shared_ptr<RedisStore>> RedisStore::create(RedisStoreOptions options) {
  const bool sentinel = !options.sentinel.master.empty();
  if (sentinel) {
    if (options.cluster)
      return invalid(
          "redis store: a sentinel and a cluster cannot go together (a Redis Cluster "
          "fails over by itself)");
    if (!options.addresses.empty())
      return invalid(
          "redis store: with a sentinel, leave addresses empty: the sentinels name "
          "the master");
    if (options.sentinel.addresses.empty())
      return invalid("redis store: the sentinel needs at least one address");
  } else {
    if (options.addresses.empty()) return invalid("redis store: at least one address is needed");
    if (!options.sentinel.addresses.empty())
      return invalid("redis store: sentinel addresses are given without the master's name");
  }
  if (options.timeout.count() <= 0) return invalid("redis store: timeout must be greater than 0");
  if (options.max_in_flight == 0) return invalid("redis store: max_in_flight must be at least 1");
  if (options.max_batch == 0) return invalid("redis store: max_batch must be at least 1");
  if (options.max_hold.count() < 0) return invalid("redis store: max_hold must be 0 or more");
  if (options.database < 0) return invalid("redis store: database must be 0 or more");
  if (options.key_prefix.find_first_of("{}") != std::string::npos)
    return invalid("redis store: key_prefix must not contain '{' or '}' (hash tag characters)");
  if (options.reconnect_min.count() <= 0 || options.reconnect_max < options.reconnect_min)
    return invalid("redis store: need 0 < reconnect_min <= reconnect_max");
  if (options.ttl_extra.count() < 0) return invalid("redis store: ttl_extra must be 0 or more");
  if (options.health_interval.count() <= 0 || options.topology_refresh.count() <= 0 ||
      options.connect_timeout.count() <= 0 || options.stall_timeout.count() <= 0 ||
      options.sync_interval.count() <= 0)
    return invalid("redis store: intervals and timeouts must be greater than 0");
  if (options.mode == RedisMode::kCached && options.cached_keys == 0)
    return invalid("redis store: cached_keys must be at least 1");

  auto shared = std::make_shared<Shared>();
  bool plain_url = false;
  for (const std::string& address : options.addresses) {
    Result<redis::Endpoint> ep = redis::parse_address(address);
    if (!ep.ok()) return ep.error();
    redis::Endpoint e = std::move(ep).value();
    if (e.tls) options.tls.enabled = true;
    if (!e.tls && address.find("://") != std::string::npos) plain_url = true;
    if (!e.has_credentials) {
      e.username = options.username;
      e.password = options.password;
    }
    if (e.database < 0) e.database = options.database;
    if (options.cluster && e.database != 0)
      return invalid("redis store: a Redis Cluster has only database 0 (got " +
                     std::to_string(e.database) + " for " + address + ")");
    shared->seeds.push_back(std::move(e));
  }
  for (const std::string& address : options.sentinel.addresses) {
    Result<redis::Endpoint> ep = redis::parse_address(address);
    if (!ep.ok()) return ep.error();
    redis::Endpoint e = std::move(ep).value();
    if (e.database >= 0)
      return invalid("redis store: a sentinel has no database (" + address + ")");
    if (e.tls) options.tls.enabled = true;
    if (!e.tls && address.find("://") != std::string::npos) plain_url = true;
    if (!e.has_credentials) {
      e.username = options.sentinel.username;
      e.password = options.sentinel.password;
    }
    e.sentinel = true;
    shared->sentinels.push_back(std::move(e));
  }
  if (sentinel) {
    // The master's settings; the sentinels say where it is.
    shared->node_defaults.username = options.username;
    shared->node_defaults.password = options.password;
    shared->node_defaults.database = options.database;
  } else {
    shared->node_defaults = shared->seeds.front();
  }
  if (Status tls = set_up_tls(options.tls, plain_url, *shared); !tls.ok()) return tls.error();
  shared->options = std::move(options);
  auto impl = std::make_unique<Impl>(shared);
  if (shared->options.mode == RedisMode::kCached) {
    impl->cached_ = std::make_unique<redis::CachedTable>(shared->options.cached_keys);
    impl->cached_sync_ = std::make_unique<redis::CachedSync>(*impl->cached_, *shared);
    Impl* raw = impl.get();
    impl->sync_schedule_ = std::make_unique<redis::SyncSchedule>(
        impl->io_, shared->options.sync_interval, shared->options.early_fetch,
        [raw] { raw->timed_sync(); });
  } else if (shared->options.deny_cache) {
    impl->deny_cache_ = std::make_unique<redis::DenyCache>(
        shared->options.deny_cache_entries, shared->options.time_source == RedisTimeSource::kLocal);
  }
  impl->start();
  return std::shared_ptr<RedisStore>(new RedisStore(std::move(impl)));
}

RedisStore::RedisStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

RedisStore::~RedisStore() = default;

Status RedisStore::limit_fits(const Limit& limit, RedisMode mode) {
  Result<redis::ScriptLimit> r = redis::script_limit(limit);
  if (!r.ok()) return r.error();
  if (mode == RedisMode::kCached) return redis::CachedTable::limit_fits(limit);
  return {};
}

Status RedisStore::check_limit(const Limit& limit) const {
  return limit_fits(limit, options().mode);
}

Status RedisStore::sync() {
  return impl_->sync();
}

void RedisStore::attach(boost::asio::io_context& io) {
  impl_->attach(io);
}

void RedisStore::detach() {
  impl_->detach();
}

Status RedisStore::acquire(std::span<const AcquireRequest> requests, Nanos now,
                           std::span<Decision> out) {
  bool fetch_soon = false;
  if (redis::CachedTable* cached = impl_->cached_.get()) {
    // A key not fetched yet is decided by Redis (below); the next sync fetches it.
    auto local = cached->decide(requests, options().key_prefix, now, out, &fetch_soon);
    if (!local.ok()) return local.error();
    if (local.value() == redis::CachedTable::Outcome::kDecided) return {};
  }
  redis::DenyCache* cache = impl_->deny_cache_.get();
  redis::DenyCall call;
  if (cache != nullptr && cache->answer(requests, now, options().cluster, out, &call)) return {};
  Status s = impl_->run_sync(
      [&](Client& client, auto finish) { client.acquire(requests, now, out, std::move(finish)); });
  if (cache != nullptr && s.ok()) cache->record(call, out);
  // Keys asked for again are fetched once Redis has answered: a fetch sent
  // ahead of this call would miss its charge.
  if (fetch_soon) impl_->sync_schedule_->fetch_soon();
  return s;
}

void RedisStore::acquire_async(std::span<const AcquireRequest> requests, Nanos now,
                               std::span<Decision> out, Done done) {
  if (redis::CachedTable* cached = impl_->cached_.get()) {
    bool fetch_soon = false;
    auto local = cached->decide(requests, options().key_prefix, now, out, &fetch_soon);
    if (!local.ok() || local.value() == redis::CachedTable::Outcome::kDecided) {
      done(local.ok() ? Status() : Status(local.error()));
      return;
    }
    if (fetch_soon) {
      // As in acquire(): fetched once Redis has answered.
      done = [schedule = impl_->sync_schedule_.get(), done = std::move(done)](Status s) {
        schedule->fetch_soon();
        done(std::move(s));
      };
    }
  }
  if (redis::DenyCache* cache = impl_->deny_cache_.get()) {
    redis::DenyCall call;
    if (cache->answer(requests, now, options().cluster, out, &call)) {
      done(Status());
      return;
    }
    done = [cache, call = std::move(call), out, done = std::move(done)](Status s) {
      if (s.ok()) cache->record(call, out);
      done(std::move(s));
    };
  }
  if (Client* client = impl_->client_of_this_thread()) {
    client->acquire(requests, now, out, std::move(done));
    return;
  }
  impl_->post_acquire(requests, now, out, std::move(done));
}

namespace {

// A refund makes a key's state fuller: a denial remembered for it may no
// longer hold. Forgotten before the call (denials in flight are then not
// recorded) and after it (a denial Redis gave while the refund travelled).
void forget_denials(redis::DenyCache* cache, std::span<const RefundRequest> requests) {
  if (cache == nullptr) return;
  for (const RefundRequest& r : requests) {
    if (r.limit != nullptr) cache->forget(*r.limit, r.key);
  }
}

}  // namespace

Status RedisStore::refund(std::span<const RefundRequest> requests, Nanos now) {
  redis::DenyCache* cache = impl_->deny_cache_.get();
  forget_denials(cache, requests);
  Status s = impl_->run_sync(
      [&](Client& client, auto finish) { client.refund(requests, now, std::move(finish)); });
  forget_denials(cache, requests);
  return s;
}

void RedisStore::refund_async(std::span<const RefundRequest> requests, Nanos now, Done done) {
  if (redis::DenyCache* cache = impl_->deny_cache_.get()) {
    forget_denials(cache, requests);
    auto owned = std::make_shared<OwnedRequests<RefundRequest>>(requests);
    done = [cache, owned, done = std::move(done)](Status s) {
      forget_denials(cache, owned->list);
      done(std::move(s));
    };
  }
  if (Client* client = impl_->client_of_this_thread()) {
    client->refund(requests, now, std::move(done));
    return;
  }
  impl_->post_refund(requests, now, std::move(done));
}

bool RedisStore::ready() const {
  return impl_->health_.ready() && !writes_refused() && impl_->clients_connected();
}

bool RedisStore::writes_refused() const {
  return impl_->shared_->writes_refused.load(std::memory_order_relaxed);
}

namespace {

RedisConnectionCounts counts_of(const redis::ConnectionGauge& gauge) {
  return {gauge.up.load(std::memory_order_relaxed), gauge.down.load(std::memory_order_relaxed)};
}

}  // namespace

RedisConnectionCounts RedisStore::connections() const {
  return counts_of(impl_->shared_->connections);
}

RedisConnectionCounts RedisStore::sentinel_connections() const {
  return counts_of(impl_->shared_->sentinel_connections);
}

std::string RedisStore::master() const {
  return impl_->shared_->master.get();
}

Status RedisStore::wait_connected(std::chrono::milliseconds timeout) const {
  // A connect or handshake that failed, a slot map no node gave, sentinels
  // that named no master. Not a health check that timed out: a node slow to
  // connect (a TLS handshake far away) is waited for.
  const auto failed = [this] {
    return impl_->shared_->counters.connection_errors.load(std::memory_order_relaxed) +
           impl_->failed_rounds_.load(std::memory_order_relaxed);
  };
  const uint64_t failed_before = failed();
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (!ready() && failed() == failed_before && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (impl_->unknown_master_.load(std::memory_order_relaxed)) {
    const RedisSentinelOptions& s = options().sentinel;
    std::string list;
    for (const std::string& a : s.addresses) list += (list.empty() ? "" : ", ") + a;
    return invalid("redis store: the sentinels (" + list + ") know no master named '" + s.master +
                   "'");
  }
  return {};
}

bool RedisStore::wait_ready(std::chrono::milliseconds timeout) const {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (!ready()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

Result<bool> RedisStore::reset(const Limit& limit, std::string_view key) {
  const std::string redis_key = this->redis_key(limit, key);
  // The lockout goes with the state (same slot: one DEL): a reset key starts
  // afresh. The state key itself holds no fixed window any more (its counters
  // do), but may from a version before them.
  const std::string lockout_key = redis::lockout_key(redis_key, impl_->shared_->options.key_prefix);
  std::vector<std::string> del{"DEL", redis_key, lockout_key};
  if (limit.algorithm() == Algorithm::kFixedWindow) {
    // A fixed window's counters are per window: those of the windows around
    // the latest time a request of this store was taken at, and around this
    // process's clock (another instance's), go. An older window is read by
    // no request again; its key expires at its end.
    const auto window_us = static_cast<uint64_t>(limit.spec().window.count() / 1'000);
    const int64_t latest = impl_->shared_->window_time_us.load(std::memory_order_relaxed);
    const int64_t clock = std::chrono::duration_cast<std::chrono::microseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
    std::vector<int64_t> windows;
    // The latest time is raised a millisecond at a time (Client::note_window_time).
    for (const int64_t t : {latest, latest + 1'000, clock}) {
      const int64_t index = redis::window_index(t, window_us);
      for (const int64_t i : {index - 1, index, index + 1}) {
        if (i >= 0 && std::find(windows.begin(), windows.end(), i) == windows.end())
          windows.push_back(i);
      }
    }
    const std::string_view prefix = impl_->shared_->options.key_prefix;
    for (const int64_t i : windows) del.push_back(redis::window_key(redis_key, prefix, i));
  }
  const int slot = impl_->shared_->options.cluster ? key_slot(redis_key) : -1;
  const auto timeout = impl_->health_timeout();
  if (impl_->deny_cache_ != nullptr) impl_->deny_cache_->forget(limit, key);
  if (impl_->cached_ != nullptr) impl_->cached_->forget(redis_key);
  bool existed = false;
  Status s = impl_->run_sync([&](Client& client, auto finish) {
    if (impl_->cached_sync_ != nullptr) impl_->cached_sync_->forget(redis_key);
    client.command(redis::command(del), std::string(), slot, timeout,
                   [&existed, finish](Status status, const redisReply* reply) {
                     if (status.ok() && reply != nullptr && reply->type == REDIS_REPLY_INTEGER)
                       existed = reply->integer > 0;
                     finish(std::move(status));
                   });
  });
  if (!s.ok()) return s.error();
  return existed;
}

size_t RedisStore::size() const {
  std::vector<std::string> nodes;
  if (impl_->shared_->options.cluster) {
    if (auto map = impl_->shared_->topology.snapshot()) nodes = map->nodes;
  } else if (impl_->shared_->sentinel()) {
    if (std::string master = impl_->shared_->master.get(); !master.empty())
      nodes.push_back(std::move(master));
  } else {
    nodes.push_back(impl_->shared_->seeds.front().name());
  }
  const auto timeout = impl_->health_timeout();
  size_t total = 0;
  for (const std::string& node : nodes) {
    Status s = impl_->run_sync([&](Client& client, auto finish) {
      client.command(redis::command({"DBSIZE"}), node, -1, timeout,
                     [&total, finish](Status status, const redisReply* reply) {
                       if (status.ok() && reply != nullptr && reply->type == REDIS_REPLY_INTEGER)
                         total += static_cast<size_t>(reply->integer);
                       finish(std::move(status));
                     });
    });
    (void)s;
  }
  return total;
}

size_t RedisStore::observed_size() const {
  return impl_->health_.observed_keys();
}

RedisStoreStats RedisStore::stats() const {
  const redis::Counters& c = impl_->shared_->counters;
  const auto get = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  RedisStoreStats s;
  s.timeouts = get(c.timeouts);
  s.connection_errors = get(c.connection_errors);
  s.script_errors = get(c.script_errors);
  s.server_errors = get(c.server_errors);
  s.overloaded = get(c.overloaded);
  s.out_of_memory = get(c.out_of_memory);
  s.script_loads = get(c.script_loads);
  s.moved = get(c.moved);
  s.ask = get(c.ask);
  s.tryagain = get(c.tryagain);
  s.slot_splits = get(c.slot_splits);
  s.reconnects = get(c.reconnects);
  s.topology_refreshes = get(c.topology_refreshes);
  s.expired = get(c.expired);
  s.late_replies = get(c.late_replies);
  s.late_applied = get(c.late_applied);
  s.master_switches = get(c.master_switches);
  if (impl_->deny_cache_ != nullptr) s.deny_cache_hits = impl_->deny_cache_->hits();
  if (impl_->cached_sync_ != nullptr) {
    s.syncs = impl_->cached_sync_->syncs();
    s.sync_failures = impl_->cached_sync_->failures();
    s.sync_rounds = impl_->sync_schedule_->rounds();
  }
  return s;
}

const RedisStoreOptions& RedisStore::options() const {
  return impl_->shared_->options;
}

std::string RedisStore::redis_key(const Limit& limit, std::string_view key) const {
  return redis::state_key(impl_->shared_->options.key_prefix, limit, key);
}

std::string RedisStore::redis_lockout_key(const Limit& limit, std::string_view key) const {
  return redis::lockout_key(redis_key(limit, key), impl_->shared_->options.key_prefix);
}

std::string RedisStore::redis_window_key(const Limit& limit, std::string_view key, Nanos at) const {
  const auto window_us = static_cast<uint64_t>(limit.spec().window.count() / 1'000);
  return redis::window_key(redis_key(limit, key), impl_->shared_->options.key_prefix,
                           redis::window_index(at.count() / 1'000, window_us));
}

uint16_t RedisStore::key_slot(std::string_view redis_key) {
  return redis::key_slot(redis_key);
}

}  // namespace sluice
