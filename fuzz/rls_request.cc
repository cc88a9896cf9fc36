// Envoy RLS request decoding and descriptor matching: the input parsed as an
// envoy.service.ratelimit.v3.RateLimitRequest (protobuf ParseFromArray) and
// decided by rls::RlsService::decide on a fresh MemoryStore, with the
// descriptor files of tests/rls/testdata/compat (every feature of
// envoyproxy/ratelimit's format: wildcards, share_threshold, replaces,
// unlimited, shadow and quota mode, metadata) plus Sluice's algorithms.
//
// Asserts: `done` runs exactly once, before decide() returns (memory store);
// an OK answer has one status per descriptor, each OK or OVER_LIMIT, and the
// overall code is OVER_LIMIT exactly when a descriptor's is; the response
// serialises and parses back; a descriptor denied by the first call is denied
// by the second, made at the same instant on the state the first left.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

#include <google/protobuf/stubs/logging.h>

#include "fuzz_check.h"
#include "rls/config_loader.h"
#include "rls/service.h"
#include "sluice/clock.h"
#include "sluice/memory_store.h"

namespace {

using namespace sluice;
namespace pb = ::envoy::service::ratelimit::v3;

constexpr std::string_view kSluiceDomain = R"(
domain: sluice
descriptors:
  - key: user
    rate_limit: {algorithm: gcra, capacity: 2, refill_rate: 1/s, name: user}
    descriptors:
      - key: path
        value: /api*
        share_threshold: true
        rate_limit: {algorithm: sliding_log, limit: 3, window: 1m}
  - key: tenant
    value: big
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: tenant
    rate_limit: {algorithm: sliding_window, limit: 2, window: 10s, replaces: [{name: user}]}
)";

// The compat files and Sluice's own domain, loaded as one set.
std::shared_ptr<const rls::RlsConfig> load_config() {
  // Invalid UTF-8 in a string field is logged by protobuf at every parse.
  google::protobuf::SetLogHandler(
      [](google::protobuf::LogLevel, const char*, int, const std::string&) {});
  std::vector<rls::RlsFile> files;
  std::vector<std::filesystem::path> paths;
  for (const auto& entry : std::filesystem::directory_iterator(SLUICE_RLS_TESTDATA "/compat")) {
    paths.push_back(entry.path());
  }
  std::sort(paths.begin(), paths.end());
  for (const auto& path : paths) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    files.push_back({path.filename().string(), text.str()});
  }
  files.push_back({"sluice.yaml", std::string(kSluiceDomain)});
  rls::LoadResult loaded = rls::load_rls_config(files);
  FUZZ_CHECK(loaded.ok(), "the descriptor files do not load: %s", loaded.error_text().c_str());
  return loaded.config;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::shared_ptr<const rls::RlsConfig> config = load_config();
  static ManualClock clock(Nanos{std::chrono::seconds(1'699'920'000)});
  pb::RateLimitRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  for (const auto headers : {rls::ResponseHeaders::kRateLimit, rls::ResponseHeaders::kDraft10}) {
    MemoryStoreOptions o;
    o.shards = 1;
    o.seed = 1;
    MemoryStore store(o);
    rls::RlsOptions options;
    options.response_headers = headers;
    options.dynamic_metadata = headers == rls::ResponseHeaders::kDraft10;
    rls::RlsService service(store, clock, config, options);
    // Twice: the second call sees the state the first left.
    std::vector<bool> denied_first;
    for (int call = 0; call < 2; ++call) {
      pb::RateLimitResponse response;
      int done = 0;
      grpc::Status status;
      service.decide(request, &response, [&](grpc::Status s) {
        ++done;
        status = std::move(s);
      });
      FUZZ_CHECK(done == 1, "done ran %d times", done);
      if (!status.ok()) continue;
      FUZZ_CHECK(response.statuses_size() == request.descriptors_size(),
                 "%d statuses for %d descriptors", response.statuses_size(),
                 request.descriptors_size());
      bool any_over = false;
      for (int i = 0; i < response.statuses_size(); ++i) {
        const auto code = response.statuses(i).code();
        FUZZ_CHECK(code == pb::RateLimitResponse::OK || code == pb::RateLimitResponse::OVER_LIMIT,
                   "descriptor code %d", static_cast<int>(code));
        const bool over = code == pb::RateLimitResponse::OVER_LIMIT;
        any_over = any_over || over;
        if (call == 0) {
          denied_first.push_back(over);
        } else {
          FUZZ_CHECK(over || i >= static_cast<int>(denied_first.size()) || !denied_first[i],
                     "descriptor %d denied, then allowed at the same instant", i);
        }
      }
      FUZZ_CHECK((response.overall_code() == pb::RateLimitResponse::OVER_LIMIT) == any_over,
                 "overall %d, a descriptor over: %d", static_cast<int>(response.overall_code()),
                 any_over);
      pb::RateLimitResponse back;
      FUZZ_CHECK(back.ParseFromString(response.SerializeAsString()), "response does not parse");
    }
  }
  return 0;
}
