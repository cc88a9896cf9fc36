#include "store/redis/shared.h"

#include <spdlog/spdlog.h>

#include <chrono>

namespace sluice::redis {
namespace {

const char* kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kTimeout:
      return "timeout";
    case ErrorKind::kConnection:
      return "connection";
    case ErrorKind::kScript:
      return "script";
    case ErrorKind::kServer:
      return "server";
    case ErrorKind::kOverloaded:
      return "overloaded";
    case ErrorKind::kOutOfMemory:
      return "oom";
    case ErrorKind::kCount:
      break;
  }
  return "error";
}

int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void ErrorLog::log(ErrorKind kind, std::string_view message) {
  Slot& slot = slots_[static_cast<size_t>(kind)];
  const int64_t now = steady_ms();
  int64_t last = slot.last_ms.load(std::memory_order_relaxed);
  if (now - last < 1'000 || !slot.last_ms.compare_exchange_strong(last, now)) {
    slot.suppressed.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const uint64_t suppressed = slot.suppressed.exchange(0, std::memory_order_relaxed);
  if (suppressed > 0) {
    spdlog::warn("redis store: {} error: {} ({} more {} errors in the last interval)",
                 kind_name(kind), message, suppressed, kind_name(kind));
  } else {
    spdlog::warn("redis store: {} error: {}", kind_name(kind), message);
  }
}

bool SlotMap::covers_all() const {
  for (int16_t n : slot_node) {
    if (n < 0) return false;
  }
  return true;
}

int SlotMap::node_index(std::string_view name) {
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i] == name) return static_cast<int>(i);
  }
  nodes.emplace_back(name);
  return static_cast<int>(nodes.size() - 1);
}

void Shared::note_writes_refused(const std::string& node, std::string_view message) {
  writes_refused.store(true, std::memory_order_relaxed);
  log.log(ErrorKind::kOutOfMemory, "Redis at " + node + " refuses writes: " + std::string(message) +
                                       " (/readyz says 503 until it accepts them again)");
}

bool Shared::is_sentinel(std::string_view node) const {
  for (const Endpoint& s : sentinels) {
    if (s.name() == node) return true;
  }
  return false;
}

Endpoint Shared::endpoint_for(std::string_view name) const {
  for (const std::vector<Endpoint>* known : {&seeds, &sentinels}) {
    for (const Endpoint& e : *known) {
      if (e.name() == name) return e;
    }
  }
  Endpoint ep = node_defaults;
  std::string host;
  int port = 0;
  if (split_host_port(name, &host, &port)) {
    ep.host = host;
    ep.port = port;
  }
  return ep;
}

ClockOffset& Shared::clock_of(const std::string& node) {
  std::lock_guard<std::mutex> lock(clocks_mutex_);
  std::unique_ptr<ClockOffset>& clock = clocks_[node];
  if (clock == nullptr) clock = std::make_unique<ClockOffset>();
  return *clock;
}

}  // namespace sluice::redis
