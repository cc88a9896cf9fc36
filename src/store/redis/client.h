// Client: the Redis store's calls on one io_context (one per attached worker
// thread, plus the store's internal thread).
//
// Holds one Connection per Redis node this thread talks to and routes each
// call (cluster: by the slot of its keys' hash tag, from the shared slot map;
// sentinel: to the master the sentinels named last). A client of a worker
// thread keeps a connection open to every node its calls may go to (every
// master of the slot map, or the master), from keep_connected() on: a call
// never waits for a connect, it fails at once while its connection is not up.
// The calls issued in one loop turn to one node are coalesced into one script
// call, up to max_batch: Redis then pays the fixed cost of a script call
// (dispatch, TIME, defining the functions) once per batch rather than once
// per request. While one of the client's script calls is in flight to a
// node, the next batch keeps filling until its reply comes (or the batch is
// full, or 2 ms old), so under heavy load a call carries what arrived during
// a round trip. In a cluster a batch holds calls of every slot the node
// serves: the first slot's keys are declared (they route the call), the
// others' passed as key groups, which the script reads before it writes
// anything (entry.lua). The script still applies the requests one after
// another, each all-or-nothing, so a batch decides exactly what separate
// calls would. A refund is a call of the same kind (its limits' algorithms
// named with a '-' before, entry.lua), so it is batched, routed, redirected,
// retried and timed out exactly as an acquire; a refund of requests in
// several cluster slots is one call per slot (batched per node as any).
//
// An acquire whose only limit is a fixed_window without a block takes the
// fast path: its own script (scripts/fast_fixed_window.lua), on the same
// keys and values, cheaper for Redis per decision. Fast and other calls go
// in separate batches, in issue order (a batch only takes calls while it is
// the newest open one for its node), so Redis still runs them in order.
//
// A batch is sent by EVALSHA, and again in full (EVAL) on NOSCRIPT; MOVED
// updates the local slot map, asks for a refresh and resends; ASK resends to
// the named node after ASKING; TRYAGAIN sends each call of the batch alone
// (a migration has split the slot's keys between two nodes), or resends a
// lone call shortly, within the deadline. A batch of several slots that
// meets any of these, or whose script finds a key group's slot not served
// there (NOTLOCAL: it moved, or is migrating; nothing was written), is sent
// again per slot, each part as a batch of one slot. A call that finds its
// node unreachable, or times out, asks for a refresh too: a dead master's
// replica may have taken its slots.
//
// Calls on one client share one timeout, so their deadlines come in issue
// order: a FIFO and one timer give every call its timeout without a timer
// per call. A timed-out call completes at once with kStoreUnavailable; its
// reply, if it ever comes, is dropped. Every request also carries its
// deadline to the script, in the node's clock (clock_offset.h), and the script
// applies nothing past it: a call that Redis receives after its caller had
// the timeout (a paused Redis meeting its backlog) charges nothing.
//
// Thread-safety: none; use from the thread that runs the io_context.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sluice/store.h"
#include "store/redis/connection.h"
#include "store/redis/script_limit.h"
#include "store/redis/script_reply.h"
#include "store/redis/shared.h"

namespace sluice::redis {

class Client final : public Connection::Listener {
 public:
  // `reply` is valid only during the callback; nullptr unless Redis answered
  // (an error reply comes with a failed status, its message the reply's).
  using CommandDone = std::function<void(Status, const redisReply*)>;

  Client(boost::asio::io_context& io, Shared& shared);
  ~Client() override;
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  boost::asio::io_context& io() { return io_; }

  // Store::acquire_async on this thread: `done` may run before this returns
  // (invalid requests, connection down, too many in flight).
  void acquire(std::span<const AcquireRequest> requests, Nanos now, std::span<Decision> out,
               Store::Done done);

  // Store::refund_async on this thread, as acquire(); `done` runs once, after
  // every slot's call, with the first error if any failed (a call that
  // failed may still have been applied, as an acquire may).
  void refund(std::span<const RefundRequest> requests, Nanos now, Store::Done done);

  // A command (a RESP frame) to the node named `node`, or else to the node
  // serving `slot`, or else to the first address. Its timeout is `timeout`.
  void command(std::string frame, std::string node, int slot, std::chrono::milliseconds timeout,
               CommandDone done);

  // Called when a connection of this client goes up or down.
  std::function<void(const std::string& node, bool up)> on_state_change;

  // Opens a connection to every node this client's calls may go to, and
  // keeps them open: again every health_interval, when a connection goes up
  // or down, and when called (the slot map or the master changed); a
  // connection to a node that is no longer the master closes once idle.
  void keep_connected();
  // Whether every one of those connections is up (false before the first
  // keep_connected()). Any thread.
  bool connected() const { return connected_.load(std::memory_order_relaxed); }
  // Expires when the client is destroyed: a task posted to its thread checks it.
  std::weak_ptr<bool> alive_token() const { return alive_; }

 private:
  // One limit of a call, as send() names it to the script.
  struct LimitRef {
    ScriptLimit limit;
    uint64_t cost = 0;
    int64_t charged_at_us = 0;  // a refund's charge time
    bool window = false;        // a fixed_window: an acquire sends its window's time
    bool debit = false;         // a refund's RefundRequest::debit: sent as a negative cost
  };
  struct Call;
  struct Batch;
  struct TimeoutQueue {
    explicit TimeoutQueue(boost::asio::io_context& io) : timer(io) {}
    std::deque<Call*> calls;
    boost::asio::steady_timer timer;
    bool armed = false;
  };

  void on_reply(Connection& connection, redisReply* reply, void* privdata) override;
  void on_state(Connection& connection, bool up) override;

  Call* new_call();
  void set_now(Call* call, Nanos now) const;
  int64_t window_now_us(const Call* call, int slot);
  void note_window_time(int64_t us);
  void append_limit(Call* call, const ScriptLimit& limit, const std::string& state_key,
                    bool with_lockout, uint64_t cost, int64_t charged_at_us, int64_t window_at_us);
  void start(Call* call, Store::Done done, int slot);
  void unref(Call* call);
  Batch* new_batch();
  void unref(Batch* batch);
  void enqueue(TimeoutQueue& queue, Call* call);
  void arm(TimeoutQueue& queue);
  void on_timer(TimeoutQueue& queue);

  Connection& connection(const std::string& node);
  // The connection a call goes to: `node` if given, else by slot (cluster),
  // the master (sentinel; null while none is known) or the first address.
  Connection* route(int slot, const std::string& node);
  // Sentinel: takes the master the sentinels named last (true when known).
  bool sync_master();
  // The nodes keep_connected() keeps a connection to, into targets_.
  void list_targets();
  void arm_watch();
  void submit(Call* call);
  void post_flush();
  void flush();
  // Whether a node's open batches leave now even with a call in flight.
  bool must_leave(const std::vector<Batch*>& batches, const Connection* conn) const;
  void send(Batch* batch);
  static int slot_of(const Batch* batch);
  static bool several_slots(const Batch* batch);
  void write_script_frame(Batch* batch, Connection& to);
  void write_fast_frame(Batch* batch, Connection& to);
  void on_error(Connection& from, Batch* batch, const redisReply* reply);
  void deliver(Connection& from, Batch* batch, const redisReply* reply);
  // Sends a batch's calls again in parts, each to its slot's node: one per
  // call (TRYAGAIN: a migration split a slot's keys), or one per slot (a
  // node's batch that met a slot moved or migrating).
  enum class Parts { kPerCall, kPerSlot };
  void split(Batch* batch, Parts parts);
  void retry_later(Batch* batch);
  void release_calls(Batch* batch);
  void complete(Call* call, Status status, const redisReply* reply = nullptr);
  void fail(Call* call, ErrorKind kind, std::string message);
  void fail_all(Batch* batch, ErrorKind kind, const std::string& message);
  void request_refresh() const;
  void sync_map();
  void patch_map(int slot, std::string_view node);

  boost::asio::io_context& io_;
  Shared& shared_;
  std::unordered_map<std::string, std::unique_ptr<Connection>> connections_;
  std::unordered_map<Connection*, size_t> calls_waiting_;  // per connection, for max_in_flight
  std::vector<std::string> seed_names_;
  size_t next_seed_ = 0;
  std::string master_;  // sentinel: the master in use, "" while none is known
  uint64_t master_version_ = 0;
  std::vector<std::string> targets_;                        // scratch: keep_connected()
  std::atomic<bool> connected_{false};                      // see connected()
  bool keep_posted_ = false;                                // a keep_connected() is posted
  std::unique_ptr<boost::asio::steady_timer> watch_timer_;  // from keep_connected() on
  std::shared_ptr<const SlotMap> map_;
  uint64_t map_version_ = 0;
  TimeoutQueue acquire_queue_;
  TimeoutQueue command_queue_;
  std::vector<Batch*> open_;  // batches filling during this loop turn, or held
  std::unordered_map<Connection*, size_t> scripts_in_flight_;  // script calls sent, not answered
  std::vector<Connection*> held_;                              // scratch: flush()
  bool flush_posted_ = false;
  std::vector<std::unique_ptr<Call>> call_pool_;
  std::vector<Call*> free_calls_;
  std::vector<std::unique_ptr<Batch>> batch_pool_;
  std::vector<Batch*> free_batches_;
  std::vector<std::string> keys_;         // scratch
  std::string frame_;                     // scratch
  std::string packed_;                    // scratch: a batch's packed numbers (packed.h)
  std::vector<const ScriptLimit*> defs_;  // scratch: a batch's distinct limits
  std::vector<size_t> def_of_;            // scratch: per limit of a batch, its definition
  std::vector<size_t> group_keys_;        // scratch: per further slot of a batch, its keys
  std::vector<CallShape> shapes_;         // scratch: what each call of a batch sent
  std::vector<FastShape> fast_shapes_;    // scratch: the same, for a fast-path batch
  ScriptAnswer answer_;                   // scratch: the script's reply, read
  bool closing_ = false;
  int64_t noted_window_us_ = 0;  // what this client last raised Shared::window_time_us to
  // Checked first by handlers that may run after the client is gone.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace sluice::redis
