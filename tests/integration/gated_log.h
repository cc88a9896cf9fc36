// Checking a log whose lines pass a rate gate (observe::DenialLogGate): the
// lines that name an event, and how many events their notes say went
// unlogged ("... (12 failed handshakes not logged before this one)"), so a
// test can check that every event is accounted for exactly once.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <string>
#include <thread>

#include "sluice_process.h"

namespace sluice::test {

struct GatedLines {
  int lines = 0;             // lines containing the marker
  long long not_logged = 0;  // the counts their notes give
};

inline GatedLines gated_lines(const std::string& log, const std::string& marker,
                              const std::string& what) {
  GatedLines out;
  std::istringstream in(log);
  const std::string note_end = " " + what + " not logged before this one)";
  for (std::string line; std::getline(in, line);) {
    if (line.find(marker) == std::string::npos) continue;
    ++out.lines;
    const size_t end = line.rfind(note_end);
    if (end == std::string::npos) continue;
    const size_t open = line.rfind(" (", end);
    if (open != std::string::npos) out.not_logged += std::atoll(line.c_str() + open + 2);
  }
  return out;
}

// Causes `count` events, each counted by the metric `series` and logged as a
// line holding `marker` through a gate of one line a second (the default
// logging.denial_log_per_second), and checks that the log keeps to the gate
// meanwhile. Then causes one more every 250 ms until the next line comes, and
// checks that the lines and their notes account for every event exactly once.
inline void expect_gated_log(const SluiceProcess& server, const std::function<void()>& cause,
                             int count, const std::string& series, const std::string& marker,
                             const std::string& what) {
  using std::chrono::steady_clock;
  const auto start = steady_clock::now();
  for (int i = 0; i < count; ++i) cause();
  ASSERT_TRUE(server.wait_for_metric(series, count)) << server.metric(series);
  const double elapsed = std::chrono::duration<double>(steady_clock::now() - start).count();
  const GatedLines during = gated_lines(server.log(), marker, what);
  EXPECT_GE(during.lines, 1);
  // The first at once, then at most one a second.
  EXPECT_LE(during.lines, 2 + static_cast<int>(elapsed)) << server.log();
  int caused = count;
  const auto deadline = steady_clock::now() + std::chrono::seconds(20);
  while (gated_lines(server.log(), marker, what).lines == during.lines &&
         steady_clock::now() < deadline) {
    cause();
    ++caused;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  ASSERT_TRUE(server.wait_for_metric(series, caused)) << server.metric(series);
  const GatedLines after = gated_lines(server.log(), marker, what);
  EXPECT_GT(after.lines, during.lines);
  EXPECT_EQ(after.lines + after.not_logged, caused) << server.log();
}

}  // namespace sluice::test
