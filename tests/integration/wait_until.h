// Polling for the tests that drive a real server: the wait every helper and
// test uses for an event it can only observe from outside (a log line, a
// metric, an exit).
#pragma once

#include <chrono>
#include <thread>

namespace sluice::test {

// Polls `done` every 10 ms until it is true; false after `timeout`. Checks
// at least once.
template <class Done>
bool wait_until(Done done, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

}  // namespace sluice::test
