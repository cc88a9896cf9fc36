#include "policy/config.h"

namespace sluice::policy {

std::string HostPort::text() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

}  // namespace sluice::policy
