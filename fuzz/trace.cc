// The simulator's trace reader (src/simulate/trace.h): CSV `time_ms,key,cost`.
//
// Asserts: a trace either parses or gets an error message of at most
// kMaxTraceErrors lines plus a count; a parsed trace is sorted by time, each
// request names a key of the trace and costs at least 1; replayed (as
// `sluice simulate --trace` does, "10 per second"), sliding_log never lets
// more than 10 through in any window, and no algorithm more than 2 x 10.
#include <algorithm>

#include "fuzz_check.h"
#include "simulate/simulation.h"
#include "simulate/trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sluice;
  using namespace sluice::simulate;
  const Result<Traffic> traffic = parse_trace(fuzz::text_of(data, size), "fuzz.csv");
  if (!traffic.ok()) {
    const std::string& message = traffic.error().message;
    FUZZ_CHECK(!message.empty(), "an error without a message");
    FUZZ_CHECK(static_cast<size_t>(std::count(message.begin(), message.end(), '\n')) <=
                   kMaxTraceErrors + 1,
               "too many lines: %s", message.c_str());
    return 0;
  }
  const std::vector<SimRequest>& requests = traffic->requests;
  for (size_t i = 0; i < requests.size(); ++i) {
    FUZZ_CHECK(requests[i].key < traffic->keys.size(), "key %u of %zu", requests[i].key,
               traffic->keys.size());
    FUZZ_CHECK(requests[i].cost >= 1 && requests[i].at.count() >= 0, "cost %llu at %lld",
               static_cast<unsigned long long>(requests[i].cost),
               static_cast<long long>(requests[i].at.count()));
    FUZZ_CHECK(i == 0 || requests[i - 1].at <= requests[i].at, "not sorted at %zu", i);
  }
  const SimLimit limit{10, std::chrono::seconds(1)};
  const Result<std::vector<AlgorithmResult>> results = replay(*traffic, limit);
  if (!results.ok()) return 0;  // a cost above 10
  for (const AlgorithmResult& r : *results) {
    FUZZ_CHECK(r.allowed + r.denied == requests.size(), "%llu + %llu of %zu",
               static_cast<unsigned long long>(r.allowed),
               static_cast<unsigned long long>(r.denied), requests.size());
    const uint64_t bound = r.algorithm == Algorithm::kSlidingLog ? limit.limit : 2 * limit.limit;
    FUZZ_CHECK(r.max_in_window <= bound, "%s let %llu through in one window",
               std::string(algorithm_name(r.algorithm)).c_str(),
               static_cast<unsigned long long>(r.max_in_window));
  }
  return 0;
}
