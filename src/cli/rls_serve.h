// The Envoy RLS v3 gRPC API inside `sluice serve` (docs/ENVOY.md): serves
// rls::RlsService on the `grpc` address over the server's own store and the
// system clock, with the descriptors load_deployment() loaded; takes the
// descriptors of a reload (staged while the reload loads, put in force with
// the config through http::Companion) and stops with the server.
//
// Thread-safety: as http::Companion — construction, start and the Companion
// methods run on the server's control thread; the service itself is called
// from gRPC's threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli/deployment.h"
#include "cli/worker_loops.h"
#include "http/server.h"
#include "observe/open_family.h"
#include "observe/route_metrics.h"
#include "policy/config.h"
#include "rls/grpc_server.h"
#include "rls/grpc_tls.h"
#include "rls/service.h"
#include "sluice/store.h"

namespace sluice::cli {

// The RLS options `settings` asks for (response headers, shadow mode, ...).
rls::RlsOptions rls_options(const policy::RlsSettings& settings);

// Connections the gRPC port may hold: rls.max_connections, else a quarter of
// the open-file limit (raised to its hard maximum first).
size_t grpc_max_connections(const policy::RlsSettings& settings);

class RlsRuntime final : public http::Companion {
 public:
  // `store` must outlive the runtime. Nothing runs until start(). With
  // `loops` (a store driven by the worker loops: Redis), every call is
  // decided on one of them, spread round robin; null: on gRPC's thread.
  // `loops` must outlive the runtime.
  explicit RlsRuntime(Store& store, WorkerLoops* loops = nullptr);
  // Stops the gRPC server (waiting for a stop begun by begin_shutdown).
  ~RlsRuntime() override;
  RlsRuntime(const RlsRuntime&) = delete;
  RlsRuntime& operator=(const RlsRuntime&) = delete;

  // When `deployment.config->grpc` is set: builds the service on the
  // descriptors of `deployment` (loaded, so this cannot fail).
  void load(const Deployment& deployment);
  // After load(): starts the gRPC server on config.grpc and logs the address
  // bound and the domains. Errors: the address cannot be bound.
  Status listen(const policy::Config& config);
  // A reload loaded `next` (all of it valid): keep its descriptors for
  // commit_reload(), and say which RLS options need a restart.
  void stage(const Deployment& next);

  bool serving() const { return server_ != nullptr; }
  int port() const { return server_ ? server_->port() : 0; }
  const rls::RlsService* service() const { return service_.get(); }

  // http::Companion
  void register_metrics(observe::Registry& registry, const observe::DecisionSinks& sinks) override;
  void end_metrics() override;
  void commit_reload() override;
  void begin_shutdown(std::chrono::milliseconds grace) override;
  bool busy() const override;
  std::optional<std::string> rls_config_json() const override;
  std::optional<std::string> not_ready() const override;

 private:
  // Registers sluice_limit_denials_total{route="rls"} of every rule of
  // `config` (zero until a denial), so the series show before one.
  void show_limit_denials(const rls::RlsConfig& config);

  Store& store_;
  WorkerLoops* loops_;
  policy::RlsSettings settings_;  // as started (options other than the folder need a restart)
  // sluice_rls_descriptor_total (detailed_metric); its label sets are
  // bounded since they hold request values. Declared before the service
  // that counts into it.
  static constexpr size_t kMaxDetailedSeries = 10000;
  std::unique_ptr<observe::OpenCounterFamily> detailed_;
  // The decisions' series (sluice_requests_total{route="rls"}) and log
  // (logging.denial_log_per_second, logging.redact_keys), made with the
  // server's sinks; the service reports to them until end_metrics().
  std::unique_ptr<observe::DecisionLog> decision_log_;
  std::unique_ptr<observe::RouteMetrics> decisions_;
  bool pending_redact_keys_ = true;
  std::unique_ptr<rls::RlsService> service_;
  std::unique_ptr<rls::GrpcServer> server_;
  std::shared_ptr<const rls::RlsConfig> pending_;  // staged by stage()
  policy::RlsSettings pending_settings_;
  bool pending_on_failure_allow_ = true;
  std::thread stopper_;  // runs GrpcServer::stop(grace) once shutdown begins
  // grpc_tls: the port's certificate, swapped by commit_reload() (null: plaintext).
  std::shared_ptr<rls::GrpcTlsIdentity> tls_;
  std::optional<policy::TlsSettings> pending_tls_;
  // What the gRPC port took at startup from server.* (a restart changes them).
  std::chrono::milliseconds idle_timeout_{0};
  std::chrono::milliseconds handshake_timeout_{0};
  double handshake_log_rate_ = 0;  // logging.denial_log_per_second in force
  double pending_handshake_log_rate_ = 0;
};

}  // namespace sluice::cli
