// State shared by every client of one RedisStore: options, counters, the
// rate-limited error log, the cluster slot map, the master the sentinels name,
// each node's clock offset, and whether Redis refuses writes.
//
// Thread-safety: counters and gauges are relaxed atomics; the log, the
// topology, the master and the clock map lock internally (a ClockOffset is
// itself thread-safe); options, seeds and sentinels are immutable after
// creation.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sluice/redis_store.h"
#include "store/redis/address.h"
#include "store/redis/clock_offset.h"

namespace boost::asio::ssl {
class context;
}

namespace sluice::redis {

enum class ErrorKind {
  kTimeout,
  kConnection,
  kScript,
  kServer,
  kOverloaded,
  kOutOfMemory,  // OOM: Redis refuses writes (maxmemory reached, nothing to evict)
  kCount
};

struct Counters {
  std::atomic<uint64_t> timeouts{0};
  std::atomic<uint64_t> connection_errors{0};
  std::atomic<uint64_t> script_errors{0};
  std::atomic<uint64_t> server_errors{0};
  std::atomic<uint64_t> overloaded{0};
  std::atomic<uint64_t> out_of_memory{0};
  std::atomic<uint64_t> script_loads{0};
  std::atomic<uint64_t> moved{0};
  std::atomic<uint64_t> ask{0};
  std::atomic<uint64_t> tryagain{0};
  std::atomic<uint64_t> slot_splits{0};
  std::atomic<uint64_t> reconnects{0};
  std::atomic<uint64_t> topology_refreshes{0};
  std::atomic<uint64_t> expired{0};
  std::atomic<uint64_t> late_replies{0};
  std::atomic<uint64_t> late_applied{0};
  std::atomic<uint64_t> master_switches{0};

  static void add(std::atomic<uint64_t>& c) { c.fetch_add(1, std::memory_order_relaxed); }
};

// At most one log line per kind per second; the lines in between are counted
// and reported with the next one (no log flood while Redis is down).
class ErrorLog {
 public:
  void log(ErrorKind kind, std::string_view message);

 private:
  struct Slot {
    std::atomic<int64_t> last_ms{INT64_MIN / 2};
    std::atomic<uint64_t> suppressed{0};
  };
  std::array<Slot, static_cast<size_t>(ErrorKind::kCount)> slots_;
};

// A cluster's slot map: which master serves each of the 16384 slots.
struct SlotMap {
  std::vector<std::string> nodes;        // "host:port" of each master
  std::array<int16_t, 16384> slot_node;  // index into nodes; -1: not served

  SlotMap() { slot_node.fill(-1); }
  bool covers_all() const;
  int node_index(std::string_view name);  // adds the node if absent
};

// Connections by state: up (answered their handshake), or down (connecting,
// or waiting to reconnect). Connection keeps it.
struct ConnectionGauge {
  std::atomic<int64_t> up{0};
  std::atomic<int64_t> down{0};
};

// Sentinel: the master's "host:port" as the sentinels last named it ("" until
// they have), with a version that a client compares with one load.
class MasterAddress {
 public:
  std::string get() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return node_;
  }
  uint64_t version() const { return version_.load(std::memory_order_acquire); }
  // False when it is the same node.
  bool set(const std::string& node) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (node == node_) return false;
    node_ = node;
    version_.fetch_add(1, std::memory_order_release);
    return true;
  }

 private:
  mutable std::mutex mutex_;
  std::string node_;
  std::atomic<uint64_t> version_{0};
};

class Topology {
 public:
  std::shared_ptr<const SlotMap> snapshot() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return map_;
  }
  uint64_t version() const { return version_.load(std::memory_order_acquire); }
  void publish(std::shared_ptr<const SlotMap> map) {
    std::lock_guard<std::mutex> lock(mutex_);
    map_ = std::move(map);
    version_.fetch_add(1, std::memory_order_release);
  }

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<const SlotMap> map_;
  std::atomic<uint64_t> version_{0};
};

struct Shared {
  RedisStoreOptions options;
  std::vector<Endpoint> seeds;  // with credentials and database filled in; none with a sentinel
  // The credentials, database and TLS of a node named by the cluster or the
  // sentinels (endpoint_for()).
  Endpoint node_defaults;
  // options.sentinel's addresses, with their credentials filled in.
  std::vector<Endpoint> sentinels;
  MasterAddress master;
  // With options.tls.enabled: the files loaded (tls.h); every connection's
  // TLS session is made from it. Null for plain TCP.
  std::shared_ptr<boost::asio::ssl::context> tls;
  Counters counters;
  ConnectionGauge connections;           // to Redis nodes, of every client
  ConnectionGauge sentinel_connections;  // to the sentinels
  // Redis answered a write with OOM: set by any such reply, and by the health
  // check's write probe; cleared by a health check whose probes all wrote.
  std::atomic<bool> writes_refused{false};
  ErrorLog log;
  Topology topology;
  // Asks the internal thread to re-read the slot map, or to ask the sentinels
  // again, soon (debounced there).
  std::function<void()> request_refresh;
  // About the latest time (us) a fixed window of this store was taken at: a
  // reset deletes the counters of the windows around it (RedisStore::reset).
  // The clients raise it a millisecond at a time (Client::note_window_time),
  // so two threads do not write its line on every request.
  std::atomic<int64_t> window_time_us{0};

  bool sentinel() const { return !options.sentinel.master.empty(); }
  // Whether `node` ("host:port") is one of the sentinels.
  bool is_sentinel(std::string_view node) const;
  // Whether the nodes calls go to can change under the store (cluster slots,
  // a sentinel's failover): then a failed call asks for request_refresh.
  bool follows_topology() const { return options.cluster || sentinel(); }

  // Records an OOM reply from `node` (logged, rate-limited).
  void note_writes_refused(const std::string& node, std::string_view message);

  // An endpoint for a node named in CLUSTER SLOTS / MOVED / ASK or by the
  // sentinels, with node_defaults' credentials; a seed or a sentinel named
  // so keeps its own.
  Endpoint endpoint_for(std::string_view name) const;

  // The clock offset of the node named `node` ("host:port"), created on first
  // use. Per node, because each master of a cluster has its own clock; shared
  // by the store's clients, so that the internal thread's health checks serve
  // every worker thread. The reference stays valid as long as this Shared.
  ClockOffset& clock_of(const std::string& node);

 private:
  std::mutex clocks_mutex_;
  std::unordered_map<std::string, std::unique_ptr<ClockOffset>> clocks_;
};

}  // namespace sluice::redis
