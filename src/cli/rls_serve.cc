#include "cli/rls_serve.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <utility>

#include <spdlog/spdlog.h>

#include "observe/denial_log.h"
#include "observe/open_family.h"
#include "rls/config_json.h"
#include "rls/grpc_log.h"
#include "sluice/clock.h"
#include "util/open_files.h"

namespace sluice::cli {

namespace {

const char* headers_name(policy::RlsSettings::ResponseHeaders h) {
  switch (h) {
    case policy::RlsSettings::ResponseHeaders::kOff:
      return "off";
    case policy::RlsSettings::ResponseHeaders::kRateLimit:
      return "ratelimit";
    case policy::RlsSettings::ResponseHeaders::kDraft:
      return "draft";
  }
  return "?";
}

size_t count_rules(const rls::DescriptorLevel& level) {
  size_t n = 0;
  for (const rls::DescriptorNode& node : level.nodes) {
    if (node.rule) ++n;
    n += count_rules(node.children);
  }
  return n;
}

void log_domains(const rls::RlsConfig& config, const std::string& dir) {
  if (config.domains.empty()) {
    spdlog::warn("RLS: no descriptor file in {}: every ShouldRateLimit call is answered OK", dir);
    return;
  }
  for (const auto& [name, domain] : config.domains) {
    spdlog::info("RLS domain \"{}\": {} rate limit(s) ({})", name, count_rules(domain.root),
                 domain.mark.file);
  }
}

std::string_view detailed_result_name(rls::DetailedResult::Kind kind) {
  switch (kind) {
    case rls::DetailedResult::Kind::kOk:
      return "ok";
    case rls::DetailedResult::Kind::kNearLimit:
      return "near_limit";
    case rls::DetailedResult::Kind::kOverLimit:
      return "over_limit";
  }
  return "?";
}

rls::OnStoreFailure on_store_failure(const policy::Config& config) {
  return config.store.redis.on_failure_allow ? rls::OnStoreFailure::kAllow
                                             : rls::OnStoreFailure::kDeny;
}

}  // namespace

rls::RlsOptions rls_options(const policy::RlsSettings& settings) {
  rls::RlsOptions options;
  switch (settings.response_headers) {
    case policy::RlsSettings::ResponseHeaders::kOff:
      options.response_headers = rls::ResponseHeaders::kOff;
      break;
    case policy::RlsSettings::ResponseHeaders::kRateLimit:
      options.response_headers = rls::ResponseHeaders::kRateLimit;
      break;
    case policy::RlsSettings::ResponseHeaders::kDraft:
      options.response_headers = rls::ResponseHeaders::kDraft10;
      break;
  }
  options.dynamic_metadata = settings.dynamic_metadata;
  options.global_shadow_mode = settings.shadow_mode;
  options.near_limit_ratio = settings.near_limit_ratio;
  // No executor: decided inline on gRPC's callback thread (the memory store);
  // RlsRuntime gives the Redis store's calls the worker loops.
  return options;
}

size_t grpc_max_connections(const policy::RlsSettings& settings) {
  if (settings.max_connections != 0) return settings.max_connections;
  return std::max<size_t>(util::raise_open_file_limit() / 4, 16);
}

RlsRuntime::RlsRuntime(Store& store, WorkerLoops* loops) : store_(store), loops_(loops) {}

RlsRuntime::~RlsRuntime() {
  if (stopper_.joinable()) stopper_.join();
  server_.reset();  // stops it if begin_shutdown did not
}

void RlsRuntime::load(const Deployment& deployment) {
  const policy::Config& config = *deployment.config;
  if (!config.grpc || !config.rls) return;
  settings_ = *config.rls;
  rls::RlsOptions options = rls_options(settings_);
  // A descriptor whose store call fails (Redis down or late) is answered per
  // store.redis.on_failure, as on the HTTP side, not with a gRPC error.
  options.on_store_failure = on_store_failure(config);
  // detailed_metric descriptors, counted from the first call (the family
  // outlives the server's registry, which reads it at each scrape).
  detailed_ = std::make_unique<observe::OpenCounterFamily>(
      "sluice_rls_descriptor_total",
      "Envoy RLS descriptors of detailed_metric rules by descriptor (its entries and values) "
      "and result: ok, near_limit (allowed past rls.near_limit_ratio of the limit), over_limit. "
      "At most " +
          std::to_string(kMaxDetailedSeries) + " descriptors; the rest are counted as \"" +
          std::string(observe::OpenCounterFamily::kOverflowValue) + "\".",
      std::vector<std::string>{"domain", "descriptor", "result"}, kMaxDetailedSeries);
  options.on_detailed_result = [family = detailed_.get()](const rls::DetailedResult& r) {
    const std::string_view values[] = {r.domain, r.descriptor, detailed_result_name(r.result)};
    family->add(values);
  };
  // On the Redis store a call is decided on a worker loop, with that
  // thread's connection, as /v1/check is: calls from gRPC's threads would
  // all go through the store's one internal thread. Before the workers
  // attach (or once they stopped), the store's internal thread takes them.
  if (loops_ != nullptr) {
    options.executor = [loops = loops_](std::function<void()> task) {
      if (!loops->post(task)) task();
    };
  }
  decision_log_ = std::make_unique<observe::DecisionLog>(config.logging.denial_log_per_second,
                                                         config.logging.redact_keys);
  service_ = std::make_unique<rls::RlsService>(store_, SystemClock::instance(), deployment.rls,
                                               std::move(options));
}

Status RlsRuntime::listen(const policy::Config& config) {
  if (service_ == nullptr || !config.grpc) return {};
  grpc::Service* services[] = {service_.get()};
  rls::GrpcServerOptions options;
  if (config.grpc_tls && config.tls) {
    tls_ = std::make_shared<rls::GrpcTlsIdentity>(config.tls->cert_pem, config.tls->key_pem);
    options.tls = tls_;
  }
  options.max_connections = grpc_max_connections(settings_);
  // A connection without a call for idle_timeout is closed, as a keep-alive
  // one on `listen`; one that has not finished its handshake and HTTP/2
  // preface within header_timeout too, as one that sends no header there.
  options.idle_timeout = idle_timeout_ = config.server.idle_timeout;
  options.handshake_timeout = handshake_timeout_ = config.server.header_timeout;
  handshake_log_rate_ = config.logging.denial_log_per_second;
  rls::GrpcLog::set_handshake_log_rate(handshake_log_rate_);
  Result<std::unique_ptr<rls::GrpcServer>> server =
      rls::GrpcServer::start(config.grpc->text(), services, options);
  if (!server.ok()) return server.error();
  server_ = std::move(server).value();
  policy::HostPort bound = *config.grpc;
  bound.port = static_cast<uint16_t>(server_->port());
  spdlog::info(
      "grpc on {}{} (Envoy RLS v3 envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit; "
      "descriptors from {}; response_headers {}{}; at most {} connections)",
      bound.text(), tls_ ? " with TLS" : "", settings_.config_dir,
      headers_name(settings_.response_headers),
      settings_.shadow_mode ? "; shadow_mode: every call answered OK" : "",
      options.max_connections);
  log_domains(*service_->config(), settings_.config_dir);
  return {};
}

void RlsRuntime::register_metrics(observe::Registry& registry,
                                  const observe::DecisionSinks& sinks) {
  if (service_ == nullptr) return;
  // Shadow: shadow_mode descriptors are counted as shadow_denied.
  decisions_ = std::make_unique<observe::RouteMetrics>(observe::make_route_metrics(
      registry, "rls", {}, /*shadow=*/true, nullptr, sinks, *decision_log_));
  // sluice_limit_denials_total{route="rls"}: by rule, each from the load
  // that brings it (the registry outlives the runtime's decisions).
  decisions_->denials_registry = &registry;
  if (const auto config = service_->config()) show_limit_denials(*config);
  service_->set_observer(decisions_.get());
  const rls::RlsCounters* c = &service_->counters();
  auto read = [](const std::atomic<uint64_t>& counter) {
    return [&counter] { return counter.load(std::memory_order_relaxed); };
  };
  registry.counter_function("sluice_rls_requests_total",
                            "Envoy RLS ShouldRateLimit calls received.", {}, read(c->calls));
  registry.counter_function("sluice_rls_requests_over_limit_total",
                            "Envoy RLS calls with a descriptor over its limit (answered OVER_LIMIT "
                            "unless rls.shadow_mode).",
                            {}, read(c->calls_over_limit));
  registry.counter_function("sluice_rls_request_errors_total",
                            "Envoy RLS calls answered with a gRPC error (bad request, no config, "
                            "store failure).",
                            {}, read(c->call_errors));
  const char* descriptors = "sluice_rls_descriptors_total";
  const char* descriptors_help =
      "Envoy RLS request descriptors by result: ok (within its limit), over_limit (over it, "
      "shadow_mode and quota_mode included), unlimited, no_limit (unknown domain, no match, "
      "whitelisted or replaced).";
  registry.counter_function(descriptors, descriptors_help, {{"result", "ok"}},
                            read(c->within_limit));
  registry.counter_function(descriptors, descriptors_help, {{"result", "over_limit"}},
                            read(c->over_limit));
  registry.counter_function(descriptors, descriptors_help, {{"result", "unlimited"}},
                            read(c->unlimited));
  registry.counter_function(descriptors, descriptors_help, {{"result", "no_limit"}},
                            read(c->no_limit));
  const char* modes = "sluice_rls_descriptors_over_limit_mode_total";
  const char* modes_help =
      "Envoy RLS descriptors over their limit under shadow_mode (answered OK) or quota_mode "
      "(answered OK while another quota has room); a part of "
      "sluice_rls_descriptors_total{result=\"over_limit\"}.";
  registry.counter_function(modes, modes_help, {{"mode", "shadow_mode"}}, read(c->shadow_mode));
  registry.counter_function(modes, modes_help, {{"mode", "quota_mode"}}, read(c->quota_mode_over));
  registry.counter_function("sluice_rls_store_errors_total",
                            "Envoy RLS descriptors the store could not decide (Redis down or "
                            "late), answered per store.redis.on_failure.",
                            {}, read(c->store_errors));
  registry.counter_function(
      "sluice_rls_hits_total",
      "Envoy RLS hits charged to limits (hits_addend of allowed descriptors).", {}, read(c->hits));
  detailed_->attach(registry);
  if (server_ != nullptr) {
    const rls::GrpcAcceptor* acceptor = &server_->acceptor();
    registry.gauge("sluice_grpc_connections",
                   "Connections open on the grpc port (counted at most a second ago).", {},
                   [acceptor] { return static_cast<double>(acceptor->open_connections()); });
    registry.counter_function(
        "sluice_grpc_connections_refused_total",
        "Connections to the grpc port closed at accept because rls.max_connections were open.", {},
        [acceptor] { return acceptor->refused(); });
    registry.counter_function(
        "sluice_grpc_accept_failures_total",
        "Accepts on the grpc port that failed (no file descriptor or memory free); tried again "
        "every 100 ms, /readyz answers 503 meanwhile.",
        {}, [acceptor] { return acceptor->accept_failures(); });
    registry.counter_function(
        "sluice_grpc_tls_handshake_failures_total",
        "TLS handshakes on the grpc port that failed or timed out (grpc_tls).", {},
        [] { return rls::GrpcLog::handshake_failures(); });
  }
  const rls::RlsService* service = service_.get();
  registry.gauge("sluice_rls_domains", "Envoy RLS descriptor domains loaded.", {}, [service] {
    const std::shared_ptr<const rls::RlsConfig> config = service->config();
    return config ? static_cast<double>(config->domains.size()) : 0.0;
  });
}

void RlsRuntime::show_limit_denials(const rls::RlsConfig& config) {
  for (const std::string& name : rls::limit_names(config)) {
    observe::limit_denials_counter(*decisions_->denials_registry, decisions_->name, name);
  }
}

void RlsRuntime::end_metrics() {
  if (service_ != nullptr) service_->stop_observing();
}

void RlsRuntime::stage(const Deployment& next) {
  pending_.reset();
  const policy::Config& config = *next.config;
  if (!config.rls) return;  // the loader made sure grpc is unset too: a restart question
  pending_on_failure_allow_ = config.store.redis.on_failure_allow;
  pending_redact_keys_ = config.logging.redact_keys;
  if (service_ != nullptr) {
    auto restart_needed = [](const char* key, const std::string& from, const std::string& to) {
      if (from != to) {
        spdlog::warn("reload: rls.{} changed from {} to {}; this takes effect only after a restart",
                     key, from, to);
      }
    };
    auto text = [](bool b) { return std::string(b ? "true" : "false"); };
    restart_needed("response_headers", headers_name(settings_.response_headers),
                   headers_name(config.rls->response_headers));
    restart_needed("dynamic_metadata", text(settings_.dynamic_metadata),
                   text(config.rls->dynamic_metadata));
    restart_needed("shadow_mode", text(settings_.shadow_mode), text(config.rls->shadow_mode));
    restart_needed("near_limit_ratio", std::to_string(settings_.near_limit_ratio),
                   std::to_string(config.rls->near_limit_ratio));
    if (config.server.idle_timeout != idle_timeout_ ||
        config.server.header_timeout != handshake_timeout_) {
      spdlog::warn(
          "reload: server.idle_timeout and server.header_timeout apply to the grpc port only "
          "after a restart");
    }
  }
  pending_ = next.rls;
  pending_settings_ = *config.rls;
  pending_handshake_log_rate_ = config.logging.denial_log_per_second;
  pending_tls_.reset();
  if (service_ != nullptr && (tls_ != nullptr) != config.grpc_tls) {
    spdlog::warn("reload: grpc_tls changed to {}; this takes effect only after a restart",
                 config.grpc_tls ? "true" : "false");
  }
  if (config.grpc_tls) pending_tls_ = config.tls;
}

void RlsRuntime::commit_reload() {
  // The gRPC port's next handshake uses the reloaded certificate.
  if (tls_ != nullptr && pending_tls_) tls_->set(pending_tls_->cert_pem, pending_tls_->key_pem);
  pending_tls_.reset();
  if (pending_ == nullptr) return;
  std::shared_ptr<const rls::RlsConfig> config = std::move(pending_);
  pending_.reset();
  if (service_ == nullptr) return;  // grpc was added by this reload: a restart serves it
  service_->set_config(config);
  if (decisions_ != nullptr) show_limit_denials(*config);
  if (pending_handshake_log_rate_ != handshake_log_rate_) {
    handshake_log_rate_ = pending_handshake_log_rate_;
    rls::GrpcLog::set_handshake_log_rate(handshake_log_rate_);
  }
  if (server_ != nullptr) {
    const size_t max = grpc_max_connections(pending_settings_);
    if (max != server_->acceptor().max_connections()) {
      spdlog::info("grpc: at most {} connections (was {})", max,
                   server_->acceptor().max_connections());
      server_->acceptor().set_max_connections(max);
    }
  }
  service_->set_on_store_failure(pending_on_failure_allow_ ? rls::OnStoreFailure::kAllow
                                                           : rls::OnStoreFailure::kDeny);
  decision_log_->redact_keys.store(pending_redact_keys_, std::memory_order_relaxed);
  // The folder and how it is loaded change now; the service's options only on a restart.
  settings_.config_dir = pending_settings_.config_dir;
  settings_.merge_domains = pending_settings_.merge_domains;
  settings_.max_connections = pending_settings_.max_connections;
  spdlog::info("RLS: reloaded {} domain(s) from {}", config->domains.size(), settings_.config_dir);
  log_domains(*config, settings_.config_dir);
}

std::optional<std::string> RlsRuntime::rls_config_json() const {
  if (service_ == nullptr) return std::nullopt;
  const std::shared_ptr<const rls::RlsConfig> config = service_->config();
  if (config == nullptr) return std::nullopt;
  return rls::config_json(*config);
}

std::optional<std::string> RlsRuntime::not_ready() const {
  if (server_ == nullptr) return std::nullopt;
  std::optional<std::string> why = server_->acceptor().failing();
  if (!why) return std::nullopt;
  return "grpc port cannot accept connections: " + *why;
}

bool RlsRuntime::busy() const {
  return service_ != nullptr && service_->calls_in_flight() > 0;
}

void RlsRuntime::begin_shutdown(std::chrono::milliseconds grace) {
  if (server_ == nullptr || stopper_.joinable()) return;
  spdlog::info("grpc: no longer accepting; finishing calls in flight for up to {} ms",
               grace.count());
  rls::GrpcServer* server = server_.get();
  const rls::RlsService* service = service_.get();
  stopper_ = std::thread([server, service, grace] {
    // Exits as soon as the calls in flight are answered, whatever idle
    // connections clients keep open.
    server->stop(grace, [service] { return service->calls_in_flight() == 0; });
    spdlog::info("grpc stopped");
  });
}

}  // namespace sluice::cli
