// AdminHandler: the requests of the `admin` port. It can reload the config
// and reset keys, so before anything else (docs/CONFIG.md):
//   a Host other than the admin address, localhost or admin_hosts  -> 421
//   a POST, PUT or DELETE whose Origin is another site               -> 403
//   with admin_token_file: a POST, PUT or DELETE, or any /admin/consumers
//   request (every endpoint with admin_token_all, but the dashboard's
//   files) without the bearer token                                  -> 401
//   a POST or PUT body that is not Content-Type: application/json   -> 415
//
//   GET  /healthz        200 "ok" while the process serves
//   GET  /readyz         200 when the store answers and the gRPC port can
//                        accept, else 503 with the reasons
//   GET  /metrics        Prometheus text format
//   GET  /admin/stats    JSON: version, uptime, store backend and readiness,
//                        config reloads, per-route allowed/denied/errors, top denied keys
//   GET  /admin/history?seconds=N   JSON: decisions per route in each of the last N
//                        whole seconds, N 1..900 (admin_history.h)
//   GET  /admin/rls      JSON: the Envoy RLS descriptors in force (domains, rules,
//                        nested descriptors); 404 when no RLS API is configured
//   GET  /dashboard      the live dashboard (web/, embedded; see http/dashboard.h)
//   POST /admin/reload   reload the config file; 400 with every error when refused
//   POST /admin/reset    {"policy":"login","key":"user:42"} or
//                        {"route":"GET /api/x","client":"192.0.2.1"}: forget one
//                        client's state (client: an IP, a header value, or the
//                        key as Sluice forms it); 404 NO_STATE when there was none
//   GET|PUT|DELETE /admin/consumers/<id>   a consumer's plan (admin_consumers.h); the
//                        file is written on a thread of its own (consumers_writer.h)
//
// Thread-safety: runs on the control thread (one io_context), like reloads.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "http/admin_consumers.h"
#include "http/consumers_writer.h"
#include "http/context.h"
#include "http/session.h"

namespace sluice::http {

struct ReloadOutcome {
  bool ok = false;
  uint64_t generation = 0;          // the generation in force afterwards
  std::vector<std::string> errors;  // "file:line:col: message" when refused
};

class AdminHandler final : public RequestHandler {
 public:
  using ReloadFunction = std::function<ReloadOutcome()>;
  // The body of GET /admin/rls, or nothing when no RLS API is served.
  using RlsConfigFunction = std::function<std::optional<std::string>()>;
  // Why the server's companion (the gRPC port) cannot serve, or nothing.
  using NotReadyFunction = std::function<std::optional<std::string>()>;
  AdminHandler(ServerContext& context, ReloadFunction reload, RlsConfigFunction rls_config,
               NotReadyFunction companion_not_ready = {});

  void on_header(const std::shared_ptr<Session>& session) override;

  // Records the outcome of a reload, however it was asked for (POST
  // /admin/reload records its own; the server passes SIGHUP's), for the
  // "reloads" of /admin/stats.
  void note_reload(const ReloadOutcome& outcome);

 private:
  struct LastReload {
    ReloadOutcome outcome;
    int64_t unix_ms = 0;  // when it finished (system clock)
  };

  // The answer to a request the admin port must not serve (wrong Host,
  // foreign Origin, no token, not JSON), or nothing.
  std::optional<Response> refuse(const Session& session, std::string_view path) const;
  Response stats() const;
  Response reset(std::string_view body);
  // /admin/consumers/<raw_id>: GET, PUT, DELETE.
  void consumers(const std::shared_ptr<Session>& session, std::string_view raw_id);
  // Writes `change` to the consumers file off this thread; puts it in force
  // and answers once the file holds it.
  void change_consumer(const std::shared_ptr<Session>& session, const State& state,
                       ConsumerChange change);
  Response reload();

  ServerContext& context_;
  ReloadFunction reload_;
  RlsConfigFunction rls_config_;
  NotReadyFunction companion_not_ready_;
  std::chrono::steady_clock::time_point started_;
  std::optional<LastReload> last_reload_;  // control thread only
  // Last: its destructor finishes the writes queued, whose answers post to
  // the control thread's io_context (which outlives this handler).
  ConsumersWriter consumers_writer_;
};

}  // namespace sluice::http
