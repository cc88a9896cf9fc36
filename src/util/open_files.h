// The process's open-file limit, raised to its hard maximum first: the
// default soft limit (1024 on most systems) is far below what a server with
// many connections needs. Header-only.
#pragma once

#include <sys/resource.h>

#include <cstddef>

namespace sluice::util {

inline size_t raise_open_file_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1024;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  return limit.rlim_cur == RLIM_INFINITY ? size_t{1} << 20 : static_cast<size_t>(limit.rlim_cur);
}

}  // namespace sluice::util
