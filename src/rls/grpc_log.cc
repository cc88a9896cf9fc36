#include "rls/grpc_log.h"

#include <grpc/support/log.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include <spdlog/spdlog.h>

#include "observe/denial_log.h"

namespace sluice::rls {

namespace {

// The lines of one failed handshake, as gRPC 1.51 writes them: the TLS
// library's reason at error level (ssl_transport_security.cc), then, for any
// failure, the handshaker's at debug level (security_handshaker.cc).
constexpr std::string_view kTlsReason = "Handshake failed with fatal error ";
constexpr std::string_view kHandshakeFailed = "Security handshake failed: ";

std::atomic<uint64_t> g_handshake_failures{0};
// Replaced whole on a rate change; gRPC's threads read it under the mutex.
std::mutex g_gate_mutex;
std::shared_ptr<observe::DenialLogGate> g_gate = std::make_shared<observe::DenialLogGate>(1.0);
// The reason of the handshake that fails on this thread, if the TLS
// library gave one (its line comes first).
thread_local std::string t_reason;

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::shared_ptr<observe::DenialLogGate> gate() {
  std::lock_guard lock(g_gate_mutex);
  return g_gate;
}

void handshake_failed(std::string_view error) {
  g_handshake_failures.fetch_add(1, std::memory_order_relaxed);
  std::string reason = std::move(t_reason);
  t_reason.clear();
  const observe::DenialLogGate::Admission a = gate()->admit(
      std::chrono::duration_cast<Nanos>(std::chrono::steady_clock::now().time_since_epoch()));
  if (!a.log) return;
  // gRPC's error text is a status dump; the TLS reason, when there is one,
  // says it in a line ("SSL_ERROR_SSL: error:...:wrong version number.").
  spdlog::info("grpc: TLS handshake failed: {}{}", reason.empty() ? error : reason,
               observe::suppressed_note(a, "failed handshakes"));
}

void route(gpr_log_func_args* args) {
  const std::string_view message = args->message;
  const std::string_view file = args->file != nullptr ? args->file : "";
  if (message.starts_with(kHandshakeFailed) && ends_with(file, "security_handshaker.cc")) {
    return handshake_failed(message.substr(kHandshakeFailed.size()));
  }
  if (message.starts_with(kTlsReason) && ends_with(file, "ssl_transport_security.cc")) {
    t_reason = message.substr(kTlsReason.size());
    return;
  }
  const spdlog::level::level_enum level =
      args->severity == GPR_LOG_SEVERITY_ERROR  ? spdlog::level::err
      : args->severity == GPR_LOG_SEVERITY_INFO ? spdlog::level::debug
                                                : spdlog::level::trace;
  if (!spdlog::should_log(level)) return;
  const size_t slash = file.rfind('/');
  spdlog::log(level, "grpc: {} ({}:{})", message,
              slash == std::string_view::npos ? file : file.substr(slash + 1), args->line);
}

}  // namespace

void GrpcLog::install() {
  static std::once_flag once;
  std::call_once(once, [] {
    gpr_set_log_function(&route);
    gpr_set_log_verbosity(GPR_LOG_SEVERITY_DEBUG);
  });
}

void GrpcLog::set_handshake_log_rate(double per_second) {
  auto next = std::make_shared<observe::DenialLogGate>(per_second);
  std::lock_guard lock(g_gate_mutex);
  g_gate = std::move(next);
}

uint64_t GrpcLog::handshake_failures() {
  return g_handshake_failures.load(std::memory_order_relaxed);
}

}  // namespace sluice::rls
