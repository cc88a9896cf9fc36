#include "http/upstream_group.h"

#include <stdexcept>

#include <spdlog/spdlog.h>

#include "http/upstream_tls.h"

namespace sluice::http {

namespace {

constexpr std::string_view kEjectionsName = "sluice_upstream_ejections_total";
constexpr std::string_view kEjectionsHelp =
    "Servers of a gateway upstream taken out by passive health (upstreams.NAME.health: "
    "fail_after consecutive connect or TLS failures or 502/503/504 answers), by upstream and "
    "server.";
constexpr std::string_view kReturnsName = "sluice_upstream_returns_total";
constexpr std::string_view kReturnsHelp =
    "Ejected servers of a gateway upstream given requests again after retry_after, by upstream "
    "and server.";

}  // namespace

UpstreamGroup::UpstreamGroup(policy::Upstream config, observe::Registry* registry)
    : config_(std::move(config)) {
  bool any_tls = false;
  for (const policy::UpstreamServer& s : config_.servers) {
    Server server;
    server.key = (s.tls ? "https://" : "http://") + s.address.text();
    // Only an upstream with passive health can eject: no series for the others.
    if (registry != nullptr && config_.fail_after != 0) {
      const observe::Labels labels = {{"upstream", config_.label()}, {"server", s.url}};
      server.ejections = registry->counter(kEjectionsName, kEjectionsHelp, labels);
      server.returns = registry->counter(kReturnsName, kReturnsHelp, labels);
    }
    servers_.push_back(std::move(server));
    any_tls = any_tls || s.tls;
  }
  if (any_tls) tls_ = make_upstream_tls_context(config_.tls);
}

bool UpstreamGroup::available(size_t i, SteadyClock::time_point now) {
  Server& s = servers_[i];
  if (!s.ejected) return true;
  if (now < s.ejected_until) return false;
  s.ejected = false;
  s.failures = 0;
  if (s.returns != nullptr) s.returns->add();
  spdlog::info("gateway: upstream {} server {} gets requests again ({} ms after its ejection)",
               config_.label(), config_.servers[i].url, config_.retry_after.count());
  return true;
}

size_t UpstreamGroup::choose(uint64_t tried, SteadyClock::time_point now, bool ignore_health) {
  const size_t n = servers_.size();
  const auto eligible = [&](size_t i) {
    if ((tried >> i) & 1u) return false;
    return ignore_health || available(i, now);
  };
  if (config_.balance == policy::Balance::kLeastRequest) {
    size_t best = kNone;
    for (size_t i = 0; i < n; ++i) {
      if (!eligible(i)) continue;
      if (best == kNone || servers_[i].in_flight < servers_[best].in_flight) best = i;
    }
    return best;
  }
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (next_ + k) % n;
    if (!eligible(i)) continue;
    next_ = (i + 1) % n;
    return i;
  }
  return kNone;
}

size_t UpstreamGroup::pick(uint64_t tried, SteadyClock::time_point now) {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t i = choose(tried, now, false);
  // Every untried server is ejected: try them anyway (never fail closed on health alone).
  if (i == kNone) i = choose(tried, now, true);
  if (i != kNone) ++servers_[i].in_flight;
  return i;
}

void UpstreamGroup::done(size_t server) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (servers_[server].in_flight > 0) --servers_[server].in_flight;
}

void UpstreamGroup::report(size_t server, Outcome outcome, SteadyClock::time_point now) {
  if (config_.fail_after == 0 || outcome == Outcome::kNeutral) return;
  std::lock_guard<std::mutex> lock(mutex_);
  Server& s = servers_[server];
  if (outcome == Outcome::kSuccess) {
    s.failures = 0;
    return;
  }
  if (s.ejected) return;  // tried anyway while ejected: its time already runs
  if (++s.failures < config_.fail_after) return;
  s.ejected = true;
  s.ejected_until = now + config_.retry_after;
  if (s.ejections != nullptr) s.ejections->add();
  spdlog::warn("gateway: upstream {} server {} ejected for {} ms after {} failure{} in a row",
               config_.label(), config_.servers[server].url, config_.retry_after.count(),
               s.failures, s.failures == 1 ? "" : "s");
}

uint32_t UpstreamGroup::in_flight(size_t server) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return servers_[server].in_flight;
}

bool UpstreamGroup::ejected(size_t server) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return servers_[server].ejected;
}

}  // namespace sluice::http
