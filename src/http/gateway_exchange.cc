// GatewayExchange's concurrency slots (forwarder.h): taken once, given back once.
#include <utility>

#include "http/forwarder.h"

namespace sluice::http {

GatewayExchange::~GatewayExchange() {
  release_slots();
}

void GatewayExchange::take_slots(ServerContext& context) {
  if (!policy::holds_slots(verdict)) return;
  slots_context_ = &context;
  const RouteMetrics& metrics = state->metrics_for(plan.route);
  if (metrics.slots_taken != nullptr) metrics.slots_taken->add();
}

void GatewayExchange::release_slots(std::function<void()> then) {
  // Cleared first: whatever happens next, these slots are never given back twice.
  ServerContext* context = std::exchange(slots_context_, nullptr);
  if (context == nullptr) {
    if (then) then();
    return;
  }
  const RouteMetrics& metrics = state->metrics_for(plan.route);
  // Counted when asked, before the client can see the response end: whoever
  // reads the metric after a response sees its slot released.
  if (metrics.slots_released != nullptr) metrics.slots_released->add();
  auto pending = std::make_shared<std::function<void()>>(std::move(then));
  const size_t n =
      policy::give_back_slots(context->store, plan, verdict, context->clock.now(),
                              [errors = context->metrics.store_errors, pending](Status s) {
                                if (!s.ok())
                                  errors->add();  // the slot frees itself when its lease ends
                                if (*pending) (*pending)();
                              });
  if (n == 0 && *pending) (*pending)();
}

}  // namespace sluice::http
