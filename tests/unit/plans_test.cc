// Plans per consumer: `plans:`, `consumers:` and `plan` in a limits list,
// as the loader reads them (exact errors) and as Policy::plan() applies
// them (which limits, under which store keys).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "policy/config_loader.h"
#include "policy/decider.h"
#include "policy/policy.h"
#include "sluice/memory_store.h"

namespace sluice::policy {
namespace {

// A folder with a consumers file, removed at the end of the test.
class ConsumersDir {
 public:
  explicit ConsumersDir(const std::string& consumers) {
    char tmpl[] = "/tmp/sluice-plans-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    write("consumers.yaml", consumers);
  }
  ~ConsumersDir() {
    for (const std::string& f : files_) std::remove(f.c_str());
    ::rmdir(dir_.c_str());
  }
  void write(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    files_.push_back(path);
  }
  // The config file name: the consumers file is relative to its folder.
  std::string config() const { return dir_ + "/sluice.yaml"; }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  std::vector<std::string> files_;
};

const std::string kPlans = R"(
plans:
  free: [{capacity: 2, refill_rate: 1/h}]
  pro: [{capacity: 5, refill_rate: 1/h}, {algorithm: fixed_window, limit: 100, window: 1d}]
)";

std::vector<std::string> errors_of(const ConsumersDir& d, const std::string& yaml) {
  const LoadResult r = load_config_string(yaml, d.config());
  std::vector<std::string> out;
  for (const ConfigError& e : r.errors) {
    std::string text = e.text();
    if (text.starts_with(d.dir() + "/")) text = text.substr(d.dir().size() + 1);
    out.push_back(text);
  }
  EXPECT_EQ(r.config.has_value(), r.errors.empty());
  return out;
}

Config valid(const ConsumersDir& d, const std::string& yaml) {
  LoadResult r = load_config_string(yaml, d.config());
  std::string all;
  for (const ConfigError& e : r.errors) all += e.text() + "\n";
  EXPECT_TRUE(r.config.has_value()) << all;
  return r.config ? std::move(*r.config) : Config{};
}

using Errors = std::vector<std::string>;

// ---- loading -------------------------------------------------------------

TEST(PlansConfig, PlansConsumersAndPlanInLimits) {
  const ConsumersDir d("key-a: pro\nkey-b: free\n");
  const Config c = valid(d, kPlans + R"(
consumers: {key: header:X-Api-Key, file: consumers.yaml, unknown: free}
policies:
  search: {capacity: 9, refill_rate: 1/s}
routes:
  - match: GET /api/search
    limits: [search, plan, {capacity: 5, refill_rate: 1/s}]
)");
  ASSERT_EQ(c.plans.size(), 2u);
  EXPECT_EQ(c.plans[1].name, "pro");
  ASSERT_EQ(c.plans[1].limits.size(), 2u);
  EXPECT_EQ(c.plans[1].limits[0].name, "pro#0");
  EXPECT_EQ(c.plans[1].limits[1].name, "pro#1");
  EXPECT_FALSE(c.plans[1].limits[0].named_policy);
  EXPECT_EQ(c.plans[1].limits[1].limit.algorithm(), Algorithm::kFixedWindow);
  ASSERT_TRUE(c.consumers.has_value());
  EXPECT_EQ(c.consumers->key.text, "header:x-api-key");
  EXPECT_EQ(c.consumers->file, d.dir() + "/consumers.yaml");
  EXPECT_EQ(c.consumers->unknown_plan, 0u);
  ASSERT_NE(c.consumers->table, nullptr);
  EXPECT_EQ(c.consumers->table->find("key-a"), 1);
  ASSERT_EQ(c.routes.size(), 1u);
  EXPECT_EQ(c.routes[0].plan_at, 1u);
  ASSERT_EQ(c.routes[0].limits.size(), 2u);  // `plan` is not one of them
  EXPECT_EQ(c.routes[0].limits[0].name, "search");
  EXPECT_EQ(c.routes[0].limits[1].name, "GET /api/search");  // its one inline limit
}

TEST(PlansConfig, UnknownRejectAndOtherKeySources) {
  const ConsumersDir d("");
  for (const std::string key : {"cookie:session", "query:api_key"}) {
    const Config c =
        valid(d, kPlans + "consumers: {key: " + key + ", file: consumers.yaml, unknown: reject}\n");
    EXPECT_EQ(c.consumers->key.text, key);
    EXPECT_EQ(c.consumers->unknown_plan, std::nullopt);
    EXPECT_EQ(c.consumers->table->size(), 0u);
  }
}

TEST(PlansConfig, Errors) {
  const ConsumersDir d("a: free\n");
  EXPECT_EQ(errors_of(d, R"(
plans:
  reject: [{capacity: 1, refill_rate: 1/s}]
  bad name: [{capacity: 1, refill_rate: 1/s}]
  single: {capacity: 1, refill_rate: 1/s}
  none: []
  free: [basic]
consumers: {key: ip, file: consumers.yaml, unknown: fre}
policies:
  plan: {capacity: 1, refill_rate: 1/s}
routes:
  - match: GET /a
    limits: [plan, plan]
)"),
            (Errors{
                "sluice.yaml:3:3: plans.reject: `reject` is what `consumers.unknown` says to "
                "refuse unknown consumers: give the plan another name",
                "sluice.yaml:4:3: plans.bad name: a plan name may hold only letters, digits, '_', "
                "'-', '.' and ':'",
                "sluice.yaml:5:11: plans.single: must be a list of limits like [{capacity: 100, "
                "refill_rate: 10/s}], got a mapping",
                "sluice.yaml:6:9: plans.none: must list at least one limit",
                "sluice.yaml:7:10: plans.free[0]: must be a limit like {capacity: 100, "
                "refill_rate: 10/s}, got \"basic\"",
                "sluice.yaml:8:18: consumers.key: must be one header:NAME, cookie:NAME, "
                "query:NAME or jwt:CLAIM: where the consumer id is read, got \"ip\"",
                "sluice.yaml:8:53: consumers.unknown: must be a plan name or reject, got \"fre\"; "
                "did you mean `free`?",
                "sluice.yaml:10:3: policies.plan: `plan` stands for the consumer's plan in limits "
                "lists: give the policy another name",
                "sluice.yaml:13:20: routes[0].limits[1]: `plan` is listed twice",
            }));
}

TEST(PlansConfig, PlanNeedsPlansAndConsumersAndTheyNeedEachOther) {
  const ConsumersDir d("");
  EXPECT_EQ(errors_of(d, R"(
routes:
  - match: GET /a
    limits: [plan]
)"),
            (Errors{"sluice.yaml:4:14: routes[0].limits[0]: `plan` (the consumer's plan) needs "
                    "`plans:` and `consumers:`"}));
  EXPECT_EQ(errors_of(d, kPlans),
            (Errors{"sluice.yaml:3:3: plans: plans need `consumers:` (where the consumer id is "
                    "read and the file that puts each consumer on a plan)"}));
  EXPECT_EQ(
      errors_of(d, "consumers: {key: header:k, file: consumers.yaml, unknown: reject}\n"),
      (Errors{"sluice.yaml:1:12: consumers: needs `plans:`, the plans its consumers are on"}));
}

TEST(PlansConfig, ConsumersFileErrorsComeWithTheirOwnFileLineAndColumn) {
  const ConsumersDir d("a: free\nb: prp\na: pro\n");
  EXPECT_EQ(errors_of(d, kPlans + "consumers: {key: header:k, file: consumers.yaml, unknown: "
                                  "fre}\n"),
            (Errors{"sluice.yaml:5:59: consumers.unknown: must be a plan name or reject, got "
                    "\"fre\"; did you mean `free`?",
                    "consumers.yaml:2:4: unknown plan \"prp\"; did you mean `pro`?",
                    "consumers.yaml:3:1: consumer \"a\" is listed twice (first at line 1)"}));
  EXPECT_EQ(
      errors_of(d, kPlans + "consumers: {key: header:k, file: missing.yaml, unknown: free}\n"),
      (Errors{"sluice.yaml:5:34: consumers.file: cannot open the consumers file " + d.dir() +
              "/missing.yaml: No such file or directory"}));
  EXPECT_EQ(errors_of(d, kPlans + "consumers: {file: consumers.yaml}\n"),
            (Errors{"sluice.yaml:5:12: consumers: `key` is required",
                    "sluice.yaml:5:12: consumers: `unknown` is required",
                    "consumers.yaml:2:4: unknown plan \"prp\"; did you mean `pro`?",
                    "consumers.yaml:3:1: consumer \"a\" is listed twice (first at line 1)"}));
}

// ---- planning ------------------------------------------------------------

class OneHeader : public HeaderSource {
 public:
  OneHeader(std::string name, std::string value)
      : name_(std::move(name)), value_(std::move(value)) {}
  std::optional<std::string_view> get(std::string_view name) const override {
    if (name == name_) return value_;
    return std::nullopt;
  }
  std::string get_all(std::string_view) const override { return {}; }

 private:
  std::string name_;
  std::string value_;
};

constexpr std::string_view kTwoRoutes = R"(
consumers: {key: header:x-api-key, file: consumers.yaml, unknown: UNKNOWN}
routes:
  - match: GET /api/search
    limits: [{capacity: 7, refill_rate: 1/s}, plan]
  - match: GET /api/orders
    limits: [plan]
  - match: GET /health
    limits: [{capacity: 7, refill_rate: 1/s}]
)";

Policy policy_with(const ConsumersDir& d, std::string_view unknown) {
  std::string yaml = kPlans + std::string(kTwoRoutes);
  yaml.replace(yaml.find("UNKNOWN"), 7, unknown);
  return Policy(valid(d, yaml));
}

RequestInfo get(std::string_view target, const HeaderSource* headers) {
  RequestInfo info;
  info.method = "GET";
  info.target = target;
  info.peer = parse_ip("192.0.2.1").value();
  info.headers = headers;
  return info;
}

std::vector<std::string> keys_of(const Plan& plan) {
  std::vector<std::string> keys;
  for (const PlannedLimit& l : plan.limits) keys.push_back(l.store_key);
  return keys;
}

using Keys = std::vector<std::string>;

TEST(PlansPlan, AKnownConsumersPlanIsKeyedByTheConsumerAndSharedAcrossRoutes) {
  const ConsumersDir d("key-a: pro\n");
  const Policy p = policy_with(d, "free");
  const OneHeader key_a("x-api-key", "key-a");
  const Plan search = p.plan(get("/api/search", &key_a));
  EXPECT_EQ(keys_of(search),
            (Keys{"route:GET /api/search|ip:192.0.2.1", "plan:pro#0|h:x-api-key=key-a",
                  "plan:pro#1|h:x-api-key=key-a"}));
  ASSERT_NE(search.consumer_plan, nullptr);
  EXPECT_EQ(search.consumer_plan->name, "pro");
  EXPECT_EQ(search.limits[1].limit, &search.consumer_plan->limits[0]);
  EXPECT_EQ(search.refusal, policy::Refusal::kNone);
  EXPECT_EQ(search.client_key, "ip:192.0.2.1");  // the route's own key is unchanged
  EXPECT_EQ(keys_of(p.plan(get("/api/orders", &key_a))),
            (Keys{"plan:pro#0|h:x-api-key=key-a", "plan:pro#1|h:x-api-key=key-a"}));
  // A route that does not list `plan` gets none.
  const Plan health = p.plan(get("/health", &key_a));
  EXPECT_EQ(keys_of(health), (Keys{"route:GET /health|ip:192.0.2.1"}));
  EXPECT_EQ(health.consumer_plan, nullptr);
}

TEST(PlansPlan, UnknownAndMissingIdsGetTheUnknownPlanKeyedByTheClientAddress) {
  const ConsumersDir d("key-a: pro\n");
  const Policy p = policy_with(d, "free");
  // A made-up id mints nothing: every id of one client shares its address's state.
  for (const std::string id : {"made-up-1", "made-up-2", ""}) {
    const OneHeader headers("x-api-key", id);
    const Plan plan = p.plan(get("/api/orders", &headers));
    EXPECT_EQ(keys_of(plan), (Keys{"plan:free#0|ip:192.0.2.1"})) << id;
    EXPECT_EQ(plan.consumer_plan->name, "free");
  }
  EXPECT_EQ(keys_of(p.plan(get("/api/orders", nullptr))), (Keys{"plan:free#0|ip:192.0.2.1"}));
}

TEST(PlansPlan, UnknownRejectMarksThePlanAndKnownConsumersPass) {
  const ConsumersDir d("key-a: free\n");
  const Policy p = policy_with(d, "reject");
  const OneHeader stranger("x-api-key", "stranger");
  EXPECT_EQ(p.plan(get("/api/orders", &stranger)).refusal, policy::Refusal::kUnknownConsumer);
  EXPECT_EQ(p.plan(get("/api/orders", nullptr)).refusal, policy::Refusal::kUnknownConsumer);
  EXPECT_EQ(p.plan(get("/health", nullptr)).refusal, policy::Refusal::kNone);  // no `plan` there
  const OneHeader key_a("x-api-key", "key-a");
  const Plan known = p.plan(get("/api/orders", &key_a));
  EXPECT_EQ(known.refusal, policy::Refusal::kNone);
  EXPECT_EQ(keys_of(known), (Keys{"plan:free#0|h:x-api-key=key-a"}));
}

TEST(PlansPlan, ARuntimeChangeAppliesToTheNextPlan) {
  const ConsumersDir d("key-a: free\n");
  const Policy p = policy_with(d, "reject");
  const OneHeader key_b("x-api-key", "key b");  // escaped in the key like any header value
  EXPECT_EQ(p.plan(get("/api/orders", &key_b)).refusal, policy::Refusal::kUnknownConsumer);
  p.consumers()->set("key b", 1);
  EXPECT_EQ(keys_of(p.plan(get("/api/orders", &key_b))),
            (Keys{"plan:pro#0|h:x-api-key=key%20b", "plan:pro#1|h:x-api-key=key%20b"}));
  // A copy of the Policy shares the consumers in force.
  const Policy copy = p;
  copy.consumers()->set("key b", std::nullopt);
  EXPECT_EQ(p.plan(get("/api/orders", &key_b)).refusal, policy::Refusal::kUnknownConsumer);
}

TEST(PlansPlan, CheckByConsumer) {
  const ConsumersDir d("key-a: pro\n");
  const Policy p = policy_with(d, "free");
  EXPECT_EQ(keys_of(p.plan_consumer("key-a", "")),
            (Keys{"plan:pro#0|h:x-api-key=key-a", "plan:pro#1|h:x-api-key=key-a"}));
  EXPECT_EQ(keys_of(p.plan_consumer("stranger", "ip:198.51.100.7")),
            (Keys{"plan:free#0|ip:198.51.100.7"}));
  EXPECT_EQ(keys_of(p.plan_consumer("stranger", "")), (Keys{"plan:free#0|unknown"}));
  const ConsumersDir r("");
  EXPECT_EQ(policy_with(r, "reject").plan_consumer("stranger", "").refusal,
            policy::Refusal::kUnknownConsumer);
  EXPECT_TRUE(Policy(Config{}).plan_consumer("key-a", "").limits.empty());
}

TEST(PlansPlan, LongConsumerIdsAndUnknownKeysAreStoredBounded) {
  const std::string long_id = "key-" + std::string(600, 'x');
  const ConsumersDir d(long_id + ": pro\n");
  const Policy p = policy_with(d, "free");
  const OneHeader header("x-api-key", long_id);
  // The gateway and /v1/check spend one bounded key.
  const Keys gateway = keys_of(p.plan(get("/api/orders", &header)));
  EXPECT_EQ(keys_of(p.plan_consumer(long_id, "")), gateway);
  ASSERT_EQ(gateway.size(), 2u);
  EXPECT_EQ(gateway[0].size(), std::string("plan:pro#0|h:x-api-key=%sha256:").size() + 32);
  EXPECT_TRUE(gateway[0].starts_with("plan:pro#0|h:x-api-key=%sha256:")) << gateway[0];
  // An unknown consumer counted under a long /v1/check "key".
  const Keys unknown = keys_of(p.plan_consumer("stranger", std::string(10'000, 'k')));
  ASSERT_EQ(unknown.size(), 1u);
  EXPECT_EQ(unknown[0].size(), std::string("plan:free#0|%sha256:").size() + 32);
  EXPECT_EQ(unknown, keys_of(p.plan_consumer("stranger2", std::string(10'000, 'k'))));
}

TEST(PlansPlan, FreeAndProQuotasWithTheRealDecider) {
  const ConsumersDir d("key-a: pro\nkey-b: free\n");
  const Policy p = policy_with(d, "free");
  MemoryStore store;
  const Nanos now = std::chrono::seconds(1'700'000'000);
  auto allowed = [&](std::string_view target, const std::string& id) {
    const OneHeader headers("x-api-key", id);
    return decide(store, p.plan(get(target, &headers)), now, OnFailure::kAllow).allowed();
  };
  // pro: 5 an hour, spent across both routes that list `plan`.
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(allowed("/api/search", "key-a")) << i;
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(allowed("/api/orders", "key-a")) << i;
  EXPECT_FALSE(allowed("/api/orders", "key-a"));
  EXPECT_FALSE(allowed("/api/search", "key-a"));
  // free: 2 an hour.
  EXPECT_TRUE(allowed("/api/orders", "key-b"));
  EXPECT_TRUE(allowed("/api/orders", "key-b"));
  EXPECT_FALSE(allowed("/api/orders", "key-b"));
  // Unknown ids from one address share one free quota, whatever id they send.
  EXPECT_TRUE(allowed("/api/orders", "r1"));
  EXPECT_TRUE(allowed("/api/orders", "r2"));
  EXPECT_FALSE(allowed("/api/orders", "r3"));
}

}  // namespace
}  // namespace sluice::policy
