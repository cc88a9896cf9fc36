// The standard process metrics every Prometheus client exports
// (process_cpu_seconds_total, process_resident_memory_bytes,
// process_open_fds, process_max_fds, process_start_time_seconds), read from
// /proc at scrape time, and sluice_build_info{version,commit}.
#pragma once

#include <string_view>

#include "observe/metrics.h"

namespace sluice::observe {

void register_process_metrics(Registry& registry);

// sluice_build_info: 1, labelled with the release and the commit the build
// was configured from ("unknown" outside a git checkout).
void register_build_info(Registry& registry, std::string_view version);

}  // namespace sluice::observe
