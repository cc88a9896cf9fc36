#include "policy/step.h"

namespace sluice::policy {

OnFailure on_failure(const Config& config) {
  return config.store.redis.on_failure_allow ? OnFailure::kAllow : OnFailure::kDeny;
}

}  // namespace sluice::policy
