#include "observe/process_metrics.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#ifndef SLUICE_COMMIT
#define SLUICE_COMMIT "unknown"
#endif

namespace sluice::observe {
namespace {

// The fields of /proc/self/stat after the command name (which may hold
// spaces and parentheses, so the split starts after its last ')'); field 3
// of proc(5) is the first. Empty if unreadable.
std::vector<std::string> self_stat_fields() {
  std::ifstream in("/proc/self/stat");
  std::string line;
  std::getline(in, line);
  const size_t end = line.rfind(')');
  if (end == std::string::npos) return {};
  std::istringstream rest(line.substr(end + 1));
  std::vector<std::string> fields;
  for (std::string f; rest >> f;) fields.push_back(f);
  return fields;
}

// proc(5) field number `n` (1-based, n >= 3) of /proc/self/stat as a number; 0 if absent.
double stat_field(const std::vector<std::string>& fields, size_t n) {
  const size_t i = n - 3;
  return i < fields.size() ? std::strtod(fields[i].c_str(), nullptr) : 0;
}

double ticks_per_second() {
  const long t = ::sysconf(_SC_CLK_TCK);
  return t > 0 ? static_cast<double>(t) : 100.0;
}

double cpu_seconds() {
  const auto fields = self_stat_fields();
  return (stat_field(fields, 14) + stat_field(fields, 15)) / ticks_per_second();  // utime + stime
}

double resident_bytes() {
  const auto fields = self_stat_fields();
  return stat_field(fields, 24) * static_cast<double>(::sysconf(_SC_PAGESIZE));  // rss in pages
}

double open_fds() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  double n = 0;
  while (const dirent* e = ::readdir(dir)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(dir);
  return n - 1;  // the listing's own descriptor
}

double max_fds() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 0;
  return static_cast<double>(limit.rlim_cur);
}

// Boot time (btime of /proc/stat) plus the process's start in ticks after boot.
double start_time_seconds() {
  std::ifstream in("/proc/stat");
  double boot = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("btime ", 0) == 0) boot = std::strtod(line.c_str() + 6, nullptr);
  }
  return boot + stat_field(self_stat_fields(), 22) / ticks_per_second();
}

}  // namespace

void register_process_metrics(Registry& registry) {
  registry.counter_function_seconds("process_cpu_seconds_total",
                                    "Total user and system CPU time spent in seconds.", {},
                                    cpu_seconds);
  registry.gauge("process_resident_memory_bytes", "Resident memory size in bytes.", {},
                 resident_bytes);
  registry.gauge("process_open_fds", "Number of open file descriptors.", {}, open_fds);
  registry.gauge("process_max_fds", "Maximum number of open file descriptors.", {}, max_fds);
  const double started = start_time_seconds();
  registry.gauge("process_start_time_seconds",
                 "Start time of the process since unix epoch in seconds.", {},
                 [started] { return started; });
}

void register_build_info(Registry& registry, std::string_view version) {
  registry.gauge("sluice_build_info", "1, labelled with the version and commit of this build.",
                 {{"version", std::string(version)}, {"commit", SLUICE_COMMIT}},
                 [] { return 1.0; });
}

}  // namespace sluice::observe
