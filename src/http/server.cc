#include "http/server.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <functional>
#include <latch>
#include <string>
#include <utility>

#include <spdlog/spdlog.h>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/post.hpp>

#include "http/drained_reads.h"
#include "observe/denial_log.h"
#include "observe/logging.h"
#include "observe/process_metrics.h"
#include "policy/config_loader.h"
#include "policy/connection_limits.h"
#include "sluice/version.h"

namespace sluice::http {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

// Store latency buckets: 1 µs .. 100 ms (the memory store answers in well
// under a microsecond; Redis in hundreds of microseconds).
const std::vector<uint64_t> kLatencyBoundsNs = {1'000,      5'000,      10'000,     50'000,
                                                100'000,    500'000,    1'000'000,  5'000'000,
                                                10'000'000, 50'000'000, 100'000'000};

std::string describe_limits(const std::vector<policy::RouteLimit>& limits) {
  std::string out;
  for (const policy::RouteLimit& l : limits) {
    if (!out.empty()) out += "; ";
    if (l.named_policy) out += cat({"policy ", l.name, " = "});
    out += l.limit.describe();
  }
  return out.empty() ? "no limits" : out;
}

std::string store_text(const policy::StoreConfig& s) {
  if (s.backend == policy::StoreConfig::Backend::kMemory) {
    return cat({"memory (max_keys ", std::to_string(s.max_keys), ")"});
  }
  std::string out = s.redis.cluster ? "redis cluster" : "redis";
  if (s.redis.tls.enabled) out += " over TLS";
  for (const policy::HostPort& a : s.redis.addresses) out += cat({" ", a.text()});
  if (!s.redis.sentinel.master.empty())
    out += cat({" master '", s.redis.sentinel.master, "' from sentinels"});
  out += cat({" (database ", std::to_string(s.redis.database), ", timeout ",
              std::to_string(s.redis.timeout.count()), " ms, time from ",
              s.redis.time_source_redis ? "redis" : "local clock",
              s.redis.deny_cache ? ", deny cache" : "",
              s.redis.mode_cached ? cat({", cached mode, sync every ",
                                         std::to_string(s.redis.sync_interval.count()), " ms"})
                                  : std::string(),
              ")"});
  return out;
}

bool same_store(const policy::StoreConfig& a, const policy::StoreConfig& b) {
  if (a.backend != b.backend || a.max_keys != b.max_keys) return false;
  if (a.redis.addresses.size() != b.redis.addresses.size()) return false;
  for (size_t i = 0; i < a.redis.addresses.size(); ++i) {
    if (a.redis.addresses[i].text() != b.redis.addresses[i].text()) return false;
  }
  // on_failure is read per request from the State: a reload changes it.
  // TLS settings are compared as written (paths): new files at the same
  // paths are read when the store is next made, not on this reload.
  return a.redis.cluster == b.redis.cluster && a.redis.username == b.redis.username &&
         a.redis.password == b.redis.password && a.redis.database == b.redis.database &&
         a.redis.timeout == b.redis.timeout &&
         a.redis.time_source_redis == b.redis.time_source_redis && a.redis.tls == b.redis.tls &&
         a.redis.deny_cache == b.redis.deny_cache && a.redis.mode_cached == b.redis.mode_cached &&
         a.redis.sync_interval == b.redis.sync_interval && a.redis.sentinel == b.redis.sentinel;
}

std::string endpoint_text(const tcp::endpoint& e) {
  const std::string host = e.address().to_string();
  return e.address().is_v6() ? cat({"[", host, "]:", std::to_string(e.port())})
                             : cat({host, ":", std::to_string(e.port())});
}

}  // namespace

// ---------------------------------------------------------------- Worker

struct Server::Worker {
  Worker() : io_context(1), guard(io_context.get_executor()) {}
  // Destroyed in reverse: the doors (and the forwarder's sockets) before the
  // io_context, the io_context (and the sessions its handlers own) before
  // the registry those sessions leave.
  SessionRegistry registry;
  asio::io_context io_context;
  asio::executor_work_guard<asio::io_context::executor_type> guard;
  std::unique_ptr<FrontDoor> front_door;     // `listen`
  std::unique_ptr<FrontDoor> decision_door;  // `decision_api.listen`
  std::thread thread;
};

// ---------------------------------------------------------------- Listener

// One acceptor, accepting on the thread of `io` and starting each session
// there (`serve`). A public port has one Listener per worker: a connection is
// accepted and served by the same thread, with no hand-off between threads.
// With several workers each has a listening socket of its own on the port
// (SO_REUSEPORT, join()), and the kernel spreads new connections over them by
// a hash of their addresses. One socket shared by all (as before) woke every
// worker for each connection and left them to race for it: the first awake
// accepted everything queued, so under keep-alive load one worker served all
// connections while the others idled (bench/results/2026-gateway.md, "CPU per
// request and the two-worker tail").
// The first socket binds without SO_REUSEPORT, so a port already taken (a
// second `sluice serve` on it, say) still fails at bind; it sets the option
// before listen() so that the other workers' sockets can join it. Above
// `max_open` open connections (all ports), a new one is answered 503 and
// closed at once, counted and logged at most once a second (per Listener).
class Server::Listener {
 public:
  using Serve = std::function<void(tcp::socket, ConnectionTicket)>;
  using ReusePort = asio::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;

  Listener(asio::io_context& io, std::string name, ServerContext& context,
           std::atomic<size_t>& open, size_t max_open, Serve serve)
      : acceptor_(io),
        retry_timer_(io),
        name_(std::move(name)),
        context_(context),
        open_(open),
        max_open_(max_open),
        serve_(std::move(serve)) {}

  // `group`: other workers' Listeners will join() this one.
  Status bind(const policy::HostPort& where, bool group) {
    boost::system::error_code ec;
    asio::ip::address address = asio::ip::make_address(where.host, ec);
    if (ec) {
      tcp::resolver resolver(acceptor_.get_executor());
      auto results =
          resolver.resolve(where.host, std::to_string(where.port), tcp::resolver::passive, ec);
      if (ec || results.empty()) {
        return Error{ErrorCode::kInvalidArgument,
                     cat({"cannot resolve ", name_, " address ", where.text(), ": ",
                          ec ? ec.message() : std::string("no address")})};
      }
      address = results.begin()->endpoint().address();
    }
    const tcp::endpoint endpoint(address, where.port);
    auto fail = [&](const char* what) {
      return Status(
          Error{ErrorCode::kInvalidArgument,
                cat({"cannot ", what, " ", name_, " address ", where.text(), ": ", ec.message()})});
    };
    if (acceptor_.open(endpoint.protocol(), ec)) return fail("open");
    if (acceptor_.set_option(tcp::acceptor::reuse_address(true), ec)) return fail("configure");
    if (acceptor_.bind(endpoint, ec)) return fail("bind");
    if (group && acceptor_.set_option(ReusePort(true), ec)) return fail("configure");
    if (acceptor_.listen(asio::socket_base::max_listen_connections, ec)) return fail("listen on");
    report_receive_queue();
    return {};
  }

  // Listens on the port of `first` (bound with `group`) with a socket of its
  // own in the same SO_REUSEPORT group, from this Listener's thread.
  Status join(Listener& first) {
    boost::system::error_code ec;
    const tcp::endpoint endpoint = first.local_endpoint();
    auto fail = [&](const char* what) {
      return Status(Error{ErrorCode::kInvalidArgument,
                          cat({"cannot ", what, " a worker's ", name_, " socket on ",
                               endpoint_text(endpoint), ": ", ec.message()})});
    };
    if (acceptor_.open(endpoint.protocol(), ec)) return fail("open");
    if (acceptor_.set_option(tcp::acceptor::reuse_address(true), ec) ||
        acceptor_.set_option(ReusePort(true), ec)) {
      return fail("configure");
    }
    if (acceptor_.bind(endpoint, ec)) return fail("bind");
    if (acceptor_.listen(asio::socket_base::max_listen_connections, ec)) return fail("listen on");
    report_receive_queue();
    return {};
  }

  // Accepted sockets inherit the option: their reads then know when they
  // drained the socket (drained_reads.h). Without it they read as Asio does.
  void report_receive_queue() {
    boost::system::error_code ignored;
    acceptor_.set_option(ReportReceiveQueue(true), ignored);
  }

  tcp::endpoint local_endpoint() const {
    boost::system::error_code ec;
    return acceptor_.local_endpoint(ec);
  }

  // Both on the acceptor's own thread (a worker's, or the control thread).
  void start() {
    asio::post(acceptor_.get_executor(), [this] { do_accept(); });
  }
  // The socket stops taking connections now (shutdown is safe from any
  // thread); the acceptor closes on its thread.
  void stop() {
    stopped_.store(true);
    ::shutdown(acceptor_.native_handle(), SHUT_RDWR);
    asio::post(acceptor_.get_executor(), [this] {
      boost::system::error_code ec;
      acceptor_.close(ec);
      retry_timer_.cancel();
    });
  }

 private:
  void do_accept() {
    acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted || stopped_.load() || !acceptor_.is_open()) return;
      if (ec) {
        // Out of descriptors or memory: back off instead of spinning; the
        // pending connections wait in the backlog.
        spdlog::error("accept on {} failed: {}; retrying in 100 ms", name_, ec.message());
        retry_timer_.expires_after(std::chrono::milliseconds(100));
        retry_timer_.async_wait([this](boost::system::error_code e) {
          if (!e) do_accept();
        });
        return;
      }
      if (open_.load(std::memory_order_relaxed) >= max_open_) {
        refuse(socket);
      } else {
        serve_(std::move(socket), ConnectionTicket(open_));
      }
      do_accept();
    });
  }

  // The socket was just accepted: its send buffer is empty, so the short
  // answer leaves in one non-blocking write (or not at all: nobody waits).
  void refuse(tcp::socket& socket) {
    static constexpr std::string_view k503 =
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
        "Connection: close\r\nContent-Length: 86\r\n\r\n"
        R"({"error":{"code":"TOO_MANY_CONNECTIONS","message":"the server is at max_connections"}})";
    static_assert(k503.size() - k503.find("\r\n\r\n") - 4 == 86);
    context_.metrics.connections_refused->add();
    boost::system::error_code ignored;
    socket.non_blocking(true, ignored);
    socket.write_some(asio::buffer(k503.data(), k503.size()), ignored);
    socket.shutdown(tcp::socket::shutdown_both, ignored);
    socket.close(ignored);
    const observe::DenialLogGate::Admission a = refusal_log_.admit(context_.clock.now());
    if (a.log) {
      spdlog::warn("{}: connection refused, {} connections open (server.max_connections){}", name_,
                   open_.load(std::memory_order_relaxed),
                   a.suppressed_before == 0 ? std::string()
                                            : cat({" (", std::to_string(a.suppressed_before),
                                                   " refusals not logged before this one)"}));
    }
  }

  tcp::acceptor acceptor_;
  asio::steady_timer retry_timer_;
  std::string name_;
  ServerContext& context_;
  std::atomic<size_t>& open_;  // the connections of the ports max_open_ bounds
  const size_t max_open_;
  observe::DenialLogGate refusal_log_{1.0};
  Serve serve_;
  std::atomic<bool> stopped_{false};
};

// ---------------------------------------------------------------- Server

Server::Server(policy::Config config, std::shared_ptr<Store> store, ServerOptions options)
    : options_(std::move(options)),
      store_(std::move(store)),
      context_(*store_, SystemClock::instance()),
      admin_handler_(
          context_, [this] { return reload(); },
          [this] {
            return options_.companion != nullptr ? options_.companion->rls_config_json()
                                                 : std::nullopt;
          },
          [this] {
            return options_.companion != nullptr ? options_.companion->not_ready() : std::nullopt;
          }),
      signals_(control_),
      maintain_timer_(control_),
      drain_timer_(control_) {
  observe::Registry& r = context_.registry;
  ServerMetrics& m = context_.metrics;
  m.store_latency = r.histogram("sluice_store_latency_seconds",
                                "Time the store took to decide one request.", {}, kLatencyBoundsNs);
  m.store_errors = r.counter("sluice_store_errors_total",
                             "Decisions the store could not make (on_failure applied).", {});
  context_.decision_sinks = {m.store_latency, m.store_errors, &context_.top_denied,
                             &context_.history};
  const char* reloads_help = "Config reloads, by result.";
  m.reload_success =
      r.counter("sluice_config_reloads_total", reloads_help, {{"result", "success"}});
  m.reload_failure =
      r.counter("sluice_config_reloads_total", reloads_help, {{"result", "failure"}});
  const char* watch_help =
      "Checks of the watched config files after a change on disk (watch_config), by result: "
      "reloaded or refused (also counted in sluice_config_reloads_total), unchanged.";
  const char* watch_checks = "sluice_config_watch_checks_total";
  watch_reloaded_ = r.counter(watch_checks, watch_help, {{"result", "reloaded"}});
  watch_refused_ = r.counter(watch_checks, watch_help, {{"result", "refused"}});
  watch_unchanged_ = r.counter(watch_checks, watch_help, {{"result", "unchanged"}});
  watched_files_ = options_.watched_files;
  const char* rejected_help = "Requests refused before any decision, by reason.";
  const char* rejected = "sluice_http_rejected_total";
  m.rejected_bad_request = r.counter(rejected, rejected_help, {{"reason", "bad_request"}});
  m.rejected_header_too_large =
      r.counter(rejected, rejected_help, {{"reason", "header_too_large"}});
  m.rejected_body_too_large = r.counter(rejected, rejected_help, {{"reason", "body_too_large"}});
  m.rejected_timeout = r.counter(rejected, rejected_help, {{"reason", "timeout"}});
  m.rejected_access_denied = r.counter(rejected, rejected_help, {{"reason", "access_denied"}});
  m.rejected_unknown_consumer =
      r.counter(rejected, rejected_help, {{"reason", "unknown_consumer"}});
  m.connections_refused =
      r.counter("sluice_connections_refused_total",
                "Connections closed at accept because server.max_connections were open.", {});
  m.tls_handshake_failed = r.counter(
      "sluice_tls_handshake_failures_total",
      "TLS connections closed because their handshake failed or timed out (no request read).", {});
  m.held = r.counter("sluice_held_requests_total",
                     "Requests held for their turn (a route's delay) before going on.", {});
  m.held_gave_up = r.counter(
      "sluice_held_requests_gave_up_total",
      "Held requests whose client closed the connection before their turn (charge given back).",
      {});
  m.held_refused = r.counter("sluice_held_requests_refused_total",
                             "Requests a route's delay would have held, answered at once because "
                             "server.max_held requests were held.",
                             {});
  m.tls_handshakes_dropped =
      r.counter("sluice_tls_handshakes_dropped_total",
                "Unfinished TLS handshakes closed to make room for a new one "
                "(server.max_tls_handshakes).",
                {});
  m.http2_rapid_resets =
      r.counter("sluice_http2_rapid_resets_total",
                "HTTP/2 connections ended with GOAWAY because the client reset streams "
                "before their answer faster than allowed (CVE-2023-44487).",
                {});
  Store* s = store_.get();
  r.gauge("sluice_keys_held", "Limit states held by the store.", {},
          [s] { return static_cast<double>(s->observed_size()); });
  r.gauge("sluice_store_ready", "1 while the store answers (Redis reachable), else 0 (/readyz).",
          {}, [s] { return s->ready() ? 1.0 : 0.0; });
  ServerContext* c = &context_;
  r.gauge("sluice_open_connections", "Client connections open (listen and admin ports).", {},
          [c] { return static_cast<double>(c->open_connections()); });
  r.gauge("sluice_held_requests", "Requests held for their turn now (a route's delay).", {},
          [c] { return static_cast<double>(c->held_requests.load(std::memory_order_relaxed)); });
  r.gauge("sluice_tls_handshakes", "TLS handshakes in progress on listen.", {},
          [c] { return static_cast<double>(c->tls_handshakes.load(std::memory_order_relaxed)); });
  r.gauge("sluice_config_generation", "Generation of the config in force (1 = as started).", {},
          [c] { return static_cast<double>(c->state.load()->generation); });

  observe::register_process_metrics(r);
  observe::register_build_info(r, kVersion);
  if (options_.companion != nullptr) {
    options_.companion->register_metrics(r, context_.decision_sinks);
  }
  if (options_.store_hooks.register_metrics) options_.store_hooks.register_metrics(r);

  context_.state.store(
      build_state(std::move(config), generation_, context_.registry, context_.decision_sinks));

  const policy::Config& cfg = context_.state.load()->policy.config();
  max_connections_ = policy::max_connections_in_force(cfg);
  context_.max_connections = max_connections_;
  size_t threads = cfg.server.threads;
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  for (size_t i = 0; i < threads; ++i) {
    auto worker = std::make_unique<Worker>();
    std::unique_ptr<Forwarder> forwarder;
    if (options_.make_forwarder) forwarder = options_.make_forwarder(worker->io_context);
    worker->front_door =
        std::make_unique<FrontDoor>(context_, FrontDoor::Port::kListen, std::move(forwarder));
    worker->decision_door =
        std::make_unique<FrontDoor>(context_, FrontDoor::Port::kDecisionApi, nullptr);
    workers_.push_back(std::move(worker));
  }
}

Server::~Server() {
  for (auto& w : workers_) {
    w->io_context.stop();
    if (w->thread.joinable()) w->thread.join();
  }
  if (options_.companion != nullptr) options_.companion->end_metrics();
}

Status Server::start() {
  const policy::Config& cfg = context_.state.load()->policy.config();
  // A public port: one Listener per worker on one listening socket. `tls`:
  // the port speaks TLS when the State in force at the accept has a TLS
  // context (`listen` only; the decision API's own port stays plain).
  const auto listen_in_workers = [this](const char* name, const policy::HostPort& where,
                                        std::unique_ptr<FrontDoor> Worker::*door, bool tls,
                                        std::vector<std::unique_ptr<Listener>>* out) -> Status {
    for (auto& w : workers_) {
      Worker* worker = w.get();
      auto listener = std::make_unique<Listener>(
          worker->io_context, name, context_, context_.public_connections, max_connections_,
          [this, worker, door, tls](tcp::socket socket, ConnectionTicket ticket) {
            std::make_shared<Session>(std::move(socket), std::move(ticket), context_,
                                      *(worker->*door), worker->registry, false,
                                      tls ? context_.state.load()->tls : nullptr)
                ->start();
          });
      Status st =
          out->empty() ? listener->bind(where, workers_.size() > 1) : listener->join(*out->front());
      if (!st.ok()) return st;
      out->push_back(std::move(listener));
    }
    return {};
  };
  if (Status st =
          listen_in_workers("listen", cfg.listen, &Worker::front_door, true, &front_listeners_);
      !st.ok()) {
    return st;
  }
  if (cfg.decision_api.listen) {
    if (Status st = listen_in_workers("decision_api", *cfg.decision_api.listen,
                                      &Worker::decision_door, false, &decision_listeners_);
        !st.ok()) {
      return st;
    }
  }
  admin_listener_ = std::make_unique<Listener>(
      control_, "admin", context_, context_.admin_connections, policy::kAdminConnections,
      [this](tcp::socket socket, ConnectionTicket ticket) {
        std::make_shared<Session>(std::move(socket), std::move(ticket), context_, admin_handler_,
                                  admin_sessions_, true)
            ->start();
      });
  if (Status st = admin_listener_->bind(cfg.admin, false); !st.ok()) return st;
  return {};
}

int Server::run() {
  signals_.add(SIGINT);
  signals_.add(SIGTERM);
  signals_.add(SIGHUP);
  do_signal_wait();
  schedule_maintain();
  std::latch attached(static_cast<std::ptrdiff_t>(workers_.size()));
  for (auto& w : workers_) {
    Worker* worker = w.get();
    worker->thread = std::thread([worker, hooks = &options_.store_hooks, &attached] {
      if (hooks->attach) hooks->attach(worker->io_context);
      attached.count_down();
      for (;;) {
        try {
          worker->io_context.run();
          break;
        } catch (const std::exception& e) {
          spdlog::error("worker thread: unexpected exception: {}", e.what());
        }
      }
      if (hooks->detach) hooks->detach(worker->io_context);
    });
  }
  attached.wait();
  if (options_.store_hooks.wait_ready) options_.store_hooks.wait_ready();
  for (auto& l : front_listeners_) l->start();
  for (auto& l : decision_listeners_) l->start();
  admin_listener_->start();
  log_startup();
  follow_watch(context_.state.load()->policy.config().watch_config);
  for (;;) {
    try {
      control_.run();
      break;
    } catch (const std::exception& e) {
      spdlog::error("control thread: unexpected exception: {}", e.what());
    }
  }
  for (auto& w : workers_) {
    w->io_context.stop();
    if (w->thread.joinable()) w->thread.join();
  }
  if (cut_by_signal_ != 0) {
    spdlog::warn("stopped before the drain finished (exit code {})", 128 + cut_by_signal_);
    return 128 + cut_by_signal_;
  }
  spdlog::info("stopped");
  return 0;
}

void Server::log_startup() const {
  const std::shared_ptr<const State> state = context_.state.load();
  const policy::Config& c = state->policy.config();
  spdlog::info("sluice {} serving, config {}", kVersion, c.source);
  const std::string listen = std::string(c.tls ? "https://" : "http://") +
                             endpoint_text(front_listeners_.front()->local_endpoint());
  if (c.upstream) {
    spdlog::info("listening on {} (gateway to {})", listen, c.upstream->url);
  } else if (c.decision_api.listen) {
    spdlog::info(
        "listening on {} (decision-only: every path answers {{\"allowed\":true}} "
        "or 429)",
        listen);
  } else {
    spdlog::info(
        "listening on {} (decision API: /v1/check, /v1/auth; other paths "
        "answer {{\"allowed\":true}} or 429)",
        listen);
  }
  if (!decision_listeners_.empty()) {
    spdlog::info("decision API on http://{} (/v1/check, /v1/auth{})",
                 endpoint_text(decision_listeners_.front()->local_endpoint()),
                 c.decision_api.token.empty() ? "" : "; bearer token required");
  } else if (c.upstream) {
    spdlog::info(
        "/v1/check and /v1/auth are not served: the gateway's public port proxies them "
        "like any path (set decision_api.listen to serve them)");
  }
  spdlog::info("admin on http://{} (/healthz /readyz /metrics /dashboard /admin/*{})",
               endpoint_text(admin_listener_->local_endpoint()),
               c.admin_access.read_only       ? "; read-only: no POST, PUT or DELETE"
               : c.admin_access.token.empty() ? "; never expose it"
                                              : "; bearer token required");
  spdlog::info("{} worker thread(s), store {}, at most {} connections", workers_.size(),
               store_text(c.store), max_connections_);
  for (const policy::Route& r : c.routes) {
    spdlog::info("route \"{}\" key {}: {}", r.name, r.key.text, describe_limits(r.limits));
  }
  if (c.default_route) {
    spdlog::info("default key {}: {}", c.default_route->key.text,
                 describe_limits(c.default_route->limits));
  } else {
    spdlog::info("no default route: requests matching no route are not limited");
  }
  for (const policy::NamedPolicy& p : c.policies) {
    spdlog::info("policy \"{}\": {}", p.name, p.limit.describe());
  }
}

void Server::follow_watch(bool enabled) {
  if (!enabled || shutting_down_) {
    if (watch_) {
      spdlog::info("watch_config is off: changes on disk wait for SIGHUP");
      // Destroyed once the current handler returns: this may run inside
      // the watch's own check.
      asio::post(control_, [gone = std::move(watch_)] {});
    }
    return;
  }
  const bool started = !watch_;
  if (started) {
    watch_ = std::make_unique<ConfigWatch>(
        control_, options_.watch_debounce,
        [this](const std::vector<std::string>& changed) { on_watch_check(changed); });
  }
  watch_->watch(watched_files_);
  if (started) {
    spdlog::info("watch_config: watching {} file(s) and folder(s) in {} folder(s)",
                 watched_files_.size(), watch_->folder_count());
  }
}

void Server::on_watch_check(const std::vector<std::string>& changed) {
  if (changed.empty()) {
    watch_unchanged_->add();
    return;
  }
  std::string names;
  for (const std::string& path : changed) names += cat({names.empty() ? "" : ", ", path});
  spdlog::info("watch_config: {} changed on disk; reloading", names);
  const ReloadOutcome outcome = reload();
  admin_handler_.note_reload(outcome);
  (outcome.ok ? watch_reloaded_ : watch_refused_)->add();
}

void Server::do_signal_wait() {
  signals_.async_wait([this](boost::system::error_code ec, int signal) {
    if (ec) return;
    if (signal == SIGHUP) {
      spdlog::info("SIGHUP: reloading {}", options_.config_path);
      admin_handler_.note_reload(reload());
    } else if (shutting_down_) {
      spdlog::warn("second {}: stopping now", signal == SIGINT ? "SIGINT" : "SIGTERM");
      cut_by_signal_ = signal;
      for (auto& w : workers_) w->io_context.stop();
      control_.stop();
      return;
    } else {
      begin_shutdown(signal == SIGINT ? "SIGINT" : "SIGTERM");
    }
    do_signal_wait();
  });
}

void Server::schedule_maintain() {
  maintain_timer_.expires_after(options_.maintain_interval);
  maintain_timer_.async_wait([this](boost::system::error_code ec) {
    if (ec) return;
    store_->maintain(context_.clock.now());
    schedule_maintain();
  });
}

ReloadOutcome Server::reload() {
  ReloadOutcome outcome;
  LoadedConfig loaded;
  try {
    if (options_.load_config) {
      loaded = options_.load_config();
    } else {
      policy::LoadResult result = policy::load_config_file(options_.config_path);
      loaded.config = std::move(result.config);
      loaded.errors = std::move(result.errors);
      loaded.files = std::move(result.files);
    }
  } catch (const std::exception& e) {
    loaded.config.reset();
    loaded.errors.emplace_back(options_.config_path, 0, 0, e.what());
  }
  // A refused config keeps the files in force watched and adds the ones it
  // named (the file to fix may be one of them); one in force replaces them.
  const bool watching = context_.state.load()->policy.config().watch_config;
  auto watch_refused_files = [&] {
    for (const std::string& f : loaded.files) {
      if (std::find(watched_files_.begin(), watched_files_.end(), f) == watched_files_.end()) {
        watched_files_.push_back(f);
      }
    }
    follow_watch(watching);
  };
  if (!loaded.config) {
    watch_refused_files();
    for (const config::ConfigError& e : loaded.errors) {
      outcome.errors.push_back(e.text());
      spdlog::error("reload: {}", e.text());
    }
    context_.metrics.reload_failure->add();
    outcome.generation = generation_;
    spdlog::error("reload refused ({} error(s)); generation {} stays in force",
                  loaded.errors.size(), generation_);
    return outcome;
  }
  const std::shared_ptr<const State> old = context_.state.load();
  const policy::Config& before = old->policy.config();
  const policy::Config& after = *loaded.config;
  auto restart_needed = [](const char* what, const std::string& from, const std::string& to) {
    if (from != to) {
      spdlog::warn("reload: {} changed from {} to {}; this takes effect only after a restart", what,
                   from, to);
    }
  };
  restart_needed("listen", before.listen.text(), after.listen.text());
  restart_needed("admin", before.admin.text(), after.admin.text());
  restart_needed("grpc", before.grpc ? before.grpc->text() : "none",
                 after.grpc ? after.grpc->text() : "none");
  restart_needed("decision_api.listen",
                 before.decision_api.listen ? before.decision_api.listen->text() : "none",
                 after.decision_api.listen ? after.decision_api.listen->text() : "none");
  restart_needed("server.threads", std::to_string(before.server.threads),
                 std::to_string(after.server.threads));
  restart_needed("server.max_connections", std::to_string(before.server.max_connections),
                 std::to_string(after.server.max_connections));
  if (!same_store(before.store, after.store)) {
    restart_needed("store", store_text(before.store),
                   store_text(after.store) + " (or its options)");
  }
  std::shared_ptr<const State> next;
  try {
    next = build_state(std::move(*loaded.config), generation_ + 1, context_.registry,
                       context_.decision_sinks);
  } catch (const std::exception& e) {
    outcome.errors.emplace_back(e.what());
    spdlog::error("reload: {}", e.what());
    context_.metrics.reload_failure->add();
    outcome.generation = generation_;
    spdlog::error("reload refused; generation {} stays in force", generation_);
    watch_refused_files();
    return outcome;
  }
  ++generation_;
  context_.state.store(next);
  if (options_.companion != nullptr) options_.companion->commit_reload();
  watched_files_ = std::move(loaded.files);
  follow_watch(next->policy.config().watch_config);
  if (!observe::set_log_level(next->policy.config().logging.level)) {
    spdlog::warn("reload: unknown logging.level \"{}\", using info",
                 next->policy.config().logging.level);
  }
  observe::set_log_format(next->policy.config().logging.format);
  context_.metrics.reload_success->add();
  const policy::Config& c = next->policy.config();
  spdlog::info("reloaded {}: generation {}, {} route(s){}, {} named polic{}", c.source, generation_,
               c.routes.size(), c.default_route ? " + default" : "", c.policies.size(),
               c.policies.size() == 1 ? "y" : "ies");
  for (const policy::Route& r : c.routes) {
    spdlog::info("route \"{}\" key {}: {}", r.name, r.key.text, describe_limits(r.limits));
  }
  outcome.ok = true;
  outcome.generation = generation_;
  return outcome;
}

void Server::begin_shutdown(const char* why) {
  if (shutting_down_) return;
  shutting_down_ = true;
  const auto grace = context_.state.load()->policy.config().server.shutdown_grace;
  spdlog::info("{}: no longer accepting; draining {} connection(s) for up to {} ms", why,
               context_.open_connections(), grace.count());
  for (auto& l : front_listeners_) l->stop();
  for (auto& l : decision_listeners_) l->stop();
  if (admin_listener_) admin_listener_->stop();
  watch_.reset();
  if (options_.companion != nullptr) options_.companion->begin_shutdown(grace);
  maintain_timer_.cancel();
  context_.draining.store(true);
  for (auto& w : workers_) {
    Worker* worker = w.get();
    asio::post(worker->io_context, [worker] {
      const std::vector<Session*> sessions(worker->registry.sessions.begin(),
                                           worker->registry.sessions.end());
      for (Session* s : sessions) s->drain();
    });
  }
  {
    const std::vector<Session*> sessions(admin_sessions_.sessions.begin(),
                                         admin_sessions_.sessions.end());
    for (Session* s : sessions) s->drain();
  }
  drain_deadline_ = std::chrono::steady_clock::now() + grace;
  on_drain_tick();
}

void Server::on_drain_tick() {
  const size_t open = context_.open_connections();
  const bool late = std::chrono::steady_clock::now() >= drain_deadline_;
  const bool companion_busy = options_.companion != nullptr && options_.companion->busy();
  if ((open == 0 && !companion_busy) || late) {
    if (open > 0) {
      spdlog::warn("shutdown grace over: closing {} connection(s) still open", open);
    } else if (companion_busy) {
      spdlog::warn("shutdown grace over: stopping with gRPC calls still in flight");
    } else {
      spdlog::info("all connections drained");
    }
    for (auto& w : workers_) w->io_context.stop();
    signals_.cancel();
    control_.stop();
    return;
  }
  drain_timer_.expires_after(std::chrono::milliseconds(10));
  drain_timer_.async_wait([this](boost::system::error_code ec) {
    if (!ec) on_drain_tick();
  });
}

}  // namespace sluice::http
