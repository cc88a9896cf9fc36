#include "http/retry_rule.h"

namespace sluice::http {

bool may_retry_elsewhere(const RetryFacts& f) {
  if (f.timed_out || f.response_started) return false;
  if (f.connecting) return true;
  if (f.has_body) return false;
  return !f.request_written || f.idempotent;
}

bool is_idempotent(boost::beast::http::verb method) {
  using boost::beast::http::verb;
  switch (method) {
    case verb::get:
    case verb::head:
    case verb::options:
    case verb::trace:
    case verb::put:
    case verb::delete_:
      return true;
    default:
      return false;
  }
}

}  // namespace sluice::http
