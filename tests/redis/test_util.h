// Helpers shared by the Redis store tests.
#pragma once

#include <gtest/gtest.h>

#include <spdlog/logger.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "redis_server.h"
#include "sluice/redis_store.h"
#include "sluice/sluice.h"

namespace sluice::testing {

using namespace std::chrono_literals;

// What a call may take beyond its timeout on a loaded machine (sanitizers,
// ctest -j, other builds): a bound that tells a call ended by its timeout
// from one that hung, or waited for the 2 s stall timeout.
inline constexpr auto kLateMargin = 500ms;

// 2026-ish in microseconds, not aligned to any window.
inline constexpr int64_t kEpochUs = 1'780'000'000'123'457;
inline Nanos us(int64_t v) {
  return Nanos{v * 1'000};
}

inline RedisStoreOptions local_options(const std::string& address) {
  RedisStoreOptions o;
  o.addresses = {address};
  o.time_source = RedisTimeSource::kLocal;
  // Generous: the tests run under sanitizers on a shared machine.
  o.timeout = 500ms;
  o.health_interval = 50ms;
  // Key TTLs run on Redis's real clock while these tests move a made-up
  // `now`: keep every key for a minute more than its state needs.
  o.ttl_extra = 60s;
  return o;
}

inline std::shared_ptr<RedisStore> make_store(RedisStoreOptions o) {
  auto store = RedisStore::create(std::move(o));
  EXPECT_TRUE(store.ok()) << (store.ok() ? "" : store.error().message);
  if (!store.ok()) return nullptr;
  EXPECT_TRUE((*store)->wait_ready(5s));
  return *store;
}

inline Limit must(Result<Limit> r) {
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return std::move(r).value();
}

// Checks `done` every millisecond until it holds or `timeout` passes; returns
// whether it holds.
template <class Done>
bool wait_until(Done done, std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// One limit, one key: the decision or the error.
inline Result<Decision> acquire_one(Store& store, const Limit& limit, std::string_view key,
                                    Nanos now, uint64_t cost = 1) {
  AcquireRequest r{&limit, key, cost};
  Decision d;
  Status s = store.acquire({&r, 1}, now, {&d, 1});
  if (!s.ok()) return s.error();
  return d;
}

// The store's log lines while it lives (spdlog's default logger).
class LogCapture {
 public:
  LogCapture()
      : sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(256)),
        previous_(spdlog::default_logger()) {
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("redis_test", sink_));
  }
  ~LogCapture() { spdlog::set_default_logger(previous_); }

  // The first line holding `text`, or "".
  std::string line_with(std::string_view text) const {
    for (const std::string& line : sink_->last_formatted()) {
      if (line.find(text) != std::string::npos) return line;
    }
    return "";
  }
  std::string all() const {
    std::string out;
    for (const std::string& line : sink_->last_formatted()) out.append(line);
    return out;
  }

 private:
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
  std::shared_ptr<spdlog::logger> previous_;
};

// An io_context run by its own thread, attached to a store: async calls are
// made from that thread, as a server worker makes them. The thread's
// connections open at attach() and a call never waits for them, so the
// driver waits for them first (as `sluice serve` does before it accepts),
// unless Redis is found unreachable.
class AsyncDriver {
 public:
  // kLater: the test attaches the thread itself (run([&] { store->attach(io()); })).
  enum class Attach { kNowAndWait, kLater };

  explicit AsyncDriver(std::shared_ptr<RedisStore> store, Attach attach = Attach::kNowAndWait)
      : store_(std::move(store)), work_(boost::asio::make_work_guard(io_)) {
    thread_ = std::thread([this] { io_.run(); });
    if (attach == Attach::kLater) return;
    run([this] { store_->attach(io_); });
    EXPECT_TRUE(store_->wait_connected(10s).ok());
  }
  ~AsyncDriver() {
    run([this] { store_->detach(); });
    work_.reset();
    thread_.join();
  }

  boost::asio::io_context& io() { return io_; }

  // Runs f on the loop thread and waits for it.
  template <class F>
  void run(F&& f) {
    std::promise<void> p;
    boost::asio::post(io_, [&] {
      f();
      p.set_value();
    });
    p.get_future().wait();
  }

  struct Outcome {
    Status status;
    Decision decision;
    std::chrono::steady_clock::duration latency{};
    bool at_once = false;  // completed before acquire_async returned
  };

  // One acquire_async issued on the loop thread; waits for its completion.
  Outcome call(const Limit& limit, std::string key, Nanos now, uint64_t cost = 1) {
    auto outcomes = calls(limit, {std::move(key)}, now, cost);
    return outcomes.front();
  }

  // Many calls issued in one loop turn; waits for all.
  std::vector<Outcome> calls(const Limit& limit, std::vector<std::string> keys, Nanos now,
                             uint64_t cost = 1) {
    const size_t n = keys.size();
    std::vector<Outcome> out(n);
    std::vector<AcquireRequest> requests(n);
    std::vector<char> returned(n, 0);  // acquire_async(i) has returned
    std::promise<void> all_done;
    size_t remaining = n;
    run([&] {
      for (size_t i = 0; i < n; ++i) {
        requests[i] = {&limit, keys[i], cost};
        const auto start = std::chrono::steady_clock::now();
        store_->acquire_async({&requests[i], 1}, now, {&out[i].decision, 1},
                              [&, i, start](Status s) {
                                out[i].status = std::move(s);
                                out[i].latency = std::chrono::steady_clock::now() - start;
                                out[i].at_once = returned[i] == 0;
                                if (--remaining == 0) all_done.set_value();
                              });
        returned[i] = 1;
      }
    });
    all_done.get_future().wait();
    return out;
  }

 private:
  std::shared_ptr<RedisStore> store_;
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::thread thread_;
};

}  // namespace sluice::testing
