#include "http/cost_meter.h"

#include <optional>
#include <string>
#include <string_view>

#include <spdlog/spdlog.h>

#include "policy/cost_settle.h"

namespace sluice::http {
namespace {

namespace bhttp = boost::beast::http;

// The value of the last field named `name` among `header`'s fields from
// index `from` on (case-insensitive), nullopt when there is none.
std::optional<std::string_view> last_field(const bhttp::response_header<>& header,
                                           std::string_view name, size_t from) {
  std::optional<std::string_view> value;
  size_t i = 0;
  for (const auto& field : header) {
    if (i++ < from) continue;
    const auto n = field.name_string();
    if (boost::beast::iequals(n, name))
      value = std::string_view(field.value().data(), field.value().size());
  }
  return value;
}

}  // namespace

std::unique_ptr<CostMeter> CostMeter::make(Store& store, const Clock& clock,
                                           const policy::Plan& plan, const policy::Verdict& verdict,
                                           const RouteMetrics& metrics) {
  if (plan.route == nullptr || !plan.route->cost ||
      verdict.result != policy::Verdict::Result::kAllowed || metrics.cost.unreported == nullptr)
    return nullptr;
  return std::make_unique<CostMeter>(store, clock, plan, verdict, metrics);
}

CostMeter::CostMeter(Store& store, const Clock& clock, const policy::Plan& plan,
                     const policy::Verdict& verdict, const RouteMetrics& metrics)
    : store_(store),
      clock_(clock),
      plan_(plan),
      verdict_(verdict),
      metrics_(metrics),
      reader_(*plan.route->cost) {}

CostMeter::~CostMeter() {
  if (!settled_) metrics_.cost.unreported->add();
}

void CostMeter::on_response_header(const bhttp::response_header<>& header) {
  header_fields_ = static_cast<size_t>(std::distance(header.begin(), header.end()));
  const auto type = header.find(bhttp::field::content_type);
  const std::string_view content_type =
      type == header.end() ? std::string_view()
                           : std::string_view(type->value().data(), type->value().size());
  const std::string& name = plan_.route->cost->header;
  reader_.on_header(content_type, name.empty() ? std::nullopt : last_field(header, name, 0));
}

void CostMeter::on_body(const char* data, size_t size) {
  reader_.on_body(std::string_view(data, size));
}

void CostMeter::settle(const bhttp::response_header<>& header, std::function<void()> then) {
  if (settled_) return then();
  settled_ = true;
  const policy::RouteCost& cost = *plan_.route->cost;
  const std::optional<uint64_t> actual = reader_.finish(
      cost.header.empty() ? std::nullopt : last_field(header, cost.header, header_fields_));
  if (!actual) {
    metrics_.cost.unreported->add();
    return then();
  }
  const size_t n = policy::settle_cost(
      store_, plan_, verdict_, cost.estimate, *actual, clock_.now(),
      [metrics = &metrics_, now = clock_.now(), then](const Status& s) {
        if (s.ok()) {
          metrics->cost.settled->add();
        } else {
          metrics->cost.settle_failed->add();
          metrics->sinks->store_errors->add();
          const observe::DenialLogGate::Admission a = metrics->log->gate.admit(now);
          if (a.log) {
            spdlog::warn("route \"{}\": a cost was not settled (the estimate stands): {}{}",
                         metrics->name, s.error().message,
                         a.suppressed_before == 0 ? std::string()
                                                  : " (" + std::to_string(a.suppressed_before) +
                                                        " more not logged before this one)");
          }
        }
        then();
      });
  if (n == 0) {
    metrics_.cost.settled->add();
    then();
  }
}

}  // namespace sluice::http
