// Load for the chaos tests: rounds of one call per key, each round issued in
// one loop turn of an AsyncDriver (so that calls batch as a server's do), on
// a thread of its own, until a predicate says so or a bound ends it. Every
// call is recorded with when it was issued and answered.
#pragma once

#include <algorithm>
#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace sluice::testing {

class Load {
 public:
  using Clock = std::chrono::steady_clock;

  struct Record {
    size_t key = 0;  // index into the keys
    bool ok = false;
    bool allowed = false;
    ErrorCode code = ErrorCode::kInternal;  // when !ok
    Clock::time_point issued;
    Clock::time_point answered;
  };

  // Whether to stop after a round: its records, one per active key.
  using Done = std::function<bool(const std::vector<Record>& round)>;

  // Calls go to keys[0, active) each round; `active` may grow meanwhile. A
  // round starts at least `min_round` after the one before: when every
  // answer is local (the deny cache) or immediate (a node down), an optimised
  // build would otherwise spend `max_rounds` before a failover has happened.
  Load(AsyncDriver& driver, const Limit& limit, std::vector<std::string> keys, size_t active,
       Done done, std::chrono::milliseconds max_time, size_t max_rounds,
       std::chrono::microseconds min_round = std::chrono::microseconds(0))
      : driver_(driver),
        limit_(limit),
        keys_(std::move(keys)),
        active_(active),
        done_(std::move(done)),
        max_time_(max_time),
        max_rounds_(max_rounds),
        min_round_(min_round) {
    thread_ = std::thread([this] { run(); });
  }
  ~Load() { join(); }

  void join() {
    if (thread_.joinable()) thread_.join();
  }
  size_t rounds() const { return rounds_.load(); }
  bool running() const { return !finished_.load(); }
  // Whether it ended because `done` said so (not by a bound).
  bool completed() const { return completed_.load(); }
  void activate(size_t n) { active_.store(n); }
  // Waits until `n` more rounds have run (or the load ended); false then.
  bool wait_rounds(size_t n) {
    const size_t target = rounds() + n;
    return wait_until([&] { return rounds() >= target || !running(); }, max_time_) &&
           rounds() >= target;
  }

  // Read after join().
  const std::vector<Record>& records() const { return records_; }
  const std::vector<std::string>& keys() const { return keys_; }

 private:
  void run() {
    const auto until = Clock::now() + max_time_;
    std::vector<Record> round;
    for (size_t r = 0; r < max_rounds_ && Clock::now() < until; ++r) {
      const size_t active = active_.load();
      const std::vector<std::string> keys(keys_.begin(),
                                          keys_.begin() + static_cast<ptrdiff_t>(active));
      const auto issued = Clock::now();
      const auto outcomes = driver_.calls(limit_, keys, us(kEpochUs));
      round.clear();
      for (size_t i = 0; i < outcomes.size(); ++i) {
        const auto& o = outcomes[i];
        Record rec;
        rec.key = i;
        rec.ok = o.status.ok();
        rec.allowed = rec.ok && o.decision.allowed;
        if (!rec.ok) rec.code = o.status.error().code;
        rec.issued = issued;
        rec.answered = issued + o.latency;
        round.push_back(rec);
      }
      records_.insert(records_.end(), round.begin(), round.end());
      rounds_.fetch_add(1);
      if (done_(round)) {
        completed_.store(true);
        break;
      }
      if (min_round_.count() > 0) std::this_thread::sleep_until(issued + min_round_);
    }
    finished_.store(true);
  }

  AsyncDriver& driver_;
  const Limit& limit_;
  const std::vector<std::string> keys_;
  std::atomic<size_t> active_;
  Done done_;
  const std::chrono::milliseconds max_time_;
  const size_t max_rounds_;
  const std::chrono::microseconds min_round_;
  std::vector<Record> records_;
  std::atomic<size_t> rounds_{0};
  std::atomic<bool> finished_{false};
  std::atomic<bool> completed_{false};
  std::thread thread_;
};

// The moment a test saw a replica promoted, and the end of a failover test's
// load that follows from it.
class Promotion {
 public:
  using Clock = Load::Clock;

  // Marks the promotion as seen now; returns when.
  Clock::time_point seen() {
    const auto now = Clock::now();
    at_.store(now.time_since_epoch().count());
    seen_.store(true);
    return now;
  }

  // Waits up to 30 s for `promoted()` to hold, marks it seen (`*seen_at`),
  // then for `load` to end; false if it never held.
  template <class Promoted>
  bool await(Promoted promoted, Load& load, Clock::time_point* seen_at) {
    const bool held = wait_until(promoted, std::chrono::seconds(30));
    *seen_at = seen();
    load.join();
    return held;
  }

  // A Load's Done: a round issued after the promotion in which every key was
  // decided and denied (every key has had its limit).
  Load::Done every_key_denied_after() const {
    return [this](const std::vector<Load::Record>& round) {
      if (!seen_.load() || round.front().issued.time_since_epoch().count() <= at_.load())
        return false;
      return std::all_of(round.begin(), round.end(),
                         [](const Load::Record& r) { return r.ok && !r.allowed; });
    };
  }

 private:
  std::atomic<bool> seen_{false};
  std::atomic<Clock::rep> at_{0};
};

}  // namespace sluice::testing
