// Bounded load client for Envoy RLS v3 ShouldRateLimit (bench/rls/run.sh).
//
//   rls_load --target 127.0.0.1:PORT [--seconds 5] [--in-flight 128]
//            [--max-calls 5000000] [--domain edge] [--key remote_address]
//            [--value 10.0.0.] [--values 1000]
//
// Keeps --in-flight calls outstanding on one channel with gRPC's callback API;
// each call carries one descriptor entry {key, value + i}, i drawn at random
// from [0, values). Stops starting calls after --seconds (at most 30) or
// --max-calls, waits for the outstanding ones, then prints calls/s, p50/p99
// latency, OK / OVER_LIMIT counts and errors.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"

namespace {

namespace rls = envoy::service::ratelimit::v3;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string target;
  int seconds = 5;
  int in_flight = 128;
  uint64_t max_calls = 5'000'000;
  std::string domain = "edge";
  std::string key = "remote_address";
  std::string value = "10.0.0.";
  int values = 1000;
};

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (i + 1 >= argc) return false;
    std::string v = argv[++i];
    if (arg == "--target")
      o.target = v;
    else if (arg == "--seconds")
      o.seconds = std::atoi(v.c_str());
    else if (arg == "--in-flight")
      o.in_flight = std::atoi(v.c_str());
    else if (arg == "--max-calls")
      o.max_calls = std::strtoull(v.c_str(), nullptr, 10);
    else if (arg == "--domain")
      o.domain = v;
    else if (arg == "--key")
      o.key = v;
    else if (arg == "--value")
      o.value = v;
    else if (arg == "--values")
      o.values = std::atoi(v.c_str());
    else
      return false;
  }
  o.seconds = std::clamp(o.seconds, 1, 30);
  o.in_flight = std::clamp(o.in_flight, 1, 4096);
  o.values = std::max(o.values, 1);
  return !o.target.empty();
}

class Load {
 public:
  Load(const Options& o, rls::RateLimitService::Stub* stub)
      : options_(o), stub_(stub), slots_(static_cast<size_t>(o.in_flight)) {
    for (size_t i = 0; i < slots_.size(); ++i) slots_[i].rng.seed(static_cast<uint32_t>(i + 1));
  }

  void run() {
    deadline_ = Clock::now() + std::chrono::seconds(options_.seconds);
    started_at_ = Clock::now();
    outstanding_ = static_cast<int>(slots_.size());
    for (Slot& slot : slots_) start(slot);
    std::unique_lock lock(mutex_);
    done_.wait(lock, [this] { return outstanding_ == 0; });
    elapsed_ = Clock::now() - started_at_;
  }

  void report() const {
    std::vector<int64_t> latencies;
    uint64_t ok = 0, over = 0, errors = 0;
    for (const Slot& slot : slots_) {
      latencies.insert(latencies.end(), slot.latencies_us.begin(), slot.latencies_us.end());
      ok += slot.ok;
      over += slot.over;
      errors += slot.errors;
    }
    std::sort(latencies.begin(), latencies.end());
    auto pct = [&](double p) -> int64_t {
      if (latencies.empty()) return 0;
      size_t i = static_cast<size_t>(p * static_cast<double>(latencies.size() - 1));
      return latencies[i];
    };
    double seconds = std::chrono::duration<double>(elapsed_).count();
    uint64_t calls = ok + over + errors;
    std::printf(
        "calls %llu seconds %.3f calls_per_s %.0f p50_us %lld p99_us %lld ok %llu "
        "over_limit %llu errors %llu in_flight %d values %d\n",
        static_cast<unsigned long long>(calls), seconds, static_cast<double>(calls) / seconds,
        static_cast<long long>(pct(0.50)), static_cast<long long>(pct(0.99)),
        static_cast<unsigned long long>(ok), static_cast<unsigned long long>(over),
        static_cast<unsigned long long>(errors), options_.in_flight, options_.values);
  }

 private:
  struct Slot {
    std::unique_ptr<grpc::ClientContext> context;
    rls::RateLimitRequest request;
    rls::RateLimitResponse response;
    Clock::time_point sent;
    std::mt19937 rng;
    std::vector<int64_t> latencies_us;
    uint64_t ok = 0, over = 0, errors = 0;
  };

  // Starts the slot's next call, or retires the slot when the run is over.
  // A slot has one call at a time, so its fields need no lock.
  void start(Slot& slot) {
    if (Clock::now() >= deadline_ ||
        issued_.fetch_add(1, std::memory_order_relaxed) >= options_.max_calls) {
      std::lock_guard lock(mutex_);
      if (--outstanding_ == 0) done_.notify_one();
      return;
    }
    slot.context = std::make_unique<grpc::ClientContext>();
    slot.request.Clear();
    slot.response.Clear();
    slot.request.set_domain(options_.domain);
    auto* entry = slot.request.add_descriptors()->add_entries();
    entry->set_key(options_.key);
    std::uniform_int_distribution<int> pick(0, options_.values - 1);
    entry->set_value(options_.value + std::to_string(pick(slot.rng)));
    slot.sent = Clock::now();
    stub_->async()->ShouldRateLimit(slot.context.get(), &slot.request, &slot.response,
                                    [this, &slot](grpc::Status status) { finish(slot, status); });
  }

  void finish(Slot& slot, const grpc::Status& status) {
    auto latency = Clock::now() - slot.sent;
    slot.latencies_us.push_back(
        std::chrono::duration_cast<std::chrono::microseconds>(latency).count());
    if (!status.ok())
      ++slot.errors;
    else if (slot.response.overall_code() == rls::RateLimitResponse::OVER_LIMIT)
      ++slot.over;
    else
      ++slot.ok;
    start(slot);
  }

  const Options& options_;
  rls::RateLimitService::Stub* stub_;
  std::vector<Slot> slots_;
  std::atomic<uint64_t> issued_{0};
  Clock::time_point deadline_, started_at_;
  Clock::duration elapsed_{};
  std::mutex mutex_;
  std::condition_variable done_;
  int outstanding_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (!parse(argc, argv, options)) {
    std::fprintf(stderr,
                 "usage: rls_load --target HOST:PORT [--seconds N<=30] [--in-flight N] "
                 "[--max-calls N] [--domain D] [--key K] [--value PREFIX] [--values N]\n");
    return 2;
  }
  auto channel = grpc::CreateChannel(options.target, grpc::InsecureChannelCredentials());
  if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(5))) {
    std::fprintf(stderr, "rls_load: cannot connect to %s\n", options.target.c_str());
    return 1;
  }
  auto stub = rls::RateLimitService::NewStub(channel);
  Load load(options, stub.get());
  load.run();
  load.report();
  return 0;
}
