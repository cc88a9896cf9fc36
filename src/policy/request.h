// What a front door knows about a request, independent of the HTTP library.
#pragma once

#include <optional>
#include <string_view>

#include "policy/ip.h"
#include "sluice/clock.h"

namespace sluice::policy {

// Read access to the request's headers. Names are matched case-insensitively.
class HeaderSource {
 public:
  virtual ~HeaderSource() = default;
  // The first value of header `name`, if present.
  virtual std::optional<std::string_view> get(std::string_view name) const = 0;
  // All values of header `name` joined by ", " as HTTP allows (for X-Forwarded-For,
  // which may be split over several header lines). Empty when absent.
  virtual std::string get_all(std::string_view name) const = 0;
};

struct RequestInfo {
  std::string_view method;  // as received, e.g. "GET"
  std::string_view target;  // raw request target: path and query, not normalised
  IpAddress peer;           // the TCP peer
  const HeaderSource* headers = nullptr;
  Nanos now{0};  // Unix time of the decision: a JWT's exp and nbf are checked against it
};

}  // namespace sluice::policy
