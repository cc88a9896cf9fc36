// A store-level property of MemoryStore: at one instant, state only ever
// loses room. Random operations (single and batched acquires, resets,
// collect_expired) on five limits, one of each algorithm, all at one `now`;
// key, cost, size, period and `now` come from the input.
//
// Asserts: a request is never allowed with a cost at or above one that the
// same (limit, key) denied earlier in the instant (unless reset since);
// `remaining` never grows within the instant; allowed means retry_after 0
// and denied a retry_after above 0; errors only for a cost of 0 or above the
// limit's size. The store is large enough that nothing is evicted.
//
// Input: 2 bytes size and period (odd: with lockouts), 8 bytes `now`, then 3 bytes per operation:
// [op: low 3 bits, 0-4 a limit, 5 a batch, 6 reset, 7 collect][key][cost].
#include <array>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "sluice/memory_store.h"

namespace {

using namespace sluice;

constexpr size_t kLimits = 5;

// An odd period byte gives every limit a lockout (`block`) of three periods:
// a lockout only ever denies more, so the properties hold with it too.
std::array<Limit, kLimits> make_limits(uint8_t size_byte, uint8_t period_byte) {
  const uint64_t n = 1 + size_byte % 32;
  const Nanos period = std::chrono::milliseconds(1 + period_byte) * 37;
  const Nanos block = (period_byte & 1) != 0 ? 3 * period : Nanos{0};
  const auto with_block = [block](Limit limit) {
    LimitSpec spec = limit.spec();
    spec.block = block;
    return *Limit::create(spec);
  };
  return {with_block(*Limit::token_bucket(n, 1 + size_byte / 32, period)),
          with_block(*Limit::gcra(n, 1, period)), with_block(*Limit::fixed_window(n, period)),
          with_block(*Limit::sliding_log(n, period)),
          with_block(*Limit::sliding_window(n, period))};
}

struct Seen {
  std::optional<uint64_t> min_denied;  // the smallest cost denied in this instant
  std::optional<uint64_t> remaining;   // the last remaining reported
};

class Checker {
 public:
  Checker(const std::array<Limit, kLimits>& limits, Nanos now) : limits_(limits), now_(now) {
    MemoryStoreOptions o;
    // One shard holding all 5 limits x 256 keys: nothing is evicted. Small,
    // so that a new store per input costs little.
    o.shards = 1;
    o.max_keys = 2048;
    o.seed = 7;
    store_.emplace(o);
  }

  void acquire(std::span<const size_t> which, uint8_t key, uint64_t cost) {
    std::vector<AcquireRequest> requests;
    std::vector<std::string> keys(which.size(), "k" + std::to_string(key));
    for (size_t i = 0; i < which.size(); ++i) {
      requests.push_back({&limits_[which[i]], keys[i], cost});
    }
    std::vector<Decision> out(requests.size());
    const Status status = store_->acquire(requests, now_, out);
    bool too_big = cost == 0;
    for (size_t l : which) too_big = too_big || cost > limits_[l].size();
    FUZZ_CHECK(status.ok() != too_big, "cost %llu: %s", static_cast<unsigned long long>(cost),
               status.ok() ? "accepted" : status.error().message.c_str());
    if (!status.ok()) return;
    const bool all = all_allowed(out);
    for (size_t i = 0; i < which.size(); ++i) record(which[i], key, cost, out[i], all);
  }

  void reset(size_t limit, uint8_t key) {
    (void)store_->reset(limits_[limit], "k" + std::to_string(key));
    seen_.erase({limit, key});
  }

  void collect() { store_->collect_expired(now_); }

 private:
  void record(size_t limit, uint8_t key, uint64_t cost, const Decision& d, bool charged) {
    Seen& s = seen_[{limit, key}];
    FUZZ_CHECK(d.allowed == (d.retry_after.count() == 0), "allowed %d, retry_after %lld", d.allowed,
               static_cast<long long>(d.retry_after.count()));
    if (d.allowed) {
      FUZZ_CHECK(!s.min_denied || cost < *s.min_denied,
                 "limit %zu key %u: cost %llu allowed after %llu was denied", limit, key,
                 static_cast<unsigned long long>(cost),
                 static_cast<unsigned long long>(*s.min_denied));
    } else if (!s.min_denied || cost < *s.min_denied) {
      s.min_denied = cost;
    }
    // A limit that would allow inside a denied batch reports what it would
    // leave, not what it has: only charged and denied decisions say what is left.
    if (d.allowed && !charged) return;
    FUZZ_CHECK(!s.remaining || d.remaining <= *s.remaining,
               "limit %zu key %u: remaining %llu > %llu", limit, key,
               static_cast<unsigned long long>(d.remaining),
               static_cast<unsigned long long>(*s.remaining));
    s.remaining = d.remaining;
  }

  const std::array<Limit, kLimits>& limits_;
  const Nanos now_;
  std::optional<MemoryStore> store_;
  std::map<std::pair<size_t, uint8_t>, Seen> seen_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 10) return 0;
  const std::array<Limit, kLimits> limits = make_limits(data[0], data[1]);
  uint64_t now_bits = 0;
  std::memcpy(&now_bits, data + 2, sizeof now_bits);
  const Nanos now{static_cast<int64_t>(now_bits >> 2)};  // 0 to 2^62: any realistic time
  Checker checker(limits, now);
  for (size_t at = 10; at + 3 <= size; at += 3) {
    const uint8_t op = data[at] & 7;
    const uint8_t key = data[at + 1];
    const uint64_t cost = data[at + 2] % 40;
    if (op < kLimits) {
      const size_t which[] = {op};
      checker.acquire(which, key, cost);
    } else if (op == 5) {
      // Two or three different limits on one key, all-or-nothing.
      const size_t first = (data[at] >> 3) % kLimits;
      const size_t which[] = {first, (first + 1) % kLimits, (first + 3) % kLimits};
      checker.acquire(std::span<const size_t>(which, 2 + (data[at] >> 7)), key, cost);
    } else if (op == 6) {
      checker.reset((data[at] >> 3) % kLimits, key);
    } else {
      checker.collect();
    }
  }
  return 0;
}
