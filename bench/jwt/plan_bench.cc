// What a jwt:CLAIM key costs a request: Policy::plan (path normalisation,
// route match, client key) for a route keyed by `ip` (the baseline), and by
// `jwt:sub` with an HS256, ES256 and RS256 (2048-bit) token that verifies.
// Quote the jwt rows as ratios to the ip row of the same run.
#include <benchmark/benchmark.h>

#include <chrono>
#include <optional>
#include <string>
#include <utility>

#include "../../tests/unit/jwt_tokens.h"
#include "policy/policy.h"

namespace sluice::bench {
namespace {

using namespace sluice::policy;

constexpr int64_t kNow = 1'700'000'000;

class OneHeader : public HeaderSource {
 public:
  explicit OneHeader(std::string authorization) : authorization_(std::move(authorization)) {}
  std::optional<std::string_view> get(std::string_view name) const override {
    if (name == "authorization") return authorization_;
    return std::nullopt;
  }
  std::string get_all(std::string_view) const override { return {}; }

 private:
  std::string authorization_;
};

Policy policy_for(const std::string& key, const std::optional<JwtSettings>& jwt) {
  Config config;
  Route route;
  route.method = "GET";
  route.pattern = "/api/orders/{id}";
  route.name = "GET /api/orders/{id}";
  route.key.parts.clear();
  route.key.parts.push_back(key == "ip" ? KeyPart{KeyPart::Kind::kIp, ""}
                                        : KeyPart{KeyPart::Kind::kJwt, "sub"});
  route.key.text = key;
  route.limits.push_back(
      RouteLimit{"", false, Limit::token_bucket(100, 10, std::chrono::seconds(1)).value(), {}});
  config.routes.push_back(route);
  config.jwt = jwt;
  return Policy(config);
}

void run(benchmark::State& state, const Policy& policy, const std::string& authorization,
         const std::string& expected_key_prefix) {
  const OneHeader headers(authorization);
  RequestInfo info;
  info.method = "GET";
  info.target = "/api/orders/42";
  info.peer = parse_ip("192.0.2.7").value();
  info.headers = &headers;
  info.now = std::chrono::seconds(kNow);
  if (!policy.plan(info).client_key.starts_with(expected_key_prefix)) {
    state.SkipWithError("the key is not the one expected: the token did not verify");
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(policy.plan(info));
}

const std::string kPayload = R"({"sub":"user-4242","exp":4102444800})";

void BM_PlanIpKey(benchmark::State& state) {
  run(state, policy_for("ip", std::nullopt), "", "ip:");
}

void BM_PlanJwtKeyHs256(benchmark::State& state) {
  JwtSettings s;
  s.secret_file = "bench.secret";
  s.secret = "bench-secret";
  run(state, policy_for("jwt:sub", s), "Bearer " + test::hs256_token(s.secret, kPayload), "j:");
}

void bench_signing_key(benchmark::State& state, const test::SigningKey& key) {
  JwtSettings s;
  s.jwks_file = "bench.jwks";
  s.jwks = test::jwks({key.jwk()});
  run(state, policy_for("jwt:sub", s), "Bearer " + key.token(kPayload), "j:");
}

void BM_PlanJwtKeyEs256(benchmark::State& state) {
  bench_signing_key(state, test::SigningKey::ec("e1"));
}

void BM_PlanJwtKeyRs256(benchmark::State& state) {
  bench_signing_key(state, test::SigningKey::rsa("r1"));
}

BENCHMARK(BM_PlanIpKey);
BENCHMARK(BM_PlanJwtKeyHs256);
BENCHMARK(BM_PlanJwtKeyEs256);
BENCHMARK(BM_PlanJwtKeyRs256);

}  // namespace
}  // namespace sluice::bench
