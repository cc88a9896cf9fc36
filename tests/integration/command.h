// Runs a program to its end and keeps what it printed: for the tests that
// drive command-line tools (the unpacked package's binary, podman, sluice
// validate). Header-only; every run is bounded in time.
#pragma once

#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "gateway_support.h"  // spawn_program, wait_until, stop_child
#include "sluice_process.h"   // make_temp_dir, remove_dir

namespace sluice::test {

struct CommandResult {
  std::optional<int> exit_code;  // nullopt: killed by a signal, or still running at the bound
  std::string output;            // stdout and stderr together
};

// Runs argv[0] (a path) to its end, its output in a file; stops it if it
// runs past `timeout`.
inline CommandResult run_command(const std::vector<std::string>& args,
                                 std::chrono::seconds timeout = std::chrono::seconds(60)) {
  const std::string dir = make_temp_dir();
  const std::string out_path = dir + "/output";
  CommandResult result;
  const pid_t pid = spawn_program(args, out_path);
  if (pid < 0) {
    result.output = "cannot start " + args[0];
  } else {
    int status = 0;
    const bool exited = wait_until([&] { return ::waitpid(pid, &status, WNOHANG) == pid; },
                                   std::chrono::duration_cast<std::chrono::milliseconds>(timeout));
    if (!exited) status = stop_child(pid);
    std::ifstream in(out_path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    result.output = text.str();
    if (exited && WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  }
  remove_dir(dir);
  return result;
}

}  // namespace sluice::test
