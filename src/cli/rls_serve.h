// The Envoy RLS v3 gRPC API inside `sluice serve` (docs/ENVOY.md): loads the
// envoyproxy/ratelimit descriptor folder named by `rls.config_dir`, serves
// rls::RlsService on the `grpc` address over the server's own store and the
// system clock, reloads the folder together with the main config (all or
// nothing, through http::Companion) and stops with the server.
//
// Thread-safety: as http::Companion — construction, start and the Companion
// methods run on the server's control thread; the service itself is called
// from gRPC's threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "http/server.h"
#include "policy/config.h"
#include "rls/config_loader.h"
#include "rls/grpc_server.h"
#include "rls/service.h"
#include "sluice/store.h"

namespace sluice::cli {

// Loads the descriptor folder of `settings` (errors and warnings as
// src/rls reports them: "file:line:col: message"). With `store` redis, a
// rate_limit the Redis store cannot count exactly is an error too.
rls::LoadResult load_rls_descriptors(const policy::RlsSettings& settings,
                                     const policy::StoreConfig& store = {});

// The RLS options `settings` asks for (response headers, shadow mode, ...).
rls::RlsOptions rls_options(const policy::RlsSettings& settings);

class RlsRuntime final : public http::Companion {
 public:
  // `store` must outlive the runtime. Nothing runs until start().
  explicit RlsRuntime(Store& store);
  // Stops the gRPC server (waiting for a stop begun by begin_shutdown).
  ~RlsRuntime() override;
  RlsRuntime(const RlsRuntime&) = delete;
  RlsRuntime& operator=(const RlsRuntime&) = delete;

  // When `config.grpc` is set: loads config.rls's descriptor folder and
  // builds the service. Returns every error of the descriptor files
  // ("file:line:col: message"). Without `grpc`, does nothing and succeeds.
  std::vector<std::string> load(const policy::Config& config);
  // After a successful load(): starts the gRPC server on config.grpc and logs
  // the address bound and the domains. Errors: the address cannot be bound.
  Status listen(const policy::Config& config);

  bool serving() const { return server_ != nullptr; }
  int port() const { return server_ ? server_->port() : 0; }
  const rls::RlsService* service() const { return service_.get(); }

  // http::Companion
  void register_metrics(observe::Registry& registry) override;
  std::vector<std::string> prepare_reload(const policy::Config& next) override;
  void commit_reload() override;
  void begin_shutdown(std::chrono::milliseconds grace) override;

 private:
  Store& store_;
  policy::RlsSettings settings_;  // as started (options other than the folder need a restart)
  std::unique_ptr<rls::RlsService> service_;
  std::unique_ptr<rls::GrpcServer> server_;
  std::shared_ptr<const rls::RlsConfig> pending_;  // loaded by prepare_reload
  policy::RlsSettings pending_settings_;
  bool pending_on_failure_allow_ = true;
  std::thread stopper_;  // runs GrpcServer::stop(grace) once shutdown begins
};

}  // namespace sluice::cli
