// `sluice simulate` on the command line: options, defaults, exit codes and
// error messages, a trace file, --delay's per-request output. The engine's
// numbers are tested in tests/unit/simulate_test.cc.
#include "cli/simulate.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::cli {
namespace {

struct CommandRun {
  int code;
  std::string out, err;
};

CommandRun run(std::vector<std::string_view> args) {
  std::ostringstream out, err;
  const int code = run_simulate(args, out, err);
  return {code, out.str(), err.str()};
}

std::string write_temp(const std::string& name, std::string_view text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// The table itself is the engine's (tests/unit/simulate_test.cc pins it).
TEST(SimulateCommand, DefaultsToBoundaryBurstTable) {
  const CommandRun r = run({});
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.err, "");
  const CommandRun spelled_out = run(
      {"--scenario", "boundary-burst", "--limit", "100", "--window", "1m", "--format", "table"});
  EXPECT_EQ(spelled_out.code, 0) << spelled_out.err;
  EXPECT_EQ(r.out, spelled_out.out);
  EXPECT_EQ(r.out.rfind("Scenario boundary-burst", 0), 0u) << r.out;
}

TEST(SimulateCommand, LimitAndWindowOverride) {
  const CommandRun r =
      run({"--scenario", "boundary-burst", "--limit=10", "--window", "1s", "--format", "csv"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "scenario,limit,window_ms,algorithm,allowed,denied,max_in_window\n"
            "boundary-burst,10,1000,token_bucket,10,10,10\n"
            "boundary-burst,10,1000,gcra,10,10,10\n"
            "boundary-burst,10,1000,fixed_window,20,0,20\n"
            "boundary-burst,10,1000,sliding_log,10,10,10\n"
            "boundary-burst,10,1000,sliding_window,10,10,10\n");
}

// Three requests of one key at one instant against 2 per second: every
// algorithm allows two and denies the third.
TEST(SimulateCommand, ReplaysATraceFile) {
  const std::string path =
      write_temp("sluice_simulate_trace.csv", "time_ms,key,cost\n1000,a,1\n1000,a,1\n1000,a,1\n");
  const CommandRun r = run({"--trace", path, "--limit", "2", "--window", "1s", "--format", "csv"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "scenario,limit,window_ms,algorithm,allowed,denied,max_in_window\n"
            "trace,2,1000,token_bucket,2,1,2\n"
            "trace,2,1000,gcra,2,1,2\n"
            "trace,2,1000,fixed_window,2,1,2\n"
            "trace,2,1000,sliding_log,2,1,2\n"
            "trace,2,1000,sliding_window,2,1,2\n");
}

TEST(SimulateCommand, BadTraceLinesExitOne) {
  const std::string path = write_temp("sluice_simulate_bad.csv", "0,a,1\n1,a\n");
  const CommandRun r = run({"--trace", path});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, path + ":2: expected 3 fields time_ms,key,cost, got 2\n");
}

TEST(SimulateCommand, MissingTraceExitsOne) {
  const CommandRun r = run({"--trace", "/nonexistent/sluice.csv"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err,
            "sluice simulate: cannot read /nonexistent/sluice.csv: No such file or directory\n");
}

TEST(SimulateCommand, UsageErrorsExitTwo) {
  const std::string hint = "\nRun 'sluice simulate --help' for the options.\n";
  EXPECT_EQ(run({"--bogus"}).err, "sluice simulate: unknown option '--bogus'" + hint);
  EXPECT_EQ(run({"--format", "xml"}).err,
            "sluice simulate: --format must be table, csv or json, got 'xml'" + hint);
  EXPECT_EQ(run({"--limit"}).err, "sluice simulate: --limit needs a value" + hint);
  EXPECT_EQ(run({"--scenario", "x", "--trace", "y"}).err,
            "sluice simulate: give --scenario or --trace, not both" + hint);
  for (std::vector<std::string_view> args :
       std::vector<std::vector<std::string_view>>{{"--bogus"},
                                                  {"extra"},
                                                  {"--limit", "0"},
                                                  {"--limit", "10001"},
                                                  {"--window", "5x"},
                                                  {"--window", "5000d"},
                                                  {"--scenario", "nope"},
                                                  {"--format", "xml"}}) {
    const CommandRun r = run(args);
    EXPECT_EQ(r.code, 2) << args[0];
    EXPECT_EQ(r.out, "") << args[0];
  }
}

TEST(SimulateCommand, HelpExplainsEverything) {
  const CommandRun r = run({"--help"});
  EXPECT_EQ(r.code, 0);
  for (std::string_view word :
       {"--scenario", "boundary-burst", "steady", "bursty", "--trace", "time_ms,key,cost",
        "--limit", "--window", "--format", "max in any W", "Exit status"}) {
    EXPECT_NE(r.out.find(word), std::string::npos) << word;
  }
}

// ---- --delay: when each request is served ------------------------------

// nginx's rate=10r/s burst=4 (no nodelay) as a simulation: 10 at once, 2 at
// +150 ms, 3 at +700 ms, 1 at +1250 ms (tests/e2e/queueing_nginx_test.cc
// sends the same trace to nginx).
constexpr std::string_view kQueueTrace =
    "time_ms,key,cost\n"
    "1000,a,1\n1000,a,1\n1000,a,1\n1000,a,1\n1000,a,1\n"
    "1000,a,1\n1000,a,1\n1000,a,1\n1000,a,1\n1000,a,1\n"
    "1150,a,1\n1150,a,1\n"
    "1700,a,1\n1700,a,1\n1700,a,1\n"
    "2250,a,1\n";

TEST(SimulateCommand, DelayPrintsWhenEachRequestIsServed) {
  const std::string path = write_temp("sluice_simulate_queue.csv", kQueueTrace);
  const CommandRun r = run({"--trace", path, "--limit", "1", "--window", "100ms", "--delay",
                            "400ms", "--format", "csv"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "time_ms,key,cost,served,served_ms,wait_ms\n"
            "1000.000,a,1,true,1000.000,0.000\n"
            "1000.000,a,1,true,1100.000,100.000\n"
            "1000.000,a,1,true,1200.000,200.000\n"
            "1000.000,a,1,true,1300.000,300.000\n"
            "1000.000,a,1,true,1400.000,400.000\n"
            "1000.000,a,1,false,,\n"
            "1000.000,a,1,false,,\n"
            "1000.000,a,1,false,,\n"
            "1000.000,a,1,false,,\n"
            "1000.000,a,1,false,,\n"
            "1150.000,a,1,true,1500.000,350.000\n"
            "1150.000,a,1,false,,\n"
            "1700.000,a,1,true,1700.000,0.000\n"
            "1700.000,a,1,true,1800.000,100.000\n"
            "1700.000,a,1,true,1900.000,200.000\n"
            "2250.000,a,1,true,2250.000,0.000\n");
}

// A turn that is not a whole millisecond (3 per second), in the table and
// in JSON; each key queues on its own.
TEST(SimulateCommand, DelayTableAndJson) {
  const std::string path = write_temp(
      "sluice_simulate_queue3.csv", "1000,a,1\n1000,a,1\n1000,b,1\n1000,a,1\n1000,a,1\n1000,a,1\n");
  CommandRun r = run({"--trace", path, "--limit", "3", "--window", "1s", "--delay", "400ms"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "Trace " + path +
                       ", token_bucket 3 per 1s with delay 400ms (gcra serves at the same turns)\n"
                       "Traffic: 6 requests, 2 keys, over 0s\n"
                       "5 served (1 of them held), 1 denied\n"
                       "\n"
                       "arrived       key  cost  served        waited\n"
                       "00:00:01      a       1  00:00:01      0s\n"
                       "00:00:01      a       1  00:00:01      0s\n"
                       "00:00:01      b       1  00:00:01      0s\n"
                       "00:00:01      a       1  00:00:01      0s\n"
                       "00:00:01      a       1  00:00:01.333  333.333ms\n"
                       "00:00:01      a       1  denied        -\n");
  r = run(
      {"--trace", path, "--limit", "3", "--window", "1s", "--delay", "400ms", "--format", "json"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "{\n"
            "  \"scenario\": \"trace\",\n"
            "  \"algorithm\": \"token_bucket\",\n"
            "  \"limit\": 3,\n"
            "  \"window_ms\": 1000,\n"
            "  \"delay_ms\": 400.000,\n"
            "  \"requests\": [\n"
            "    {\"time_ms\": 1000.000, \"key\": \"a\", \"cost\": 1, \"served\": true, "
            "\"served_ms\": 1000.000, \"wait_ms\": 0.000},\n"
            "    {\"time_ms\": 1000.000, \"key\": \"a\", \"cost\": 1, \"served\": true, "
            "\"served_ms\": 1000.000, \"wait_ms\": 0.000},\n"
            "    {\"time_ms\": 1000.000, \"key\": \"b\", \"cost\": 1, \"served\": true, "
            "\"served_ms\": 1000.000, \"wait_ms\": 0.000},\n"
            "    {\"time_ms\": 1000.000, \"key\": \"a\", \"cost\": 1, \"served\": true, "
            "\"served_ms\": 1000.000, \"wait_ms\": 0.000},\n"
            "    {\"time_ms\": 1000.000, \"key\": \"a\", \"cost\": 1, \"served\": true, "
            "\"served_ms\": 1333.333, \"wait_ms\": 333.333},\n"
            "    {\"time_ms\": 1000.000, \"key\": \"a\", \"cost\": 1, \"served\": false}\n"
            "  ]\n"
            "}\n");
}

TEST(SimulateCommand, DelayRefusesABadDuration) {
  const CommandRun r = run({"--delay", "1.5s"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err,
            "sluice simulate: --delay must be a duration like 500ms, 1s, 1m, 1h, 1d or 1w, got "
            "\"1.5s\" (whole numbers only: write 1500ms, not 1.5s)\n"
            "Run 'sluice simulate --help' for the options.\n");
}

// ---- slow-upstream -------------------------------------------------------

TEST(SimulateSlowUpstream, TheCommandPrintsTheTable) {
  const CommandRun r = run({"--scenario", "slow-upstream", "--format", "csv"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "scenario,limit,window_ms,max,algorithm,allowed,denied,max_in_flight\n"
            "slow-upstream,100,60000,10,token_bucket,500,0,25\n"
            "slow-upstream,100,60000,10,gcra,500,0,25\n"
            "slow-upstream,100,60000,10,fixed_window,500,0,25\n"
            "slow-upstream,100,60000,10,sliding_log,500,0,25\n"
            "slow-upstream,100,60000,10,sliding_window,500,0,25\n"
            "slow-upstream,100,60000,10,concurrency,200,300,10\n");
}

}  // namespace
}  // namespace sluice::cli
