// Decisions per second through RedisStore, in process: `--threads` worker
// threads, each with its own io_context attached to the store, keep
// `--in-flight` calls outstanding (pipelined on one connection per thread)
// for `--seconds`. Prints decisions/s and, given `--redis-pid`, Redis CPU
// time per decision from /proc/<pid>/stat (utime + stime).
//
//   redis_throughput --address 127.0.0.1:6379 --seconds 5 --in-flight 256
//       --keys 10000 --threads 1 --redis-pid 1234 [--time local] [--limits 1..4]
//       [--max-batch N] [--cluster yes]   (then --address is a seed and --redis-pid may list
//                          every master's pid, comma-separated)
//       [--mode cached] [--sync-interval MS]   cached mode (local decisions, hits synced)
//       [--denied N]       N requests in 10 go to a limit of 1 per hour on their key (denied
//                          after its first; a fixed window with --algorithm fixed_window),
//                          the others to the normal limits: with N = 9, a 90%-denied
//                          load for the deny cache
//       [--deny-cache no]  turns the deny cache off
//       [--algorithm fixed_window]  the first limit a fixed window of 1,000 per 5 s
//                          (one limit: the fixed window's fast path) instead of
//                          the token bucket
//       [--fast-path no]   turns the fixed window's fast path off (the general script)
//       [--refill N]       the token bucket refills N per second (default 20: a state
//                          needs about 100 ms of TTL after a decision; 1: about 2 s)
//       [--rate N]         at most N decisions/s in all (per thread, released every 1 ms
//                          as one turn's requests): two builds
//                          compared at one rate give every key the same time between
//                          its decisions, so the same share of states whose TTL ran out
// Prints Sluice CPU per decision too: this process's (getrusage) over the run.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "sluice/redis_store.h"
#include "sluice/sluice.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  std::string address = "127.0.0.1:6379";
  double seconds = 5;
  int in_flight = 256;
  int keys = 10'000;
  int threads = 1;
  std::vector<long> redis_pids;
  bool cluster = false;
  bool local_time = false;
  int limits = 1;  // limits per request (all-or-nothing)
  int max_batch = 64;
  bool cached = false;
  int sync_interval_ms = 50;
  int denied = 0;  // of 10 requests
  bool deny_cache = true;
  bool fixed_window = false;
  bool fast_path = true;
  double rate = 0;  // decisions/s in all, 0 for as many as the calls in flight allow
  int refill = 20;  // the token bucket's tokens per second
};

// This process's user + system CPU time, in microseconds.
long long own_cpu_us() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1'000'000LL + u.ru_utime.tv_usec +
         u.ru_stime.tv_usec;
}

// utime + stime of a process, in clock ticks.
long long cpu_ticks(long pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(f, line);
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  long long utime = 0;
  long long stime = 0;
  // Fields after the command: state is field 3; utime and stime are 14 and 15.
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stoll(field);
    if (i == 15) stime = std::stoll(field);
  }
  return utime + stime;
}

struct Worker {
  sluice::RedisStore* store = nullptr;
  const std::vector<sluice::Limit>* limits = nullptr;
  const sluice::Limit* exhausted = nullptr;  // with --denied
  int denied = 0;
  uint64_t issued = 0;
  const std::vector<std::string>* keys = nullptr;
  bool local_time = false;
  boost::asio::io_context io;
  Clock::time_point stop_at;
  uint64_t done = 0;
  uint64_t allowed = 0;
  uint64_t errors = 0;
  uint64_t next_key = 0;
  int outstanding = 0;
  double rate = 0;     // this thread's decisions/s with --rate, else 0
  uint64_t turns = 0;  // with --rate: the requests issued
  Clock::time_point started;
  std::vector<size_t> idle;  // with --rate: the slots waiting for their turn
  std::unique_ptr<boost::asio::steady_timer> tick;
  bool ticking = false;

  struct Slot {
    sluice::AcquireRequest requests[4];
    sluice::Decision out[4];
  };
  std::vector<Slot> slots;

  // Issues slot s's next request now, or with --rate at the next tick.
  void issue(size_t s) {
    if (rate <= 0) return issue_now(s);
    idle.push_back(s);
    if (!ticking) arm();
  }

  // Every millisecond the requests due by then leave together, as the
  // requests of one loop turn of a server would: a paced run still batches.
  void arm() {
    if (!tick) tick = std::make_unique<boost::asio::steady_timer>(io);
    ticking = true;
    tick->expires_after(std::chrono::milliseconds(1));
    tick->async_wait([this](const boost::system::error_code& ec) {
      ticking = false;
      if (ec || Clock::now() >= stop_at) return;
      const double elapsed = std::chrono::duration<double>(Clock::now() - started).count();
      const auto due = static_cast<uint64_t>(elapsed * rate);
      while (!idle.empty() && turns < due) {
        const size_t s = idle.back();
        idle.pop_back();
        ++turns;
        issue_now(s);
      }
      if (!idle.empty()) arm();
    });
  }

  void issue_now(size_t s) {
    Slot& slot = slots[s];
    const std::string& key = (*keys)[next_key++ % keys->size()];
    size_t n = limits->size();
    for (size_t i = 0; i < n; ++i) slot.requests[i] = {&(*limits)[i], key, 1};
    if (static_cast<int>(issued++ % 10) < denied) {
      n = 1;
      slot.requests[0] = {exhausted, key, 1};
    }
    ++outstanding;
    const sluice::Nanos now = local_time ? sluice::SystemClock::instance().now() : sluice::Nanos{0};
    store->acquire_async({slot.requests, n}, now, {slot.out, n}, [this, s](sluice::Status st) {
      --outstanding;
      ++done;
      if (!st.ok()) {
        ++errors;
      } else if (slots[s].out[0].allowed) {
        ++allowed;
      }
      // Re-issue from a fresh handler so that a synchronous failure cannot recurse.
      if (Clock::now() < stop_at) boost::asio::post(io, [this, s] { issue(s); });
    });
  }

  void run(int in_flight) {
    store->attach(io);
    // This thread's connection opens now, on this loop: calls fail until it is up.
    const auto connect_by = Clock::now() + std::chrono::seconds(5);
    while (!store->ready() && Clock::now() < connect_by)
      io.run_one_for(std::chrono::milliseconds(10));
    started = Clock::now();
    slots.resize(static_cast<size_t>(in_flight));
    for (int s = 0; s < in_flight; ++s) issue(static_cast<size_t>(s));
    while (outstanding > 0 || Clock::now() < stop_at) io.run_one_for(std::chrono::milliseconds(50));
    store->detach();
  }
};

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* v = argv[i + 1];
    if (flag == "--address") {
      a.address = v;
    } else if (flag == "--seconds") {
      a.seconds = std::atof(v);
    } else if (flag == "--in-flight") {
      a.in_flight = std::atoi(v);
    } else if (flag == "--keys") {
      a.keys = std::atoi(v);
    } else if (flag == "--threads") {
      a.threads = std::atoi(v);
    } else if (flag == "--redis-pid") {
      for (const char* p = v; *p != '\0';) {
        a.redis_pids.push_back(std::strtol(p, nullptr, 10));
        const char* comma = std::strchr(p, ',');
        if (comma == nullptr) break;
        p = comma + 1;
      }
    } else if (flag == "--cluster") {
      a.cluster = std::strcmp(v, "yes") == 0;
    } else if (flag == "--time") {
      a.local_time = std::strcmp(v, "local") == 0;
    } else if (flag == "--limits") {
      a.limits = std::atoi(v);
    } else if (flag == "--max-batch") {
      a.max_batch = std::atoi(v);
    } else if (flag == "--mode") {
      a.cached = std::strcmp(v, "cached") == 0;
    } else if (flag == "--sync-interval") {
      a.sync_interval_ms = std::atoi(v);
    } else if (flag == "--denied") {
      a.denied = std::atoi(v);
    } else if (flag == "--deny-cache") {
      a.deny_cache = std::strcmp(v, "no") != 0;
    } else if (flag == "--algorithm") {
      a.fixed_window = std::strcmp(v, "fixed_window") == 0;
      if (!a.fixed_window && std::strcmp(v, "token_bucket") != 0) {
        std::fprintf(stderr, "--algorithm: token_bucket or fixed_window\n");
        return 2;
      }
    } else if (flag == "--fast-path") {
      a.fast_path = std::strcmp(v, "no") != 0;
    } else if (flag == "--rate") {
      a.rate = std::atof(v);
    } else if (flag == "--refill") {
      a.refill = std::atoi(v);
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (a.limits < 1 || a.limits > 4) {
    std::fprintf(stderr, "--limits must be 1..4\n");
    return 2;
  }
  sluice::RedisStoreOptions o;
  o.addresses = {a.address};
  o.cluster = a.cluster;
  o.max_batch = static_cast<size_t>(std::max(a.max_batch, 1));
  o.timeout = std::chrono::milliseconds(1'000);
  o.time_source = a.local_time ? sluice::RedisTimeSource::kLocal : sluice::RedisTimeSource::kRedis;
  o.deny_cache = a.deny_cache;
  o.fixed_window_fast_path = a.fast_path;
  if (a.cached) {
    o.mode = sluice::RedisMode::kCached;
    o.sync_interval = std::chrono::milliseconds(a.sync_interval_ms);
  }
  auto created = sluice::RedisStore::create(o);
  if (!created.ok()) {
    std::fprintf(stderr, "%s\n", created.error().message.c_str());
    return 1;
  }
  auto store = *created;
  if (!store->wait_ready(std::chrono::seconds(5))) {
    std::fprintf(stderr, "redis at %s is not ready\n", a.address.c_str());
    return 1;
  }
  // The seed's tiers: 100 per bucket refilled at 20/s (plus more limits on request).
  std::vector<sluice::Limit> limits;
  limits.push_back(
      // 1,000 per 5 s: nothing is denied below 2 million decisions/s (at 100,
      // a faster path began to fill windows; a build that stays below 200,000
      // decisions/s never met either).
      a.fixed_window ? sluice::Limit::fixed_window(1'000, std::chrono::seconds(5)).value()
                     : sluice::Limit::token_bucket(100, a.refill, std::chrono::seconds(1)).value());
  if (a.limits > 1)
    limits.push_back(sluice::Limit::fixed_window(1'000, std::chrono::minutes(1)).value());
  if (a.limits > 2)
    limits.push_back(sluice::Limit::sliding_window(500, std::chrono::minutes(1)).value());
  if (a.limits > 3) limits.push_back(sluice::Limit::gcra(50, 10, std::chrono::seconds(1)).value());
  const sluice::Limit exhausted =
      a.fixed_window ? sluice::Limit::fixed_window(1, std::chrono::hours(1)).value()
                     : sluice::Limit::token_bucket(1, 1, std::chrono::hours(1)).value();
  std::vector<std::string> keys;
  for (int k = 0; k < a.keys; ++k) keys.push_back("bench|client:" + std::to_string(k));

  std::vector<std::unique_ptr<Worker>> workers;
  for (int t = 0; t < a.threads; ++t) {
    auto w = std::make_unique<Worker>();
    w->store = store.get();
    w->limits = &limits;
    w->keys = &keys;
    w->local_time = a.local_time || a.cached;  // cached mode decides on this host's clock
    w->exhausted = &exhausted;
    w->denied = a.denied;
    w->next_key = static_cast<uint64_t>(t) * 7919;
    w->rate = a.rate / a.threads;
    workers.push_back(std::move(w));
  }
  // Warm-up: connect and load the script.
  {
    sluice::AcquireRequest r{&limits[0], "bench|warm-up", 1};
    sluice::Decision d;
    (void)store->acquire({&r, 1}, sluice::SystemClock::instance().now(), {&d, 1});
  }
  const auto total_cpu = [&a] {
    long long t = 0;
    for (long pid : a.redis_pids) t += cpu_ticks(pid);
    return t;
  };
  const long long cpu_before = total_cpu();
  const long long own_before = own_cpu_us();
  const auto start = Clock::now();
  const auto stop_at =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(a.seconds));
  std::vector<std::thread> threads;
  for (auto& w : workers) {
    w->stop_at = stop_at;
    threads.emplace_back([&a, w = w.get()] { w->run(a.in_flight); });
  }
  for (auto& t : threads) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  const long long cpu_after = total_cpu();
  const long long own_after = own_cpu_us();

  uint64_t done = 0, allowed = 0, errors = 0;
  for (auto& w : workers) {
    done += w->done;
    allowed += w->allowed;
    errors += w->errors;
  }
  std::printf(
      "threads=%d in_flight=%d keys=%d limits=%d algorithm=%s fast_path=%s time=%s mode=%s "
      "denied=%d/10\n",
      a.threads, a.in_flight, a.keys, a.limits, a.fixed_window ? "fixed_window" : "token_bucket",
      a.fast_path ? "yes" : "no", a.local_time ? "local" : "redis", a.cached ? "cached" : "exact",
      a.denied);
  std::printf("decisions=%llu allowed=%llu errors=%llu seconds=%.2f decisions_per_s=%.0f\n",
              static_cast<unsigned long long>(done), static_cast<unsigned long long>(allowed),
              static_cast<unsigned long long>(errors), elapsed, done / elapsed);
  if (done > 0)
    std::printf("sluice_cpu_us_per_decision=%.3f\n",
                static_cast<double>(own_after - own_before) / static_cast<double>(done));
  if (!a.redis_pids.empty() && done > 0) {
    const double ticks_per_s = static_cast<double>(sysconf(_SC_CLK_TCK));
    const double cpu_s = (cpu_after - cpu_before) / ticks_per_s;
    std::printf("redis_cpu_s=%.2f redis_cpu_us_per_decision=%.3f\n", cpu_s, cpu_s * 1e6 / done);
  }
  return errors == 0 ? 0 : 1;
}
