// The standard process metrics and sluice_build_info on /metrics, checked
// against what /proc says of the server's process around the scrape.
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>

#include "test_support.h"

namespace sluice::test {
namespace {

const std::string kYaml = R"(
routes:
  - match: GET /a
    limits: [{capacity: 3, refill_rate: 1/h}]
)";

// Every unlabelled series of a scrape, by name.
std::map<std::string, double> unlabelled_series(const std::string& scrape) {
  std::map<std::string, double> out;
  std::istringstream in(scrape);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#' || line.find('{') != std::string::npos) continue;
    const size_t space = line.find(' ');
    out[line.substr(0, space)] = std::strtod(line.c_str() + space + 1, nullptr);
  }
  return out;
}

// utime + stime of `pid` in seconds, from /proc.
double cpu_seconds_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(in, line);
  std::istringstream rest(line.substr(line.rfind(')') + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int n = 3; rest >> field && n <= 15; ++n) {
    if (n == 14) utime = std::strtod(field.c_str(), nullptr);
    if (n == 15) stime = std::strtod(field.c_str(), nullptr);
  }
  return (utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

size_t open_fds_of(pid_t pid) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
    ++n;
  }
  return n;
}

// The soft "Max open files" of /proc/PID/limits.
double max_fds_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/limits");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Max open files", 0) == 0) {
      return std::strtod(line.c_str() + std::string("Max open files").size(), nullptr);
    }
  }
  return -1;
}

double vm_rss_bytes_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtod(line.c_str() + 6, nullptr) * 1024;
  }
  return -1;
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

TEST(ProcessMetrics, AreTheServersProcessAsProcSaysAroundTheScrape) {
  const double before_start = unix_now();
  const auto server = SluiceProcess::start(kYaml);
  ASSERT_NE(server, nullptr);
  const double after_start = unix_now();
  EXPECT_EQ(count_allowed(*server, "GET", "/a", 5), 3);

  const pid_t pid = server->pid();
  const double cpu_before = cpu_seconds_of(pid);
  const size_t fds_before = open_fds_of(pid);
  const HttpResponse scrape = server->admin_get("/metrics");
  const double cpu_after = cpu_seconds_of(pid);
  ASSERT_EQ(scrape.status, 200);
  const auto series = unlabelled_series(scrape.body);

  ASSERT_EQ(series.count("process_cpu_seconds_total"), 1u) << scrape.body;
  EXPECT_GE(series.at("process_cpu_seconds_total"), cpu_before);
  EXPECT_LE(series.at("process_cpu_seconds_total"), cpu_after);
  EXPECT_GT(series.at("process_cpu_seconds_total"), 0);

  // The scrape's own connection is open while it is answered; a connection
  // of the requests before may still be closing.
  ASSERT_EQ(series.count("process_open_fds"), 1u);
  EXPECT_GE(series.at("process_open_fds"), static_cast<double>(fds_before) - 2);
  EXPECT_LE(series.at("process_open_fds"), static_cast<double>(fds_before) + 1);

  ASSERT_EQ(series.count("process_max_fds"), 1u);
  EXPECT_EQ(series.at("process_max_fds"), max_fds_of(pid));

  ASSERT_EQ(series.count("process_start_time_seconds"), 1u);
  // The boot time /proc gives is whole seconds.
  EXPECT_GE(series.at("process_start_time_seconds"), before_start - 1);
  EXPECT_LE(series.at("process_start_time_seconds"), after_start + 1);

  ASSERT_EQ(series.count("process_resident_memory_bytes"), 1u);
  const double rss = vm_rss_bytes_of(pid);
  EXPECT_GT(series.at("process_resident_memory_bytes"), rss / 2);
  EXPECT_LT(series.at("process_resident_memory_bytes"), rss * 2);
}

TEST(ProcessMetrics, BuildInfoNamesTheVersionAndTheCommit) {
  const auto server = SluiceProcess::start(kYaml);
  ASSERT_NE(server, nullptr);
  const std::string scrape = server->admin_get("/metrics").body;
  EXPECT_NE(scrape.find("# TYPE sluice_build_info gauge\n"), std::string::npos);
  const std::regex line(std::string(R"((^|\n)sluice_build_info\{version=")") + SLUICE_VERSION +
                        R"re(",commit="([0-9a-f]{12}|unknown)"\} 1\n)re");
  EXPECT_TRUE(std::regex_search(scrape, line)) << scrape;
}

}  // namespace
}  // namespace sluice::test
