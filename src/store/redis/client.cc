#include "store/redis/client.h"

#include <algorithm>
#include <boost/asio/post.hpp>

#include "core/sliding_log.h"
#include "core/step.h"
#include "store/redis/clock_offset.h"
#include "store/redis/packed.h"
#include "store/redis/script_limit.h"
#include "store/redis/script_reply.h"
#include "store/redis/scripts.h"

namespace sluice::redis {
namespace {

constexpr int kMaxRedirects = 5;
constexpr std::chrono::milliseconds kTryAgainDelay{2};
constexpr std::string_view kAsking = "*1\r\n$6\r\nASKING\r\n";

Error unavailable(std::string message) {
  return Error{ErrorCode::kStoreUnavailable, std::move(message)};
}

Error invalid(std::string message) {
  return Error{ErrorCode::kInvalidArgument, std::move(message)};
}

// What a call (and the batch that carries it) sends: entry.lua, the fast
// path's fast_fixed_window.lua, or a command of its own (never batched).
enum class CallKind { kScript, kFastScript, kCommand };

}  // namespace

struct Client::Call {
  CallKind kind = CallKind::kScript;
  // kScript: an acquire or a refund (one request of entry.lua)
  bool is_refund = false;
  std::span<Decision> out;  // acquire
  Store::Done done;
  std::string keys;  // RESP bulks of its keys: state keys, and acquire's lockout keys
  size_t key_count = 0;
  int64_t now_us = 0;  // its time, sent with time_source local
  // The time its fixed windows are taken at (us): now_us, or with
  // time_source redis this process's reading of the node's clock.
  int64_t window_now_us = 0;
  // Its limits; send() names each distinct one once per batch (entry.lua).
  std::vector<LimitRef> limits;
  // command
  CommandDone command_done;
  std::string frame;
  std::string node;  // fixed target, if any
  int slot = -1;
  std::chrono::steady_clock::time_point deadline;
  int refs = 0;  // the timeout queue, the batch holding it
  bool completed = false;
};

struct Client::Batch {
  std::vector<Call*> calls;
  Connection* connection = nullptr;   // where it goes (or went)
  Connection* waiting_on = nullptr;   // whose calls_waiting_ counts its calls
  CallKind kind = CallKind::kScript;  // of all its calls
  bool use_eval = false;              // after NOSCRIPT: send the script itself
  bool asking = false;                // after ASK: ASKING first
  bool held = false;                  // kept open by a flush for a call in flight (flush())
  int redirects = 0;
  int refs = 0;                                   // open or in flight, a pending retry
  std::chrono::steady_clock::time_point sent_at;  // of the last send, for the clock offset
  std::unique_ptr<boost::asio::steady_timer> retry_timer;
};

// The slot of a batch's calls, its first call's when they are of several
// (send() sorts them by slot).
int Client::slot_of(const Batch* b) {
  return b->calls.front()->slot;
}

bool Client::several_slots(const Batch* b) {
  return b->calls.front()->slot != b->calls.back()->slot;
}

Client::Client(boost::asio::io_context& io, Shared& shared)
    : io_(io), shared_(shared), acquire_queue_(io), command_queue_(io) {
  for (const Endpoint& seed : shared_.seeds) seed_names_.push_back(seed.name());
}

Client::~Client() {
  closing_ = true;
  alive_.reset();
  acquire_queue_.timer.cancel();
  command_queue_.timer.cancel();
  if (watch_timer_) watch_timer_->cancel();
  for (TimeoutQueue* q : {&acquire_queue_, &command_queue_}) {
    for (Call* c : q->calls) {
      if (!c->completed) complete(c, unavailable("the Redis store is shutting down"));
    }
  }
  for (Batch* b : open_) {
    for (Call* c : b->calls) {
      if (!c->completed) complete(c, unavailable("the Redis store is shutting down"));
    }
  }
  for (auto& b : batch_pool_) {
    if (b->retry_timer) b->retry_timer->cancel();
  }
  // Runs the callbacks of commands in flight with a NULL reply.
  connections_.clear();
  // The pools free every call and batch, wherever they were.
}

Client::Call* Client::new_call() {
  Call* c;
  if (!free_calls_.empty()) {
    c = free_calls_.back();
    free_calls_.pop_back();
  } else {
    call_pool_.push_back(std::make_unique<Call>());
    c = call_pool_.back().get();
  }
  c->kind = CallKind::kScript;
  c->is_refund = false;
  c->key_count = 0;
  c->keys.clear();
  c->limits.clear();
  c->frame.clear();
  c->node.clear();
  c->slot = -1;
  c->refs = 0;
  c->completed = false;
  return c;
}

void Client::unref(Call* c) {
  if (--c->refs > 0) return;
  c->done = nullptr;
  c->command_done = nullptr;
  c->out = {};
  if (!closing_) free_calls_.push_back(c);
}

Client::Batch* Client::new_batch() {
  Batch* b;
  if (!free_batches_.empty()) {
    b = free_batches_.back();
    free_batches_.pop_back();
  } else {
    batch_pool_.push_back(std::make_unique<Batch>());
    b = batch_pool_.back().get();
  }
  b->calls.clear();
  b->connection = nullptr;
  b->waiting_on = nullptr;
  b->kind = CallKind::kScript;
  b->use_eval = false;
  b->asking = false;
  b->held = false;
  b->redirects = 0;
  b->refs = 0;
  return b;
}

void Client::unref(Batch* b) {
  if (--b->refs > 0) return;
  release_calls(b);
  if (!closing_) free_batches_.push_back(b);
}

void Client::release_calls(Batch* b) {
  if (b->waiting_on != nullptr) {
    calls_waiting_[b->waiting_on] -= b->calls.size();
    b->waiting_on = nullptr;
  }
  for (Call* c : b->calls) unref(c);
  b->calls.clear();
}

void Client::enqueue(TimeoutQueue& q, Call* c) {
  ++c->refs;
  q.calls.push_back(c);
  arm(q);
}

void Client::arm(TimeoutQueue& q) {
  if (q.armed || q.calls.empty() || closing_) return;
  q.armed = true;
  q.timer.expires_at(q.calls.front()->deadline);
  q.timer.async_wait(
      [this, &q, alive = std::weak_ptr<bool>(alive_)](const boost::system::error_code& ec) {
        if (ec || alive.expired()) return;  // the client is going away
        q.armed = false;
        on_timer(q);
      });
}

void Client::on_timer(TimeoutQueue& q) {
  const auto now = std::chrono::steady_clock::now();
  while (!q.calls.empty()) {
    Call* c = q.calls.front();
    if (!c->completed) {
      if (c->deadline > now) break;
      if (c->kind == CallKind::kCommand) {
        complete(c, unavailable("no reply from Redis in time"));
      } else {
        // A node that stopped answering without closing its connections
        // (host down, partition): it may have been replaced, as above.
        request_refresh();
        fail(c, ErrorKind::kTimeout,
             "no reply from Redis within " + std::to_string(shared_.options.timeout.count()) +
                 " ms");
      }
    }
    q.calls.pop_front();
    unref(c);
  }
  for (auto& [name, conn] : connections_) conn->check_stall(now);
  arm(q);
}

void Client::request_refresh() const {
  if (shared_.follows_topology() && shared_.request_refresh) shared_.request_refresh();
}

Connection& Client::connection(const std::string& node) {
  auto it = connections_.find(node);
  if (it != connections_.end()) return *it->second;
  // A seed or a sentinel keeps its own settings (a URL's credentials and database).
  auto conn = std::make_unique<Connection>(io_, shared_.endpoint_for(node), shared_, *this);
  Connection& ref = *conn;
  connections_.emplace(node, std::move(conn));
  return ref;
}

void Client::sync_map() {
  const uint64_t v = shared_.topology.version();
  if (v != map_version_) {
    map_ = shared_.topology.snapshot();
    map_version_ = v;
  }
}

void Client::patch_map(int slot, std::string_view node) {
  auto map = map_ ? std::make_shared<SlotMap>(*map_) : std::make_shared<SlotMap>();
  map->slot_node[static_cast<size_t>(slot)] = static_cast<int16_t>(map->node_index(node));
  map_ = std::move(map);
}

bool Client::sync_master() {
  const uint64_t v = shared_.master.version();
  if (v != master_version_) {
    master_version_ = v;
    master_ = shared_.master.get();
  }
  return !master_.empty();
}

Connection* Client::route(int slot, const std::string& node) {
  if (!node.empty()) return &connection(node);
  if (shared_.options.cluster) {
    if (slot >= 0) {
      sync_map();
      if (map_ != nullptr) {
        const int16_t n = map_->slot_node[static_cast<size_t>(slot)];
        if (n >= 0) return &connection(map_->nodes[static_cast<size_t>(n)]);
      }
    }
    // No map yet (or the slot is not served): try a seed; MOVED corrects it.
    return &connection(seed_names_[next_seed_++ % seed_names_.size()]);
  }
  if (shared_.sentinel()) return sync_master() ? &connection(master_) : nullptr;
  return &connection(seed_names_.front());
}

void Client::list_targets() {
  targets_.clear();
  if (shared_.options.cluster) {
    sync_map();
    if (map_ == nullptr) return;
    std::vector<bool> serves(map_->nodes.size(), false);
    for (const int16_t n : map_->slot_node) {
      if (n >= 0) serves[static_cast<size_t>(n)] = true;
    }
    for (size_t i = 0; i < serves.size(); ++i) {
      if (serves[i]) targets_.push_back(map_->nodes[i]);
    }
  } else if (shared_.sentinel()) {
    if (sync_master()) targets_.push_back(master_);
  } else {
    targets_.push_back(seed_names_.front());
  }
}

void Client::keep_connected() {
  if (closing_) return;
  list_targets();
  bool all_up = !targets_.empty();
  for (const std::string& node : targets_) {
    Connection& conn = connection(node);
    conn.ensure_connecting();
    all_up = all_up && conn.up();
  }
  if (shared_.sentinel()) {
    // A node that was the master: its connection closes once nothing waits
    // on it (it may come back as a replica, answering READONLY). Shut after
    // the loop: shutting may call back into this client.
    std::vector<Connection*> old;
    for (auto& [name, conn] : connections_) {
      if (conn->to_sentinel() || name == master_ || conn->in_flight() > 0) continue;
      const bool batch_open = std::any_of(
          open_.begin(), open_.end(), [&](const Batch* b) { return b->connection == conn.get(); });
      if (!batch_open) old.push_back(conn.get());
    }
    for (Connection* conn : old) conn->shut();
  }
  connected_.store(all_up, std::memory_order_relaxed);
  if (!watch_timer_) {
    watch_timer_ = std::make_unique<boost::asio::steady_timer>(io_);
    arm_watch();
  }
}

void Client::arm_watch() {
  watch_timer_->expires_after(shared_.options.health_interval);
  watch_timer_->async_wait(
      [this, alive = std::weak_ptr<bool>(alive_)](const boost::system::error_code& ec) {
        if (ec || alive.expired()) return;
        keep_connected();
        arm_watch();
      });
}

// The script's `now` for a call, in microseconds (sent with time_source
// local; otherwise the script reads Redis TIME).
void Client::set_now(Call* c, Nanos now) const {
  c->now_us = now.count() / 1'000;
  c->window_now_us = c->now_us;
}

// Where a fixed window's counter is (window_key()) depends on the time, so
// the client names it, from the time it sends with the request. With
// time_source redis that is the node's clock as this process reads it: the
// lower bound of its offset (clock_offset.h), early by at most the fastest
// round trip seen; before any reply from the node, this process's clock.
// Each window's count is exact either way; the reading only decides which
// window a request at the edge of two falls in. (The caller's `now` is not
// read with time_source redis: embedders may pass anything.)
int64_t Client::window_now_us(const Call* c, int slot) {
  if (shared_.options.time_source == RedisTimeSource::kLocal) return c->now_us;
  const int64_t steady = ClockOffset::floor_us(std::chrono::steady_clock::now());
  Connection* node = route(slot, std::string());
  const int64_t offset = node != nullptr ? node->clock().bound_at(steady) : ClockOffset::kNone;
  if (offset != ClockOffset::kNone) return steady + offset;
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void Client::note_window_time(int64_t us) {
  if (us < noted_window_us_ + 1'000) return;
  noted_window_us_ = us;
  int64_t seen = shared_.window_time_us.load(std::memory_order_relaxed);
  while (us > seen &&
         !shared_.window_time_us.compare_exchange_weak(seen, us, std::memory_order_relaxed)) {
  }
}

// One limit of a call: its keys, and what send() will say of it (entry.lua).
// A fixed window's key is its counter for the window of `window_at_us`.
void Client::append_limit(Call* c, const ScriptLimit& limit, const std::string& state,
                          bool with_lockout, uint64_t cost, int64_t charged_at_us,
                          int64_t window_at_us) {
  const bool window = limit.algorithm == algorithm_name(Algorithm::kFixedWindow);
  if (window) {
    append_window_key_bulk(c->keys, state, shared_.options.key_prefix,
                           window_index(window_at_us, limit.p2));
  } else {
    append_bulk(c->keys, state);
  }
  ++c->key_count;
  if (with_lockout) {
    append_bulk(c->keys, lockout_key(state, shared_.options.key_prefix));
    ++c->key_count;
  }
  c->limits.push_back(LimitRef{limit, cost, charged_at_us, window});
}

// Sends a call whose keys and arguments are written.
void Client::start(Call* c, Store::Done done, int slot) {
  c->done = std::move(done);
  c->slot = slot;
  c->deadline = std::chrono::steady_clock::now() + shared_.options.timeout;
  enqueue(acquire_queue_, c);
  submit(c);
}

void Client::acquire(std::span<const AcquireRequest> requests, Nanos now, std::span<Decision> out,
                     Store::Done done) {
  if (closing_) {
    done(unavailable("the Redis store is shutting down"));
    return;
  }
  const size_t n = requests.size();
  if (out.size() != n) {
    done(invalid("acquire: one output decision per request needed"));
    return;
  }
  if (n == 0) {
    done(Status());
    return;
  }
  if (shared_.options.time_source == RedisTimeSource::kLocal && now.count() < 0) {
    done(invalid("acquire: the Redis store needs a time at or after the epoch"));
    return;
  }

  Call* c = new_call();
  const auto reject = [&](Status status) {
    ++c->refs;
    unref(c);  // back to the pool: nothing was sent
    done(std::move(status));
  };
  if (keys_.size() < n) keys_.resize(n);
  int slot = -1;
  set_now(c, now);
  bool window_read = false;
  for (size_t i = 0; i < n; ++i) {
    const AcquireRequest& r = requests[i];
    if (r.limit == nullptr) return reject(invalid("acquire: null limit"));
    if (Status s = core::check_cost(*r.limit, r.cost); !s.ok()) return reject(std::move(s));
    // The scripts keep no queueing debt (yet): refused rather than ignored,
    // which would let a queued request through at once.
    if (r.max_wait.count() != 0)
      return reject(invalid("acquire: the redis store does not queue requests (max_wait)"));
    Result<ScriptLimit> sl = script_limit(*r.limit);
    if (!sl.ok()) return reject(sl.error());
    keys_[i] = state_key(shared_.options.key_prefix, *r.limit, r.key);
    for (size_t j = 0; j < i; ++j) {
      if (keys_[j] == keys_[i]) {
        return reject(invalid("acquire: the same limit is applied twice to key '" +
                              std::string(r.key) + "' in one request"));
      }
    }
    if (shared_.options.cluster) {
      const int s = key_slot(keys_[i]);
      if (slot >= 0 && s != slot) {
        return reject(
            invalid("acquire: in a Redis Cluster the limits of one request must share a client key "
                    "(the part of the key after its first '|'), so that they live in one slot"));
      }
      slot = s;
    }
    if (!window_read && sl->algorithm == algorithm_name(Algorithm::kFixedWindow)) {
      c->window_now_us = window_now_us(c, slot);
      note_window_time(c->window_now_us);
      window_read = true;
    }
    append_limit(c, *sl, keys_[i], sl->block_us > 0, r.cost, 0, c->window_now_us);
  }
  const ScriptLimit& first = c->limits.front().limit;
  if (shared_.options.fixed_window_fast_path && n == 1 &&
      first.algorithm == algorithm_name(Algorithm::kFixedWindow) && first.block_us == 0)
    c->kind = CallKind::kFastScript;
  c->out = out;
  start(c, std::move(done), slot);
}

void Client::refund(std::span<const RefundRequest> requests, Nanos now, Store::Done done) {
  if (closing_) {
    done(unavailable("the Redis store is shutting down"));
    return;
  }
  const size_t n = requests.size();
  if (shared_.options.time_source == RedisTimeSource::kLocal && now.count() < 0) {
    done(invalid("refund: the Redis store needs a time at or after the epoch"));
    return;
  }
  // Everything is checked before anything is sent: an invalid request gives
  // nothing back, as in the memory store.
  std::vector<ScriptLimit> limits;
  limits.reserve(n);
  for (const RefundRequest& r : requests) {
    if (r.limit == nullptr) return done(invalid("refund: null limit"));
    if (r.cost == 0) return done(invalid("refund: cost must be at least 1"));
    if (r.charged_at.count() < 0)
      return done(invalid("refund: the Redis store needs a charge time at or after the epoch"));
    Result<ScriptLimit> sl = script_limit(*r.limit);
    if (!sl.ok()) return done(sl.error());
    limits.push_back(*sl);
  }
  if (n == 0) {
    done(Status());
    return;
  }

  // One call per cluster slot (one in all without a cluster), in the order
  // of the slots' first requests: its limits are given back in order, each
  // on its own. The calls of one node's slots travel in one script call.
  std::vector<std::string> keys(n);
  std::vector<int> slot_of_request(n, -1);
  std::vector<int> slots;
  for (size_t i = 0; i < n; ++i) {
    keys[i] = state_key(shared_.options.key_prefix, *requests[i].limit, requests[i].key);
    if (shared_.options.cluster) slot_of_request[i] = key_slot(keys[i]);
    if (std::find(slots.begin(), slots.end(), slot_of_request[i]) == slots.end())
      slots.push_back(slot_of_request[i]);
  }
  struct Group {
    size_t waiting = 0;
    Status status;  // the first error
    Store::Done done;
  };
  auto group = std::make_shared<Group>();
  group->waiting = slots.size();  // before any call can complete
  group->done = std::move(done);
  for (const int slot : slots) {
    Call* c = new_call();
    c->is_refund = true;
    set_now(c, now);
    for (size_t i = 0; i < n; ++i) {
      if (slot_of_request[i] != slot) continue;
      // A fixed window gives back to the counter of the charge's window.
      const auto charged_at_us = static_cast<int64_t>(requests[i].charged_at.count() / 1'000);
      append_limit(c, limits[i], keys[i], false, refund_cost(requests[i].cost), charged_at_us,
                   charged_at_us);
      c->limits.back().debit = requests[i].debit;
    }
    start(
        c,
        [group](Status s) {
          if (!s.ok() && group->status.ok()) group->status = std::move(s);
          if (--group->waiting == 0) group->done(std::move(group->status));
        },
        slot);
  }
}

void Client::command(std::string frame, std::string node, int slot,
                     std::chrono::milliseconds timeout, CommandDone done) {
  if (closing_) {
    done(unavailable("the Redis store is shutting down"), nullptr);
    return;
  }
  Call* c = new_call();
  c->kind = CallKind::kCommand;
  c->frame = std::move(frame);
  c->node = std::move(node);
  c->slot = slot;
  c->command_done = std::move(done);
  c->deadline = std::chrono::steady_clock::now() + timeout;
  enqueue(command_queue_, c);
  submit(c);
}

// Puts the call in this turn's batch for its node, opening one if needed;
// the batches leave at the end of the turn (flush). A node's batch holds
// calls of every slot it serves (entry.lua).
void Client::submit(Call* c) {
  Connection* to = route(c->slot, c->node);
  if (to == nullptr) {
    request_refresh();
    fail(c, ErrorKind::kConnection, "no Redis master known yet (asking the sentinels)");
    return;
  }
  Connection& conn = *to;
  conn.ensure_connecting();
  // A command (health check, slot map, sentinel question) may wait for a
  // connection within its own timeout; a decision never does: its timeout
  // would pay for a connect and a TLS handshake.
  if (!(c->kind == CallKind::kCommand ? conn.usable() : conn.up())) {
    // In a cluster the node may be gone for good, its slots served by a
    // promoted replica: only a fresh slot map says so (debounced), as no
    // MOVED can come from a node that does not answer; with a sentinel,
    // the master may have moved.
    request_refresh();
    fail(c, ErrorKind::kConnection,
         "not connected to Redis at " + conn.name() +
             (conn.usable() ? " (connecting)" : " (reconnecting)"));
    return;
  }
  size_t& waiting = calls_waiting_[&conn];
  if (waiting >= shared_.options.max_in_flight) {
    fail(c, ErrorKind::kOverloaded,
         std::to_string(waiting) + " calls already wait for Redis at " + conn.name());
    return;
  }
  Batch* b = nullptr;
  if (c->kind != CallKind::kCommand) {
    // The newest open batch for this connection, if it has room.
    for (auto it = open_.rbegin(); it != open_.rend(); ++it) {
      if ((*it)->connection != &conn || (*it)->kind == CallKind::kCommand) continue;
      // A fast-path call declares all its batch's keys: one slot per batch.
      if ((*it)->kind == c->kind && (c->kind != CallKind::kFastScript || slot_of(*it) == c->slot) &&
          (*it)->calls.size() < shared_.options.max_batch &&
          (!(*it)->held ||
           c->deadline - (*it)->calls.front()->deadline <= shared_.options.max_hold))
        b = *it;
      break;
    }
  }
  if (b == nullptr) {
    b = new_batch();
    b->connection = &conn;
    b->waiting_on = &conn;
    b->kind = c->kind;
    b->refs = 1;  // released when its reply (or failure) has been handled
    open_.push_back(b);
    post_flush();
  }
  b->calls.push_back(c);
  ++c->refs;
  ++waiting;
}

void Client::post_flush() {
  if (flush_posted_) return;
  flush_posted_ = true;
  boost::asio::post(io_, [this, alive = std::weak_ptr<bool>(alive_)] {
    if (!alive.expired()) flush();
  });
}

// A node's open batches leave together, in the order they were opened, or
// wait together: while one of this client's script calls is in flight to the
// node, its batches keep filling until the reply comes (or one is full).
// Redis runs one call at a time anyway, so the requests wait about as long,
// and each call carries all that arrived meanwhile: the fewer, larger calls
// cost Redis less per decision when the load is heavy, and nothing at all is
// held when it is light. A held batch takes calls for max_hold after its
// first (submit()); a later one opens the next batch, and the node's batches
// then leave, pipelined behind the call in flight: a Redis that stalls gets
// the waiting requests in batches of that span, so the fast path's one
// deadline per batch (the earliest) refuses none of them much before its
// own.
void Client::flush() {
  flush_posted_ = false;
  std::vector<Batch*> batches;
  batches.swap(open_);
  held_.clear();
  for (Batch* b : batches) {
    Connection* conn = b->connection;
    if (std::find(held_.begin(), held_.end(), conn) != held_.end()) continue;
    if (scripts_in_flight_[conn] == 0 || closing_) continue;
    if (!must_leave(batches, conn)) held_.push_back(conn);
  }
  for (Batch* b : batches) {
    if (std::find(held_.begin(), held_.end(), b->connection) != held_.end()) {
      b->held = true;
      open_.push_back(b);
    } else {
      send(b);
    }
  }
}

bool Client::must_leave(const std::vector<Batch*>& batches, const Connection* conn) const {
  const Batch* oldest_held = nullptr;
  const Batch* newest = nullptr;
  for (const Batch* b : batches) {
    if (b->connection != conn || b->kind == CallKind::kCommand) continue;
    if (b->calls.size() >= shared_.options.max_batch) return true;
    if (b->held && oldest_held == nullptr) oldest_held = b;
    newest = b;
  }
  // Commands alone wait for nothing: there is no batch to fill.
  if (newest == nullptr) return true;
  return oldest_held != nullptr &&
         newest->calls.back()->deadline - oldest_held->calls.front()->deadline >
             shared_.options.max_hold;
}

void Client::send(Batch* b) {
  // Calls that timed out meanwhile are not sent (their callers already got
  // kStoreUnavailable and applied on_failure).
  size_t kept = 0;
  for (Call* c : b->calls) {
    if (c->completed) {
      if (b->waiting_on != nullptr) --calls_waiting_[b->waiting_on];
      unref(c);
    } else {
      b->calls[kept++] = c;
    }
  }
  b->calls.resize(kept);
  if (kept == 0) {
    unref(b);
    return;
  }
  Connection& conn = *b->connection;
  if (b->waiting_on != &conn) {
    if (b->waiting_on != nullptr) calls_waiting_[b->waiting_on] -= kept;
    calls_waiting_[&conn] += kept;
    b->waiting_on = &conn;
  }
  conn.ensure_connecting();
  b->sent_at = std::chrono::steady_clock::now();
  std::string_view frame;
  if (b->kind == CallKind::kCommand) {
    frame = b->calls.front()->frame;
  } else if (b->kind == CallKind::kFastScript) {
    write_fast_frame(b, conn);
    frame = frame_;
  } else {
    write_script_frame(b, conn);
    frame = frame_;
  }
  if (b->asking) conn.send_no_reply(kAsking);
  // A resend (redirection, NOSCRIPT) to a node not connected yet fails as a
  // first call would: no call waits for a connection.
  if ((b->kind != CallKind::kCommand && !conn.up()) || !conn.send(frame, b)) {
    fail_all(b, ErrorKind::kConnection, "cannot send to Redis at " + conn.name());
    unref(b);
    return;
  }
  if (b->kind != CallKind::kCommand) ++scripts_in_flight_[&conn];
}

// entry.lua's call: each distinct limit of the batch once, then per call
// what refers to it.
void Client::write_script_frame(Batch* b, Connection& to) {
  // Calls slot after slot (each slot's in issue order): the first slot's
  // keys are declared, the other slots' follow as key groups (entry.lua).
  if (shared_.options.cluster) {
    std::stable_sort(b->calls.begin(), b->calls.end(),
                     [](const Call* x, const Call* y) { return x->slot < y->slot; });
  }
  // Each distinct limit of the batch once, then per call what refers to it.
  defs_.clear();
  def_of_.clear();
  size_t declared = 0;     // keys of the first slot's calls
  size_t first_calls = 0;  // calls of the first slot
  group_keys_.clear();     // per further slot: its keys
  // ttl_extra, whether calls carry their time, the definitions, groups, the
  // requests (packed: one argument)
  size_t args = 5;
  const bool own_time = shared_.options.time_source == RedisTimeSource::kLocal;
  for (size_t k = 0; k < b->calls.size(); ++k) {
    const Call* c = b->calls[k];
    if (c->slot == slot_of(b)) {
      declared += c->key_count;
      ++first_calls;
    } else {
      if (c->slot != b->calls[k - 1]->slot) {
        group_keys_.push_back(0);
        ++args;
      }
      group_keys_.back() += c->key_count;
      args += c->key_count;
    }
    for (const LimitRef& r : c->limits) {
      size_t d = 0;
      while (d < defs_.size() && !(*defs_[d] == r.limit)) ++d;
      if (d == defs_.size()) defs_.push_back(&r.limit);
      def_of_.push_back(d + 1);
    }
  }
  args += 5 * defs_.size();
  frame_.clear();
  append_array_header(frame_, 3 + declared + args);
  if (b->use_eval) {
    append_bulk(frame_, "EVAL");
    append_bulk(frame_, kLuaScript);
  } else {
    append_bulk(frame_, "EVALSHA");
    append_bulk(frame_, kLuaScriptSha1);
  }
  append_bulk(frame_, static_cast<int64_t>(declared));
  for (size_t k = 0; k < first_calls; ++k) frame_.append(b->calls[k]->keys);
  append_bulk(frame_, static_cast<int64_t>(shared_.options.ttl_extra.count()));
  append_bulk(frame_, own_time ? std::string_view("1") : std::string_view("0"));
  append_bulk(frame_, static_cast<int64_t>(defs_.size()));
  for (const ScriptLimit* d : defs_) {
    append_bulk(frame_, d->algorithm);
    append_bulk(frame_, static_cast<int64_t>(d->p1));
    append_bulk(frame_, static_cast<int64_t>(d->p2));
    append_bulk(frame_, static_cast<int64_t>(d->p3));
    if (d->block_factor > 1) {
      append_bulk(frame_, growing_block_arg(*d));  // lockout.lua
    } else {
      append_bulk(frame_, static_cast<int64_t>(d->block_us));
    }
  }
  append_bulk(frame_, static_cast<int64_t>(group_keys_.size()));
  for (size_t k = first_calls, group = 0; k < b->calls.size(); ++k) {
    if (b->calls[k]->slot != b->calls[k - 1]->slot)
      append_bulk(frame_, static_cast<int64_t>(group_keys_[group++]));
    frame_.append(b->calls[k]->keys);
  }
  // Each call's deadline in this node's clock, converted at every send: a
  // batch that MOVED/ASK/TRYAGAIN resends keeps its calls' local deadlines,
  // and the node it goes to may have another clock.
  const ClockOffset& clock = to.clock();
  const int64_t now_us = ClockOffset::floor_us(b->sent_at);
  size_t next_def = 0;
  packed_.clear();
  for (Call* c : b->calls) {
    append_packed(packed_, clock.to_redis(ClockOffset::floor_us(c->deadline), now_us));
    if (own_time) append_packed(packed_, c->now_us);
    const int64_t n = static_cast<int64_t>(c->limits.size());
    append_packed(packed_, c->is_refund ? -n : n);
    for (const LimitRef& r : c->limits) {
      append_packed(packed_, static_cast<int64_t>(def_of_[next_def++]));
      // A debit (RefundRequest::debit) is a refund of minus its cost.
      const auto cost = static_cast<int64_t>(r.cost);
      append_packed(packed_, r.debit ? -cost : cost);
      if (c->is_refund) {
        append_packed(packed_, r.charged_at_us);
      } else if (r.window) {
        append_packed(packed_, c->window_now_us);
      }
    }
  }
  append_bulk(frame_, packed_);
}

// fast_fixed_window.lua's call: the definitions, then per call its
// window's time, definition and cost.
void Client::write_fast_frame(Batch* b, Connection& to) {
  defs_.clear();
  def_of_.clear();
  auto deadline = b->calls.front()->deadline;
  for (Call* c : b->calls) {
    deadline = std::min(deadline, c->deadline);
    const ScriptLimit& limit = c->limits.front().limit;
    size_t d = 0;
    while (d < defs_.size() && !(*defs_[d] == limit)) ++d;
    if (d == defs_.size()) defs_.push_back(&limit);
    def_of_.push_back(d + 1);
  }
  const size_t keys = b->calls.size();
  const size_t args = 4 + 2 * defs_.size();  // the requests packed: one argument
  frame_.clear();
  append_array_header(frame_, 3 + keys + args);
  if (b->use_eval) {
    append_bulk(frame_, "EVAL");
    append_bulk(frame_, kFastFixedWindowScript);
  } else {
    append_bulk(frame_, "EVALSHA");
    append_bulk(frame_, kFastFixedWindowScriptSha1);
  }
  append_bulk(frame_, static_cast<int64_t>(keys));
  for (Call* c : b->calls) frame_.append(c->keys);
  append_bulk(frame_, static_cast<int64_t>(shared_.options.ttl_extra.count()));
  // The earliest deadline of the batch, in this node's clock (as above).
  append_bulk(frame_, to.clock().to_redis(ClockOffset::floor_us(deadline),
                                          ClockOffset::floor_us(b->sent_at)));
  append_bulk(frame_, static_cast<int64_t>(defs_.size()));
  for (const ScriptLimit* d : defs_) {
    append_bulk(frame_, static_cast<int64_t>(d->p1));
    append_bulk(frame_, static_cast<int64_t>(d->p2));
  }
  packed_.clear();
  for (size_t k = 0; k < keys; ++k) {
    const Call* c = b->calls[k];
    append_packed(packed_, c->window_now_us);
    append_packed(packed_, static_cast<int64_t>(def_of_[k]));
    append_packed(packed_, static_cast<int64_t>(c->limits.front().cost));
  }
  append_bulk(frame_, packed_);
}

void Client::on_state(Connection& connection, bool up) {
  if (!up && !connection.to_sentinel()) request_refresh();
  if (watch_timer_) {
    // Not ready from the moment a connection goes down; the flag is worked
    // out again after this turn (this may run inside a loop over the
    // connections, which keep_connected() may add to).
    if (!up) connected_.store(false, std::memory_order_relaxed);
    if (!keep_posted_) {
      keep_posted_ = true;
      boost::asio::post(io_, [this, alive = std::weak_ptr<bool>(alive_)] {
        if (alive.expired()) return;
        keep_posted_ = false;
        keep_connected();
      });
    }
  }
  if (on_state_change) on_state_change(connection.name(), up);
}

void Client::on_reply(Connection& connection, redisReply* reply, void* privdata) {
  Batch* b = static_cast<Batch*>(privdata);
  // The batches held for this reply leave at the end of this turn, with what
  // the calls it completes issue meanwhile.
  if (b->kind != CallKind::kCommand && --scripts_in_flight_[&connection] == 0 && !open_.empty())
    post_flush();
  // The reference this attempt held is released at the end; a resend made
  // meanwhile takes its own.
  if (reply == nullptr) {
    // The loss itself was counted and logged by the connection.
    if (!closing_) {
      for (Call* c : b->calls) {
        if (!c->completed)
          complete(c, unavailable("connection to Redis at " + connection.name() + " lost"));
      }
    }
  } else if (reply->type == REDIS_REPLY_ERROR) {
    on_error(connection, b, reply);
  } else if (b->kind == CallKind::kCommand) {
    Call* c = b->calls.front();
    if (!c->completed) complete(c, Status(), reply);
  } else {
    deliver(connection, b, reply);
  }
  unref(b);
}

void Client::deliver(Connection& from, Batch* b, const redisReply* reply) {
  const auto received = std::chrono::steady_clock::now();
  const bool own_time = shared_.options.time_source == RedisTimeSource::kLocal;
  bool read = false;
  if (b->kind == CallKind::kFastScript) {
    fast_shapes_.clear();
    for (Call* c : b->calls) {
      const ScriptLimit& l = c->limits.front().limit;
      fast_shapes_.push_back(FastShape{l.p1, l.p2, c->window_now_us});
    }
    read = read_fast_reply(reply, fast_shapes_, &answer_);
  } else {
    shapes_.clear();
    for (Call* c : b->calls) shapes_.push_back(CallShape{c->limits.size(), c->is_refund});
    read = read_script_reply(reply, shapes_, &answer_);
  }
  if (!read) {
    fail_all(b, ErrorKind::kScript, "unexpected reply to the rate limit script");
    return;
  }
  from.clock().observe(answer_.redis_time_us, ClockOffset::floor_us(b->sent_at),
                       ClockOffset::ceil_us(received));
  const LimitAnswer* next = answer_.limits.data();
  for (size_t k = 0; k < b->calls.size(); ++k) {
    Call* c = b->calls[k];
    const bool expired = answer_.expired[k] != 0;
    // An applied acquire's limits, in order.
    const LimitAnswer* answers = next;
    if (!expired && !c->is_refund) next += c->limits.size();
    if (expired) Counters::add(shared_.counters.expired);
    if (c->completed) {
      // Its caller already had the on_failure answer (timeout). A reply that
      // still applied it is the one charge the deadline cannot prevent: Redis
      // ran it in time, but the reply came too late (Redis stopped between
      // running a script and writing its reply, or a reply slower than any
      // observed so far).
      Counters::add(shared_.counters.late_replies);
      // A late refund is not a charge: late_applied counts charges only.
      bool applied = !expired && !c->is_refund;
      for (size_t i = 0; applied && i < c->limits.size(); ++i) applied = answers[i].allowed;
      if (applied) Counters::add(shared_.counters.late_applied);
    } else if (expired) {
      // Redis ran it past the deadline as converted to its clock, which lands
      // early by the bound's slack: the timeout was all but due.
      fail(c, ErrorKind::kTimeout,
           "Redis received the call after its deadline (" +
               std::to_string(shared_.options.timeout.count()) + " ms)");
    } else {
      // A refund's answer holds nothing the caller needs. An acquire's
      // decisions are at the time it carried, or the call's Redis TIME.
      if (!c->is_refund) {
        const Nanos decided_at{(own_time ? c->now_us : answer_.redis_time_us) * 1'000};
        for (size_t i = 0; i < c->limits.size(); ++i) {
          Decision& d = c->out[i];
          d = Decision{};
          d.allowed = answers[i].allowed;
          d.limit = c->limits[i].limit.p1;
          d.remaining = answers[i].remaining;
          d.reset_after = answers[i].reset_after;
          d.retry_after = answers[i].retry_after;
          if (c->limits[i].limit.concurrency && !d.allowed)
            d.retry_after = core::concurrency_retry_after(d.retry_after);
          // A fixed window is decided at its window's time (the refund
          // finds the charge's counter from it).
          d.decided_at = c->limits[i].window ? Nanos{c->window_now_us * 1'000} : decided_at;
        }
      }
      complete(c, Status());
    }
  }
}

void Client::on_error(Connection& from, Batch* b, const redisReply* reply) {
  using Kind = ErrorReply::Kind;
  const std::string_view message(reply->str, reply->len);
  const ErrorReply error = read_error_reply(message);
  if (error.kind == Kind::kNoScript && b->kind != CallKind::kCommand && !b->use_eval) {
    // The node lost its script cache (restart, SCRIPT FLUSH, failover): EVAL
    // sends the script itself, which Redis caches again for later EVALSHAs.
    Counters::add(shared_.counters.script_loads);
    b->use_eval = true;
    ++b->refs;
    send(b);
    return;
  }
  if (error.kind == Kind::kBadRedirect) {
    fail_all(b, ErrorKind::kServer, "bad redirection from Redis: " + std::string(message));
    return;
  }
  if (error.kind == Kind::kMoved || error.kind == Kind::kAsk) {
    if (++b->redirects > kMaxRedirects) {
      fail_all(b, ErrorKind::kServer, "too many cluster redirections: " + std::string(message));
      return;
    }
    if (error.kind == Kind::kMoved) {
      Counters::add(shared_.counters.moved);
      patch_map(error.slot, error.node);
      if (shared_.request_refresh) shared_.request_refresh();
    } else {
      Counters::add(shared_.counters.ask);
    }
    if (several_slots(b)) {
      // The node's calls of several slots, its first slot moved or
      // migrating: each slot's calls go on their own to their slot's node,
      // where an ASK is met again and followed.
      split(b, Parts::kPerSlot);
      return;
    }
    if (error.kind == Kind::kMoved) {
      b->asking = false;
      b->connection = route(slot_of(b), std::string());
    } else {
      b->asking = true;
      b->connection = &connection(std::string(error.node));
    }
    ++b->refs;
    send(b);
    return;
  }
  if (error.kind == Kind::kNotLocal && several_slots(b)) {
    // The script wrote nothing: a slot of its key groups has moved (this
    // client's map is stale) or is migrating. Each slot's calls on their
    // own, routed (and redirected) as any call of one slot.
    if (shared_.request_refresh) shared_.request_refresh();
    split(b, Parts::kPerSlot);
    return;
  }
  if (error.kind == Kind::kTryAgain) {
    // A multi-key call during a slot migration while its keys are split
    // between the two nodes. Calls of several slots: each slot's on their
    // own. Several calls of one slot batched together: each alone, at once,
    // to wherever its own keys are (a call for one key is never split). One
    // call whose own keys are split: again shortly, within the deadline, as
    // the migration moves them together.
    Counters::add(shared_.counters.tryagain);
    b->asking = false;
    if (b->calls.size() > 1) {
      split(b, several_slots(b) ? Parts::kPerSlot : Parts::kPerCall);
      return;
    }
    retry_later(b);
    return;
  }
  if (b->kind == CallKind::kCommand) {
    Call* c = b->calls.front();
    if (!c->completed)
      complete(c, Error{ErrorCode::kStoreUnavailable, std::string(message)}, reply);
    return;
  }
  if (!from.up()) {
    // Refused before the handshake finished (a failed AUTH): the connection's fault.
    fail_all(b, ErrorKind::kConnection,
             "Redis at " + from.name() + " refused the call: " + std::string(message));
  } else if (error.kind == Kind::kOutOfMemory) {
    // Nothing was written (the script's first write was refused). Readiness
    // follows until a health check's write goes through.
    shared_.note_writes_refused(from.name(), message);
    fail_all(b, ErrorKind::kOutOfMemory, "Redis refused the call: " + std::string(message));
  } else if (error.kind == Kind::kReadOnly) {
    // A replica: the master moved (a failover). Nothing was written; the call
    // is not resent (it may not be the only one the old master got) and the
    // sentinels are asked again.
    request_refresh();
    fail_all(b, ErrorKind::kServer, "Redis refused the call: " + std::string(message));
  } else if (error.kind == Kind::kServer) {
    fail_all(b, ErrorKind::kServer, "Redis refused the call: " + std::string(message));
  } else {
    fail_all(b, ErrorKind::kScript, "rate limit script failed: " + std::string(message));
  }
}

void Client::split(Batch* b, Parts parts) {
  if (parts == Parts::kPerSlot) Counters::add(shared_.counters.slot_splits);
  std::vector<Batch*> sent;
  size_t kept = 0;
  for (Call* c : b->calls) {
    if (c->completed) {
      b->calls[kept++] = c;
      continue;
    }
    // Calls of one slot are contiguous (send() sorted them).
    Batch* part = nullptr;
    if (parts == Parts::kPerSlot && !sent.empty() && slot_of(sent.back()) == c->slot)
      part = sent.back();
    if (part == nullptr) {
      part = new_batch();
      part->connection = route(c->slot, std::string());
      part->waiting_on = b->waiting_on;
      part->kind = b->kind;
      part->use_eval = b->use_eval;
      part->redirects = b->redirects;
      part->refs = 1;
      sent.push_back(part);
    }
    // Takes over b's reference to the call and its place in calls_waiting_.
    part->calls.push_back(c);
  }
  b->calls.resize(kept);
  for (Batch* part : sent) send(part);
}

void Client::retry_later(Batch* b) {
  if (!b->retry_timer) b->retry_timer = std::make_unique<boost::asio::steady_timer>(io_);
  ++b->refs;
  b->retry_timer->expires_after(kTryAgainDelay);
  b->retry_timer->async_wait(
      [this, b, alive = std::weak_ptr<bool>(alive_)](const boost::system::error_code& ec) {
        if (ec || alive.expired()) return;  // the client is going away; its pool frees the batch
        b->connection = route(slot_of(b), std::string());
        send(b);  // takes over the retry's reference
      });
}

void Client::complete(Call* c, Status status, const redisReply* reply) {
  c->completed = true;
  if (c->kind == CallKind::kCommand) {
    CommandDone done = std::move(c->command_done);
    c->command_done = nullptr;
    if (done) done(std::move(status), reply);
  } else {
    Store::Done done = std::move(c->done);
    c->done = nullptr;
    if (done) done(std::move(status));
  }
}

void Client::fail(Call* c, ErrorKind kind, std::string message) {
  switch (kind) {
    case ErrorKind::kConnection:
      Counters::add(shared_.counters.connection_errors);
      break;
    case ErrorKind::kScript:
      Counters::add(shared_.counters.script_errors);
      break;
    case ErrorKind::kServer:
      Counters::add(shared_.counters.server_errors);
      break;
    case ErrorKind::kOverloaded:
      Counters::add(shared_.counters.overloaded);
      break;
    case ErrorKind::kOutOfMemory:
      Counters::add(shared_.counters.out_of_memory);
      break;
    case ErrorKind::kTimeout:
      Counters::add(shared_.counters.timeouts);
      break;
    case ErrorKind::kCount:
      break;
  }
  if (c->kind != CallKind::kCommand) shared_.log.log(kind, message);
  complete(c, unavailable(std::move(message)));
}

void Client::fail_all(Batch* b, ErrorKind kind, const std::string& message) {
  for (Call* c : b->calls) {
    if (c->completed) continue;
    if (c->kind == CallKind::kCommand) {
      complete(c, unavailable(message));
    } else {
      fail(c, kind, message);
    }
  }
}

}  // namespace sluice::redis
