#include "observe/request_duration.h"

#include <string_view>

namespace sluice::observe {

const std::vector<uint64_t> kHttpDurationBoundsNs = {
    100'000,     500'000,     1'000'000,     5'000'000,     10'000'000,     50'000'000,
    100'000'000, 500'000'000, 1'000'000'000, 5'000'000'000, 10'000'000'000, 50'000'000'000};

namespace {

constexpr std::string_view kName = "sluice_http_request_duration_seconds";
constexpr std::string_view kHelp =
    "Time from a decided request's header read to the last byte of its response written, by "
    "route and result (as sluice_requests_total).";

}  // namespace

Histogram* RequestDurations::of(const policy::Verdict& verdict) const {
  if (!verdict.limited()) return allowed;
  if (verdict.invalid()) return nullptr;
  if (verdict.store_failed()) return error;
  if (verdict.allowed()) return allowed;
  return shadow_denied != nullptr ? shadow_denied : denied;
}

RequestDurations make_request_durations(Registry& registry, const std::string& route, bool shadow) {
  auto series = [&](const char* result) {
    return registry.histogram(kName, kHelp, {{"route", route}, {"result", result}},
                              kHttpDurationBoundsNs);
  };
  RequestDurations d;
  d.allowed = series("allowed");
  d.denied = series("denied");
  d.error = series("error");
  if (shadow) d.shadow_denied = series("shadow_denied");
  return d;
}

}  // namespace sluice::observe
