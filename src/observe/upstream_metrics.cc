#include "observe/upstream_metrics.h"

#include <string_view>

#include "observe/request_duration.h"

namespace sluice::observe {

namespace {

constexpr std::string_view kResponsesName = "sluice_upstream_responses_total";
constexpr std::string_view kResponsesHelp =
    "Final responses of the gateway's upstream, by route and status class (2xx, 3xx, 4xx, 5xx).";
constexpr std::string_view kFailuresName = "sluice_upstream_failures_total";
constexpr std::string_view kFailuresHelp =
    "Upstream exchanges of the gateway that failed, by route and reason: connect (refused, "
    "unreachable, connect_timeout; 502), timeout (upstream.timeout; 504), reset (closed or reset "
    "by the upstream; 502, or a body cut short), bad_response (unparsable; 502), tls (the TLS "
    "handshake with an https:// server failed; 502).";
constexpr std::string_view kDurationName = "sluice_upstream_duration_seconds";
constexpr std::string_view kDurationHelp =
    "Time from the start of an upstream exchange (a connection taken or opened) to the "
    "upstream's final response header, by route.";

constexpr std::array<std::string_view, 4> kCodes = {"2xx", "3xx", "4xx", "5xx"};
constexpr std::array<std::string_view, 5> kReasons = {"connect", "timeout", "reset", "bad_response",
                                                      "tls"};

}  // namespace

UpstreamFailure upstream_failure(bool connecting, bool timed_out, bool malformed) {
  if (timed_out) return UpstreamFailure::kTimeout;
  if (connecting) return UpstreamFailure::kConnect;
  return malformed ? UpstreamFailure::kBadResponse : UpstreamFailure::kReset;
}

UpstreamSeries make_upstream_series(Registry& registry, const std::string& route) {
  UpstreamSeries s;
  for (size_t i = 0; i < kCodes.size(); ++i) {
    s.responses[i] = registry.counter(kResponsesName, kResponsesHelp,
                                      {{"route", route}, {"code", std::string(kCodes[i])}});
  }
  for (size_t i = 0; i < kReasons.size(); ++i) {
    s.failures[i] = registry.counter(kFailuresName, kFailuresHelp,
                                     {{"route", route}, {"reason", std::string(kReasons[i])}});
  }
  s.duration =
      registry.histogram(kDurationName, kDurationHelp, {{"route", route}}, kHttpDurationBoundsNs);
  return s;
}

void UpstreamRecorder::responded(unsigned status) {
  if (series_ == nullptr || status < 200 || status > 599) return;
  series_->responses[status / 100 - 2]->add();
  const auto took = SteadyClock::now() - began_;
  series_->duration->observe_ns(
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(took).count()));
}

void UpstreamRecorder::failed(UpstreamFailure reason) {
  if (series_ == nullptr) return;
  series_->failures[static_cast<size_t>(reason)]->add();
}

}  // namespace sluice::observe
