// Server: `sluice serve`. Owns the threads, the listeners, the store and the
// current State; reloads and shuts down.
//
// Threads: one worker thread per core (server.threads, 0 = hardware
// concurrency), each running its own io_context with the sessions it was
// accepted; and the control thread (the caller of run()) running an io_context
// with the admin port, signals, reloads and periodic store upkeep. Each
// worker accepts on the public ports itself, on a listening socket of its own
// (one SO_REUSEPORT group per port, whose first socket binds without the
// option, so two servers still cannot share a port by accident: see
// Server::Listener in server.cc). No lock is held across I/O: sessions of a worker
// touch only their own io_context's data, and the config is one
// atomic<shared_ptr<const State>> swapped by reloads.
//
// Signals: SIGHUP reloads (so does a change on disk, with `watch_config`:
// http/config_watch.h); SIGTERM and SIGINT stop accepting, let requests in
// flight finish (up to server.shutdown_grace), then run() returns 0.
//
// Thread-safety: construct, start() and run() from one thread; reload() and
// begin_shutdown() are called on the control thread (by signals and the admin port).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "http/admin.h"
#include "http/config_watch.h"
#include "http/context.h"
#include "http/forwarder.h"
#include "http/front_door.h"
#include "http/session.h"
#include "observe/metrics.h"
#include "observe/route_metrics.h"
#include "policy/config.h"
#include "sluice/result.h"
#include "sluice/store.h"

namespace sluice::http {

// Something served beside the HTTP ports (the Envoy RLS gRPC API, wired by
// `sluice serve`), reloaded and stopped with the server. Its methods run on
// the control thread.
class Companion {
 public:
  virtual ~Companion() = default;
  // Called once by the Server's constructor: add the companion's series;
  // its decisions count also in `sinks` (the server's store latency and
  // errors, top denied keys) until end_metrics().
  virtual void register_metrics(observe::Registry& registry,
                                const observe::DecisionSinks& sinks) = 0;
  // Called by the Server's destructor once its workers stopped, before
  // the series and sinks go: nothing of the companion counts in them after
  // this returns.
  virtual void end_metrics() {}
  // Right after a reload swapped in a new config: put in force what the
  // companion staged while ServerOptions::load_config loaded it.
  virtual void commit_reload() = 0;
  // Shutdown began: stop taking new work and finish within `grace`. May
  // return at once; the companion's owner waits for the end.
  virtual void begin_shutdown(std::chrono::milliseconds grace) = 0;
  // Work in flight that may still need the worker loops (RLS calls decided
  // there on the Redis store): while true, the drain keeps the workers
  // running, as it does for open connections (never past the grace).
  virtual bool busy() const { return false; }
  // The body of GET /admin/rls: the descriptors in force as JSON, or
  // nothing when the companion serves no RLS API. From the control thread.
  virtual std::optional<std::string> rls_config_json() const { return std::nullopt; }
  // Why the companion cannot serve now (its port cannot accept), for
  // /readyz; nothing while it can. From the control thread.
  virtual std::optional<std::string> not_ready() const { return std::nullopt; }
};

// A config loaded for a reload: the config, or every error that refused it.
struct LoadedConfig {
  std::optional<policy::Config> config;
  std::vector<config::ConfigError> errors;
  // The config file and the files and folders it names
  // (policy::LoadResult::files), also when refused: what watch_config watches.
  std::vector<std::string> files;
};

// What a store that runs its I/O on the workers' event loops (Redis) needs
// from the server. Every member may be empty (the memory store needs none).
struct StoreHooks {
  // On each worker thread, with its io_context, before the worker serves.
  std::function<void(boost::asio::io_context&)> attach;
  // On each worker thread after its loop stopped, before its io_context is
  // destroyed (calls still in flight complete there, as failures).
  std::function<void(boost::asio::io_context&)> detach;
  // Once, by the Server's constructor: the store's own series (errors by kind).
  std::function<void(observe::Registry&)> register_metrics;
  // Once, on the control thread, after every worker attached and before the
  // listeners accept: waits (bounded) for the store's connections.
  std::function<void()> wait_ready;
};

struct ServerOptions {
  std::string config_path;  // named in the log on reload
  // Loads the config again, for SIGHUP and POST /admin/reload (whatever
  // else it needs, the RLS descriptor files, loaded with it: all or nothing).
  // Unset: policy::load_config_file(config_path).
  std::function<LoadedConfig()> load_config;
  StoreHooks store_hooks;
  // Builds each worker's gateway proxy; unset: allowed gateway requests get 502.
  ForwarderFactory make_forwarder;
  // How often the control thread calls Store::maintain (the memory store
  // drops the states that are full again).
  std::chrono::milliseconds maintain_interval{1000};
  // Reloaded and stopped with the server; must outlive it. May be null.
  Companion* companion = nullptr;
  // The files the startup load read (LoadedConfig::files), watched when the
  // config has watch_config; and how long the files must be quiet before a
  // change on disk is checked (one burst of writes, one reload).
  std::vector<std::string> watched_files;
  std::chrono::milliseconds watch_debounce{200};
};

class Server {
 public:
  // `store` holds the limit states for the process lifetime (reloads keep it).
  Server(policy::Config config, std::shared_ptr<Store> store, ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the listen and admin ports. Errors name the address and the reason.
  Status start();
  // Serves until SIGTERM/SIGINT (or begin_shutdown()) and the drain; returns
  // the process exit code (0).
  int run();

  ReloadOutcome reload();
  void begin_shutdown(const char* why);

 private:
  struct Worker;
  class Listener;

  void log_startup() const;
  // Watches what watched_files_ names while `enabled` (the config in
  // force's watch_config), stops watching otherwise.
  void follow_watch(bool enabled);
  // A ConfigWatch check: reload when a watched file changed.
  void on_watch_check(const std::vector<std::string>& changed);
  void do_signal_wait();
  void schedule_maintain();
  void on_drain_tick();

  ServerOptions options_;
  std::shared_ptr<Store> store_;
  ServerContext context_;
  SessionRegistry admin_sessions_;
  // Declared before the listeners, which accept on their io_contexts (and so
  // must go first).
  std::vector<std::unique_ptr<Worker>> workers_;
  boost::asio::io_context control_{1};
  AdminHandler admin_handler_;
  std::vector<std::unique_ptr<Listener>> front_listeners_;     // one per worker
  std::vector<std::unique_ptr<Listener>> decision_listeners_;  // decision_api.listen, when set
  std::unique_ptr<Listener> admin_listener_;                   // on the control thread
  size_t max_connections_ = 0;  // server.max_connections, or derived from the fd limit
  boost::asio::signal_set signals_;
  boost::asio::steady_timer maintain_timer_;
  boost::asio::steady_timer drain_timer_;
  std::chrono::steady_clock::time_point drain_deadline_;
  bool shutting_down_ = false;
  // The signal that cut the drain short (a second SIGTERM/SIGINT), 0 if none:
  // run() then returns 128 + it, so a supervisor can tell a cut drain from a
  // graceful one.
  int cut_by_signal_ = 0;
  uint64_t generation_ = 1;
  // watch_config: the files of the config in force, and of refused loads
  // since (so fixing the file a refused config named is seen too).
  std::vector<std::string> watched_files_;
  std::unique_ptr<ConfigWatch> watch_;
  // sluice_config_watch_checks_total{result}: reloaded, refused, unchanged.
  observe::Counter* watch_reloaded_ = nullptr;
  observe::Counter* watch_refused_ = nullptr;
  observe::Counter* watch_unchanged_ = nullptr;
};

}  // namespace sluice::http
