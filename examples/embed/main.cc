// A complete embedding: one token bucket per user, checked in a loop on a
// manual clock so that the output is the same on every run.
#include <chrono>
#include <cstdio>
#include <memory>

#include "sluice/sluice.h"

int main() {
  using namespace std::chrono_literals;
  auto limit = sluice::Limit::token_bucket(/*capacity=*/5, /*refill_tokens=*/1, 1s);
  if (!limit.ok()) {
    std::fprintf(stderr, "bad limit: %s\n", limit.error().message.c_str());
    return 1;
  }
  auto store = std::make_shared<sluice::MemoryStore>();
  sluice::ManualClock clock(1'700'000'000s);
  sluice::Limiter limiter(store, {*limit}, clock);

  int allowed = 0;
  for (int i = 0; i < 8; ++i) {
    sluice::Result<sluice::Decision> d = limiter.try_acquire("user:42");
    if (!d.ok()) {
      std::fprintf(stderr, "error: %s\n", d.error().message.c_str());
      return 1;
    }
    std::printf("request %d: %s remaining=%llu retry_after_ms=%lld\n", i + 1,
                d->allowed ? "allowed" : "denied", static_cast<unsigned long long>(d->remaining),
                static_cast<long long>(
                    std::chrono::duration_cast<std::chrono::milliseconds>(d->retry_after).count()));
    allowed += d->allowed ? 1 : 0;
  }
  clock.advance(1s);  // one token back
  const bool after_wait = limiter.try_acquire("user:42")->allowed;
  std::printf("after 1s: %s\n", after_wait ? "allowed" : "denied");
  // A burst of 5 from a full bucket, then nothing until a token refills.
  return (allowed == 5 && after_wait) ? 0 : 1;
}
