#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <string>

#include "jwt_tokens.h"
#include "policy/policy.h"

namespace sluice::policy {
namespace {

using namespace std::chrono_literals;

Limit bucket(uint64_t capacity, uint64_t per_second) {
  return Limit::token_bucket(capacity, per_second, 1s).value();
}

// A route with inline limits named "<name>#<i>", as the loader names them.
Route route(std::string method, std::string pattern, std::vector<Limit> limits = {bucket(10, 1)},
            KeySpec key = {}) {
  Route r;
  r.method = std::move(method);
  r.pattern = std::move(pattern);
  r.name = r.method + " " + r.pattern;
  r.key = std::move(key);
  for (size_t i = 0; i < limits.size(); ++i) {
    r.limits.push_back(RouteLimit{r.name + "#" + std::to_string(i), false, limits[i]});
  }
  return r;
}

KeySpec key_spec(std::vector<KeyPart> parts, std::string text) {
  KeySpec spec;
  spec.parts = std::move(parts);
  spec.text = std::move(text);
  return spec;
}

KeyPart header_part(std::string name) {
  return KeyPart{KeyPart::Kind::kHeader, std::move(name)};
}
const KeyPart kIpPart{KeyPart::Kind::kIp, ""};
const KeyPart kGlobalPart{KeyPart::Kind::kGlobal, ""};

class FakeHeaders : public HeaderSource {
 public:
  FakeHeaders& add(std::string name, std::string value) {
    std::transform(name.begin(), name.end(), name.begin(), ::tolower);
    values_[name].push_back(std::move(value));
    return *this;
  }
  std::optional<std::string_view> get(std::string_view name) const override {
    const auto it = values_.find(std::string(name));
    if (it == values_.end()) return std::nullopt;
    return it->second.front();
  }
  std::string get_all(std::string_view name) const override {
    const auto it = values_.find(std::string(name));
    if (it == values_.end()) return "";
    std::string out;
    for (const std::string& v : it->second) out += (out.empty() ? "" : ", ") + v;
    return out;
  }

 private:
  std::map<std::string, std::vector<std::string>> values_;
};

IpAddress ip(std::string_view text) {
  return parse_ip(text).value();
}

RequestInfo request(std::string_view method, std::string_view target,
                    const HeaderSource* headers = nullptr, std::string_view peer = "192.0.2.1") {
  RequestInfo info;
  info.method = method;
  info.target = target;
  info.peer = ip(peer);
  info.headers = headers;
  return info;
}

const std::string& name_of(const Route* r) {
  static const std::string kNone = "<none>";
  return r == nullptr ? kNone : r->name;
}

// --- matching ---

TEST(PolicyMatch, ExactPathAndMethod) {
  Config config;
  config.routes = {route("GET", "/api/status"), route("POST", "/api/orders")};
  const Policy policy(config);
  EXPECT_EQ(name_of(policy.match("GET", "/api/status")), "GET /api/status");
  EXPECT_EQ(name_of(policy.match("POST", "/api/orders")), "POST /api/orders");
  EXPECT_EQ(policy.match("POST", "/api/status"), nullptr);
  EXPECT_EQ(policy.match("GET", "/api/status/x"), nullptr);
  EXPECT_EQ(policy.match("GET", "/api"), nullptr);
}

// A ".." in a pattern, however it is spelled, removes the segment before it
// as it does in requests (found by the path fuzz target).
TEST(PolicyMatch, DotDotSegmentsOfPatternsInAnySpelling) {
  Config config;
  config.routes = {route("GET", "/a/..;v=1/b"), route("GET", "/c/%2e%2e/d")};
  const Policy policy(config);
  EXPECT_EQ(name_of(policy.match("GET", "/b")), "GET /a/..;v=1/b");
  EXPECT_EQ(name_of(policy.match("GET", "/d")), "GET /c/%2e%2e/d");
}

TEST(PolicyMatch, MethodIsCaseSensitive) {
  Config config;
  config.routes = {route("GET", "/a"), route("POST", "/a")};
  const Policy policy(config);
  EXPECT_EQ(policy.match("get", "/a"), nullptr);
  EXPECT_EQ(policy.match("post", "/a"), nullptr);
  EXPECT_EQ(policy.match("head", "/a"), nullptr);
}

// Every framework runs a GET handler for HEAD: a HEAD request is limited as
// the GET of its path, unless a HEAD route comes first (first match wins).
TEST(PolicyMatch, HeadMatchesTheGetRouteOfItsPathUnlessAHeadRouteComesFirst) {
  Config config;
  config.routes = {route("GET", "/a"),       route("HEAD", "/b"),     route("GET", "/b"),
                   route("*", "/c"),         route("GET", "/d/{id}"), route("POST", "/e"),
                   route("GET", "/static/*")};
  const Policy policy(config);
  EXPECT_EQ(name_of(policy.match("HEAD", "/a")), "GET /a");
  EXPECT_EQ(name_of(policy.match("HEAD", "/b")), "HEAD /b");
  EXPECT_EQ(name_of(policy.match("GET", "/b")), "GET /b");
  EXPECT_EQ(name_of(policy.match("HEAD", "/c")), "* /c");
  EXPECT_EQ(name_of(policy.match("HEAD", "/d/7")), "GET /d/{id}");
  EXPECT_EQ(name_of(policy.match("HEAD", "/static/x/y")), "GET /static/*");
  EXPECT_EQ(policy.match("HEAD", "/e"), nullptr);  // only GET stands for HEAD
  EXPECT_EQ(policy.match("POST", "/a"), nullptr);  // and GET for nothing else
  EXPECT_EQ(policy.match("GET", "/e"), nullptr);
}

TEST(PolicyMatch, StarMethodMatchesAnyMethod) {
  Config config;
  config.routes = {route("*", "/a")};
  const Policy policy(config);
  EXPECT_EQ(name_of(policy.match("GET", "/a")), "* /a");
  EXPECT_EQ(name_of(policy.match("DELETE", "/a")), "* /a");
  EXPECT_EQ(name_of(policy.match("BREW", "/a")), "* /a");
}

TEST(PolicyMatch, ParamMatchesExactlyOneNonEmptySegment) {
  Config config;
  config.routes = {route("GET", "/api/users/{id}")};
  const Policy policy(config);
  EXPECT_NE(policy.match("GET", "/api/users/42"), nullptr);
  EXPECT_NE(policy.match("GET", "/api/users/%2F"), nullptr);
  EXPECT_EQ(policy.match("GET", "/api/users"), nullptr);
  EXPECT_EQ(policy.match("GET", "/api/users/42/orders"), nullptr);
  EXPECT_EQ(policy.match("GET", "/api/users//"), nullptr);  // not normalised: empty segment
}

TEST(PolicyMatch, ParamsInTheMiddle) {
  Config config;
  config.routes = {route("GET", "/api/users/{id}/orders/{order}")};
  const Policy policy(config);
  EXPECT_NE(policy.match("GET", "/api/users/1/orders/2"), nullptr);
  EXPECT_EQ(policy.match("GET", "/api/users/1/items/2"), nullptr);
  EXPECT_EQ(policy.match("GET", "/api/users/1/orders"), nullptr);
}

// Decided: "/static/*" matches "/static" itself and anything below it, since
// the normalised path of "/static/" is "/static" and both spellings must share a limit.
TEST(PolicyMatch, TrailingWildcardMatchesThePrefixAndBelow) {
  Config config;
  config.routes = {route("GET", "/static/*")};
  const Policy policy(config);
  EXPECT_NE(policy.match("GET", "/static"), nullptr);
  EXPECT_NE(policy.match("GET", "/static/app.js"), nullptr);
  EXPECT_NE(policy.match("GET", "/static/a/b/c"), nullptr);
  EXPECT_EQ(policy.match("GET", "/staticfiles"), nullptr);
  EXPECT_EQ(policy.match("GET", "/stati"), nullptr);
  EXPECT_EQ(policy.match("GET", "/"), nullptr);
}

TEST(PolicyMatch, RootWildcardMatchesEverything) {
  Config config;
  config.routes = {route("*", "/*")};
  const Policy policy(config);
  EXPECT_NE(policy.match("GET", "/"), nullptr);
  EXPECT_NE(policy.match("GET", "/a/b"), nullptr);
}

TEST(PolicyMatch, ParamThenWildcard) {
  Config config;
  config.routes = {route("GET", "/u/{id}/*")};
  const Policy policy(config);
  EXPECT_NE(policy.match("GET", "/u/1"), nullptr);
  EXPECT_NE(policy.match("GET", "/u/1/x/y"), nullptr);
  EXPECT_EQ(policy.match("GET", "/u"), nullptr);
}

TEST(PolicyMatch, RootPath) {
  Config config;
  config.routes = {route("GET", "/")};
  const Policy policy(config);
  EXPECT_NE(policy.match("GET", "/"), nullptr);
  EXPECT_EQ(policy.match("GET", "/a"), nullptr);
}

TEST(PolicyMatch, FirstMatchWins) {
  Config config;
  config.routes = {route("GET", "/api/users/me"), route("GET", "/api/users/{id}"),
                   route("*", "/api/*")};
  const Policy policy(config);
  EXPECT_EQ(name_of(policy.match("GET", "/api/users/me")), "GET /api/users/me");
  EXPECT_EQ(name_of(policy.match("GET", "/api/users/7")), "GET /api/users/{id}");
  EXPECT_EQ(name_of(policy.match("POST", "/api/users/7")), "* /api/*");
}

TEST(PolicyMatch, DefaultRouteWhenNothingMatches) {
  Config config;
  config.routes = {route("GET", "/a")};
  Route fallback = route("*", "/*");
  fallback.name = "default";
  config.default_route = fallback;
  const Policy policy(config);
  EXPECT_EQ(name_of(policy.match("GET", "/a")), "GET /a");
  EXPECT_EQ(name_of(policy.match("GET", "/b")), "default");
}

TEST(PolicyMatch, NoRouteAndNoDefaultIsNull) {
  const Policy policy(Config{});
  EXPECT_EQ(policy.match("GET", "/"), nullptr);
}

TEST(PolicyMatch, PatternsAreNormalisedLikeRequests) {
  Config config;
  config.routes = {route("GET", "/api//status/"), route("GET", "/%7Euser/{id}")};
  const Policy policy(config);
  EXPECT_NE(policy.match("GET", "/api/status"), nullptr);
  EXPECT_NE(policy.match("GET", "/~user/1"), nullptr);
}

TEST(PolicyMatch, CaseInsensitivePathsCompareThePatternLowerCased) {
  Config config;
  config.case_insensitive_paths = true;
  config.routes = {route("GET", "/API/Status"), route("GET", "/Users/{Id}/*")};
  const Policy policy(config);
  EXPECT_NE(policy.match("GET", "/api/status"), nullptr);
  EXPECT_NE(policy.match("GET", "/users/1/x"), nullptr);
  EXPECT_EQ(name_of(policy.plan(request("GET", "/API/STATUS")).route), "GET /API/Status");
  EXPECT_EQ(name_of(policy.plan(request("GET", "/api/status/")).route), "GET /API/Status");
}

TEST(PolicyMatch, CaseSensitiveByDefault) {
  Config config;
  config.routes = {route("GET", "/api/status")};
  const Policy policy(config);
  EXPECT_EQ(policy.plan(request("GET", "/API/status")).route, nullptr);
}

// --- plan: every spelling shares one limit ---

TEST(PolicyPlan, PathVariantsShareOneStoreKey) {
  Config config;
  config.routes = {route("GET", "/api/search")};
  const Policy policy(config);
  const Plan canonical = policy.plan(request("GET", "/api/search"));
  ASSERT_EQ(canonical.limits.size(), 1u);
  EXPECT_EQ(canonical.limits[0].store_key, "route:GET /api/search#0|ip:192.0.2.1");
  for (std::string_view variant :
       {"/api/search/", "//api//search", "/api/./search", "/api/x/../search", "/api/%73earch",
        "/api/search?q=cats", "/api/search/?q=/../x#f", "http://example.com/api/search"}) {
    const Plan p = policy.plan(request("GET", variant));
    ASSERT_EQ(p.route, canonical.route) << variant;
    ASSERT_EQ(p.limits.size(), 1u);
    EXPECT_EQ(p.limits[0].store_key, canonical.limits[0].store_key) << variant;
    EXPECT_EQ(p.normalized_path, "/api/search");
  }
}

// HEAD and GET of one path spend one budget: alternating them cannot double it.
TEST(PolicyPlan, HeadAndGetOfOnePathShareTheirStoreKeys) {
  Config config;
  config.routes = {route("GET", "/api/items/{id}", {bucket(3, 1)})};
  const Policy policy(config);
  const Plan get = policy.plan(request("GET", "/api/items/7"));
  const Plan head = policy.plan(request("HEAD", "/api/items/7?x=1"));
  ASSERT_EQ(get.limits.size(), 1u);
  ASSERT_EQ(head.limits.size(), 1u);
  EXPECT_EQ(head.route, get.route);
  EXPECT_EQ(head.limits[0].store_key, "route:GET /api/items/{id}#0|ip:192.0.2.1");
  EXPECT_EQ(head.limits[0].store_key, get.limits[0].store_key);
}

TEST(PolicyPlan, NoRouteNoLimits) {
  const Policy policy(Config{});
  const Plan p = policy.plan(request("GET", "/x"));
  EXPECT_EQ(p.route, nullptr);
  EXPECT_TRUE(p.limits.empty());
  EXPECT_EQ(p.normalized_path, "/x");
  EXPECT_EQ(p.client, ip("192.0.2.1"));
}

// --- keys ---

TEST(PolicyKey, IpKey) {
  Config config;
  config.routes = {route("GET", "/a")};
  const Policy policy(config);
  EXPECT_EQ(policy.plan(request("GET", "/a")).client_key, "ip:192.0.2.1");
}

TEST(PolicyKey, Ipv6KeyedBySlash64ByDefault) {
  Config config;
  config.routes = {route("GET", "/a")};
  const Policy policy(config);
  const Plan p1 = policy.plan(request("GET", "/a", nullptr, "2001:db8:1:2::1"));
  const Plan p2 = policy.plan(request("GET", "/a", nullptr, "2001:db8:1:2:ffff::9"));
  const Plan p3 = policy.plan(request("GET", "/a", nullptr, "2001:db8:1:3::1"));
  EXPECT_EQ(p1.client_key, "ip:2001:db8:1:2::/64");
  EXPECT_EQ(p1.limits[0].store_key, p2.limits[0].store_key);
  EXPECT_NE(p1.limits[0].store_key, p3.limits[0].store_key);
}

TEST(PolicyKey, Ipv6PrefixFromConfig) {
  Config config;
  config.client_ip.ipv6_prefix = 48;
  config.routes = {route("GET", "/a")};
  const Policy policy(config);
  EXPECT_EQ(policy.plan(request("GET", "/a", nullptr, "2001:db8:1:2::1")).client_key,
            "ip:2001:db8:1::/48");
}

TEST(PolicyKey, MappedPeerIsKeyedAsIpv4) {
  Config config;
  config.routes = {route("GET", "/a")};
  const Policy policy(config);
  EXPECT_EQ(policy.plan(request("GET", "/a", nullptr, "::ffff:192.0.2.1")).client_key,
            "ip:192.0.2.1");
}

TEST(PolicyKey, HeaderKey) {
  Config config;
  config.routes = {route("POST", "/orders", {bucket(10, 2)},
                         key_spec({header_part("x-api-key")}, "header:x-api-key"))};
  const Policy policy(config);
  FakeHeaders headers;
  headers.add("X-Api-Key", "abc");
  const Plan p = policy.plan(request("POST", "/orders", &headers));
  EXPECT_EQ(p.client_key, "h:x-api-key=abc");
  EXPECT_EQ(p.limits[0].store_key, "route:POST /orders#0|h:x-api-key=abc");
}

TEST(PolicyKey, MissingOrEmptyHeaderFallsBackToTheIp) {
  Config config;
  config.routes = {route("POST", "/orders", {bucket(10, 2)},
                         key_spec({header_part("x-api-key")}, "header:x-api-key"))};
  const Policy policy(config);
  EXPECT_EQ(policy.plan(request("POST", "/orders")).client_key, "ip:192.0.2.1");
  FakeHeaders none;
  EXPECT_EQ(policy.plan(request("POST", "/orders", &none)).client_key, "ip:192.0.2.1");
  FakeHeaders empty;
  empty.add("x-api-key", "");
  EXPECT_EQ(policy.plan(request("POST", "/orders", &empty)).client_key, "ip:192.0.2.1");
}

KeyPart part(KeyPart::Kind kind, std::string name) {
  return KeyPart{kind, std::move(name)};
}

TEST(PolicyKey, CookieKeyReadsOneCookieOfAnyCookieField) {
  Config config;
  config.routes = {route("GET", "/a", {bucket(10, 1)},
                         key_spec({part(KeyPart::Kind::kCookie, "sid")}, "cookie:sid"))};
  const Policy policy(config);
  const auto key_for = [&](std::vector<std::string> cookie_fields) {
    FakeHeaders headers;
    for (const std::string& f : cookie_fields) headers.add("Cookie", f);
    return policy.plan(request("GET", "/a", &headers)).client_key;
  };
  EXPECT_EQ(key_for({"theme=dark; sid=abc123; lang=en"}), "c:sid=abc123");
  EXPECT_EQ(key_for({"theme=dark", "sid=\"abc123\""}), "c:sid=abc123");
  EXPECT_EQ(key_for({"SID=abc123"}), "ip:192.0.2.1");  // names are case-sensitive
  EXPECT_EQ(key_for({"sidx=1"}), "ip:192.0.2.1");
  EXPECT_EQ(key_for({"sid="}), "ip:192.0.2.1");
  // Twice: which one the application reads is not known, so neither is used.
  EXPECT_EQ(key_for({"sid=a; sid=b"}), "ip:192.0.2.1");
  EXPECT_EQ(key_for({"sid=a", "sid=b"}), "ip:192.0.2.1");
  EXPECT_EQ(key_for({"sid=a b|c"}), "c:sid=a%20b%7Cc");
  EXPECT_EQ(key_for({}), "ip:192.0.2.1");
}

TEST(PolicyKey, QueryKeyIsDecodedSoOneValueIsOneKey) {
  Config config;
  config.routes = {route("GET", "/search", {bucket(10, 1)},
                         key_spec({part(KeyPart::Kind::kQuery, "api_key")}, "query:api_key"))};
  const Policy policy(config);
  const auto key_for = [&](std::string_view target) {
    return policy.plan(request("GET", target)).client_key;
  };
  EXPECT_EQ(key_for("/search?q=x&api_key=abc"), "q:api_key=abc");
  EXPECT_EQ(key_for("/search?api_key=%61bc"), "q:api_key=abc");
  EXPECT_EQ(key_for("/search?api%5Fkey=abc"), "q:api_key=abc");
  EXPECT_EQ(key_for("/search?api_key=a+b"), "q:api_key=a%20b");
  EXPECT_EQ(key_for("/search?api_key=abc#frag"), "q:api_key=abc");
  EXPECT_EQ(key_for("/search?api_key=abc&api_key=def"), "ip:192.0.2.1");
  EXPECT_EQ(key_for("/search?api_key=%zz"), "ip:192.0.2.1");
  EXPECT_EQ(key_for("/search?api_key="), "ip:192.0.2.1");
  EXPECT_EQ(key_for("/search?api_key"), "ip:192.0.2.1");
  EXPECT_EQ(key_for("/search"), "ip:192.0.2.1");
}

TEST(PolicyKey, JwtKeyIsAVerifiedClaimElseTheClientAddress) {
  Config config;
  config.jwt = JwtSettings{};
  config.jwt->secret_file = "/etc/sluice/jwt.secret";
  config.jwt->secret = "k";
  config.routes = {route("GET", "/a", {bucket(10, 1)},
                         key_spec({part(KeyPart::Kind::kJwt, "sub"), kIpPart}, "jwt:sub+ip"))};
  const Policy policy(config);
  const auto key_for = [&](const std::string& authorization, int64_t now_s) {
    FakeHeaders headers;
    if (!authorization.empty()) headers.add("Authorization", authorization);
    RequestInfo info = request("GET", "/a", &headers);
    info.now = std::chrono::seconds(now_s);
    return policy.plan(info).client_key;
  };
  const std::string token = test::hs256_token("k", R"({"sub":"ann lee","exp":1700000100})");
  EXPECT_EQ(key_for("Bearer " + token, 1'700'000'000), "j:sub=ann%20lee+ip:192.0.2.1");
  // Expired, forged, or absent: the address stands in for the claim.
  EXPECT_EQ(key_for("Bearer " + token, 1'700'000'100), "ip:192.0.2.1+ip:192.0.2.1");
  EXPECT_EQ(key_for("Bearer " + test::hs256_token("guess", R"({"sub":"ann"})"), 1'700'000'000),
            "ip:192.0.2.1+ip:192.0.2.1");
  EXPECT_EQ(key_for("", 1'700'000'000), "ip:192.0.2.1+ip:192.0.2.1");
  // /admin/reset takes the claim as written.
  EXPECT_EQ(policy.client_key_of(config.routes[0], "j:sub=ann"), "j:sub=ann");
}

TEST(PolicyKey, ResetTakesACookieOrQueryValueAsWritten) {
  Config config;
  config.routes = {
      route("GET", "/a", {bucket(10, 1)}, key_spec({part(KeyPart::Kind::kQuery, "k")}, "query:k"))};
  const Policy policy(config);
  EXPECT_EQ(policy.client_key_of(config.routes[0], "a b"), "q:k=a%20b");
  EXPECT_EQ(policy.client_key_of(config.routes[0], "q:k=x"), "q:k=x");
}

TEST(PolicyKey, GlobalKey) {
  Config config;
  config.routes = {route("GET", "/a", {bucket(10, 1)}, key_spec({kGlobalPart}, "global"))};
  const Policy policy(config);
  const Plan p1 = policy.plan(request("GET", "/a", nullptr, "192.0.2.1"));
  const Plan p2 = policy.plan(request("GET", "/a", nullptr, "198.51.100.1"));
  EXPECT_EQ(p1.client_key, "global");
  EXPECT_EQ(p1.limits[0].store_key, p2.limits[0].store_key);
}

TEST(PolicyKey, CombinationsJoinedByPlus) {
  Config config;
  config.routes = {route("GET", "/a", {bucket(10, 1)},
                         key_spec({kIpPart, header_part("x-user")}, "ip+header:x-user"))};
  const Policy policy(config);
  FakeHeaders headers;
  headers.add("x-user", "42");
  EXPECT_EQ(policy.plan(request("GET", "/a", &headers)).client_key, "ip:192.0.2.1+h:x-user=42");
  EXPECT_EQ(policy.plan(request("GET", "/a")).client_key, "ip:192.0.2.1+ip:192.0.2.1");
}

TEST(PolicyKey, HeaderValuesAreEscaped) {
  Config config;
  config.routes = {
      route("GET", "/a", {bucket(10, 1)}, key_spec({header_part("x-k")}, "header:x-k"))};
  const Policy policy(config);
  FakeHeaders headers;
  headers.add("x-k", "a+b|c%d e\x01\xff");
  EXPECT_EQ(policy.plan(request("GET", "/a", &headers)).client_key,
            "h:x-k=a%2Bb%7Cc%25d%20e%01%FF");
}

// Without escaping, {a: "1+h:b=2", b: "3"} and {a: "1", b: "2+h:b=3"} would both
// read "h:a=1+h:b=2+h:b=3"; a header could also impersonate the ip part or
// another scope. Every distinct pair of values must give a distinct key.
TEST(PolicyKey, HeaderValuesCannotForgeAnotherKey) {
  Config config;
  config.routes = {route("GET", "/a", {bucket(10, 1)},
                         key_spec({header_part("a"), header_part("b")}, "header:a+header:b"))};
  const Policy policy(config);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"1+h:b=2", "3"},     {"1", "2+h:b=3"}, {"1+ip:192.0.2.1", "3"},
      {"1", "3"},           {"1%2B", "3"},    {"1|route:x", "3"},
      {"1", "3|x"},         {"", ""},  // both missing: ip+ip
      {"ip:192.0.2.1", ""}, {"1", ""},
  };
  std::set<std::string> keys;
  for (const auto& [a, b] : cases) {
    FakeHeaders headers;
    if (!a.empty()) headers.add("a", a);
    if (!b.empty()) headers.add("b", b);
    const Plan p = policy.plan(request("GET", "/a", &headers));
    EXPECT_EQ(p.client_key.find('|'), std::string::npos) << p.client_key;
    EXPECT_EQ(std::count(p.client_key.begin(), p.client_key.end(), '+'), 1) << p.client_key;
    keys.insert(p.limits[0].store_key);
  }
  EXPECT_EQ(keys.size(), cases.size());
}

TEST(PolicyKey, ForgedIpInAHeaderDoesNotMatchTheIpKey) {
  Config config;
  config.routes = {
      route("GET", "/a", {bucket(10, 1)}, key_spec({header_part("x-k")}, "header:x-k"))};
  const Policy policy(config);
  FakeHeaders forged;
  forged.add("x-k", "x+ip:198.51.100.1");
  const Plan attacker = policy.plan(request("GET", "/a", &forged, "192.0.2.1"));
  const Plan victim = policy.plan(request("GET", "/a", nullptr, "198.51.100.1"));
  EXPECT_NE(attacker.limits[0].store_key, victim.limits[0].store_key);
  EXPECT_EQ(attacker.client_key, "h:x-k=x%2Bip:198.51.100.1");
}

// --- client address through plan() ---

TEST(PolicyAccess, AllowedClientsAreNotLimitedAndDeniedOnesAreMarked) {
  Config config;
  config.client_ip.trusted_proxies = {parse_cidr("127.0.0.1/32").value()};
  config.access.allow = {parse_cidr("10.0.0.0/8").value(), parse_cidr("2001:db8::/32").value()};
  config.access.deny = {parse_cidr("203.0.113.0/24").value(), parse_cidr("10.9.0.0/16").value()};
  config.routes = {route("GET", "/a", {bucket(10, 1)})};
  const Policy policy(config);
  auto plan_for = [&](std::string_view peer, std::string forwarded = "") {
    FakeHeaders headers;
    if (!forwarded.empty()) headers.add("X-Forwarded-For", forwarded);
    return policy.plan(request("GET", "/a", &headers, peer));
  };
  // Allowed: the route is known, nothing is limited.
  const Plan allowed = plan_for("10.1.2.3");
  EXPECT_EQ(allowed.refusal, policy::Refusal::kNone);
  EXPECT_NE(allowed.route, nullptr);
  EXPECT_TRUE(allowed.limits.empty());
  EXPECT_TRUE(plan_for("2001:db8::7").limits.empty());
  // Denied, deny winning over allow; also on paths no route limits.
  EXPECT_EQ(plan_for("203.0.113.9").refusal, policy::Refusal::kAccessDenied);
  EXPECT_EQ(plan_for("10.9.1.1").refusal, policy::Refusal::kAccessDenied);
  FakeHeaders none;
  EXPECT_EQ(policy.plan(request("GET", "/unrouted", &none, "203.0.113.9")).refusal,
            policy::Refusal::kAccessDenied);
  // The address as resolved through trusted proxies, not the peer.
  EXPECT_EQ(plan_for("127.0.0.1", "203.0.113.9").refusal, policy::Refusal::kAccessDenied);
  EXPECT_TRUE(plan_for("127.0.0.1", "10.1.2.3").limits.empty());
  EXPECT_FALSE(plan_for("198.51.100.1", "10.1.2.3").limits.empty());  // untrusted peer
  // Anyone else: limited as usual.
  const Plan other = plan_for("198.51.100.1");
  EXPECT_EQ(other.refusal, policy::Refusal::kNone);
  EXPECT_EQ(other.limits.size(), 1u);
}

// One route, GET /a, behind a proxy on 127.0.0.1.
Config behind_loopback_proxy() {
  Config config;
  config.client_ip.trusted_proxies = {parse_cidr("127.0.0.1/32").value()};
  config.routes = {route("GET", "/a")};
  return config;
}

// plan() of GET /a from `peer` with `fields`.
Plan plan_from(const Policy& policy, std::string_view peer,
               const std::vector<std::pair<std::string, std::string>>& fields) {
  FakeHeaders headers;
  for (const auto& [name, value] : fields) headers.add(name, value);
  return policy.plan(request("GET", "/a", &headers, peer));
}

TEST(PolicyClientIp, ForwardedForIgnoredFromAnUntrustedPeer) {
  const Policy policy(behind_loopback_proxy());
  const Plan p = plan_from(policy, "203.0.113.5",
                           {{"X-Forwarded-For", "198.51.100.1"}, {"X-Real-IP", "198.51.100.2"}});
  EXPECT_EQ(p.client, ip("203.0.113.5"));
  EXPECT_EQ(p.client_key, "ip:203.0.113.5");
}

TEST(PolicyClientIp, ForwardedForHonouredFromATrustedPeer) {
  Config config;
  config.client_ip.trusted_proxies = {parse_cidr("127.0.0.1/32").value(),
                                      parse_cidr("10.0.0.0/8").value()};
  config.routes = {route("GET", "/a")};
  const Policy policy(config);
  FakeHeaders headers;
  headers.add("X-Forwarded-For", "6.6.6.6, 198.51.100.1");  // two header lines,
  headers.add("X-Forwarded-For", "10.1.1.1");               // joined by get_all
  const Plan p = policy.plan(request("GET", "/a", &headers, "127.0.0.1"));
  EXPECT_EQ(p.client_key, "ip:198.51.100.1");
}

// The address comes from the one configured header (X-Forwarded-For by
// default), never from whichever a request carries.
TEST(PolicyClientIp, OnlyTheConfiguredHeaderNamesTheClient) {
  Config config = behind_loopback_proxy();
  config.access.deny = {parse_cidr("203.0.113.7/32").value()};
  const Policy policy(config);
  const Plan p = plan_from(policy, "127.0.0.1",
                           {{"X-Real-IP", "198.51.100.3"}, {"Forwarded", "for=198.51.100.4"}});
  EXPECT_EQ(p.client, ip("127.0.0.1"));
  EXPECT_EQ(p.client_key, "ip:127.0.0.1");
  // A denied client behind the proxy stays denied whatever else it sends.
  EXPECT_EQ(
      plan_from(policy, "127.0.0.1", {{"X-Forwarded-For", "203.0.113.7"}, {"X-Real-IP", "9.9.9.9"}})
          .refusal,
      policy::Refusal::kAccessDenied);
}

// --- store keys and named policies ---

Config login_config() {
  Config config;
  config.policies = {NamedPolicy{"login", bucket(5, 1)}};
  Route login = route("POST", "/api/auth/login", {});
  login.limits = {
      RouteLimit{"login", true, bucket(5, 1)},
      RouteLimit{"POST /api/auth/login#1", false, Limit::fixed_window(100, 3600s).value()}};
  Route other = route("POST", "/api/auth/token", {});
  other.limits = {RouteLimit{"login", true, bucket(5, 1)}};
  config.routes = {login, other};
  return config;
}

TEST(PolicyStoreKey, NamedPolicyIsSharedAndInlineLimitsAreNot) {
  const Policy policy(login_config());
  const Plan login = policy.plan(request("POST", "/api/auth/login"));
  const Plan token = policy.plan(request("POST", "/api/auth/token"));
  ASSERT_EQ(login.limits.size(), 2u);
  ASSERT_EQ(token.limits.size(), 1u);
  EXPECT_EQ(login.limits[0].store_key, "policy:login|ip:192.0.2.1");
  EXPECT_EQ(login.limits[1].store_key, "route:POST /api/auth/login#1|ip:192.0.2.1");
  EXPECT_EQ(token.limits[0].store_key, login.limits[0].store_key);
  EXPECT_EQ(login.limits[0].limit, &login.route->limits[0]);
  EXPECT_EQ(login.limits[1].limit, &login.route->limits[1]);
}

TEST(PolicyStoreKey, EqualInlineLimitsOnDifferentRoutesDoNotShare) {
  Config config;
  config.routes = {route("GET", "/a"), route("GET", "/b")};
  const Policy policy(config);
  EXPECT_NE(policy.plan(request("GET", "/a")).limits[0].store_key,
            policy.plan(request("GET", "/b")).limits[0].store_key);
}

TEST(PolicyStoreKey, DefaultRouteLimits) {
  Config config;
  Route fallback = route("*", "/*", {});
  fallback.name = "default";
  fallback.limits = {RouteLimit{"default#0", false, bucket(100, 20)}};
  config.default_route = fallback;
  const Policy policy(config);
  const Plan p = policy.plan(request("GET", "/anything"));
  ASSERT_EQ(p.limits.size(), 1u);
  EXPECT_EQ(p.limits[0].store_key, "route:default#0|ip:192.0.2.1");
}

TEST(PolicyNamed, FindPolicyAndPlanPolicy) {
  const Policy policy(login_config());
  ASSERT_NE(policy.find_policy("login"), nullptr);
  EXPECT_EQ(policy.find_policy("login")->limit.size(), 5u);
  EXPECT_EQ(policy.find_policy("nope"), nullptr);
  ASSERT_NE(policy.find_policy_limit("login"), nullptr);
  EXPECT_EQ(policy.find_policy_limit("login")->name, "login");
  EXPECT_TRUE(policy.find_policy_limit("login")->named_policy);
  EXPECT_EQ(policy.find_policy_limit("nope"), nullptr);

  const Plan p = policy.plan_policy("login", "user:42");
  ASSERT_EQ(p.limits.size(), 1u);
  EXPECT_EQ(p.route, nullptr);
  EXPECT_EQ(p.limits[0].store_key, "policy:login|user:42");
  EXPECT_EQ(p.limits[0].limit, policy.find_policy_limit("login"));
  EXPECT_TRUE(policy.plan_policy("nope", "user:42").limits.empty());
  EXPECT_EQ(Policy::policy_store_key("login", "ip:192.0.2.1"), "policy:login|ip:192.0.2.1");
}

// --- what a client sends never sizes what the store keeps ---

// "%sha256:" and the first 128 bits of SHA-256 in hex, computed here rather
// than by the code under test.
std::string digest_of(std::string_view value) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EXPECT_EQ(EVP_Digest(value.data(), value.size(), md, &length, EVP_sha256(), nullptr), 1);
  std::string out = "%sha256:";
  static constexpr char kHex[] = "0123456789abcdef";
  for (int i = 0; i < 16; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 0xf];
  }
  return out;
}

TEST(PolicyKeyBound, ValuesLongerThan256BytesAreStoredAsTheirDigest) {
  Config config;
  config.routes = {
      route("GET", "/h", {bucket(3, 1)}, key_spec({header_part("x-api-key")}, "header:x-api-key")),
      route("GET", "/c", {bucket(3, 1)},
            key_spec({part(KeyPart::Kind::kCookie, "sid")}, "cookie:sid")),
      route("GET", "/q", {bucket(3, 1)},
            key_spec({part(KeyPart::Kind::kQuery, "k"), kIpPart}, "query:k+ip"))};
  const Policy policy(config);
  const auto key_for = [&](std::string_view target, const std::string& header_value) {
    FakeHeaders headers;
    headers.add("X-Api-Key", header_value);
    headers.add("Cookie", "sid=" + header_value);
    return policy.plan(request("GET", target, &headers)).limits.at(0).store_key;
  };
  // The attack: a fresh 15 KB key per request.
  const std::string long_a = std::string(15'000, 'k') + "a";
  const std::string long_b = std::string(15'000, 'k') + "b";
  EXPECT_EQ(key_for("/h", long_a), "route:GET /h#0|h:x-api-key=" + digest_of(long_a));
  EXPECT_EQ(key_for("/c", long_a), "route:GET /c#0|c:sid=" + digest_of(long_a));
  EXPECT_EQ(key_for("/q?k=" + long_a, ""),
            "route:GET /q#0|q:k=" + digest_of(long_a) + "+ip:192.0.2.1");
  // One long value is one key; two are two.
  EXPECT_EQ(key_for("/h", long_a), key_for("/h", long_a));
  EXPECT_NE(key_for("/h", long_a), key_for("/h", long_b));
  // 256 bytes are kept as they came, 257 are not.
  const std::string exactly(256, 'x');
  EXPECT_EQ(key_for("/h", exactly), "route:GET /h#0|h:x-api-key=" + exactly);
  EXPECT_EQ(key_for("/h", exactly + "x"), "route:GET /h#0|h:x-api-key=" + digest_of(exactly + "x"));
  // The bound is on the value as stored: 100 bytes that escape to 300.
  const std::string wide(100, '\xff');
  std::string escaped;
  for (int i = 0; i < 100; ++i) escaped += "%FF";
  EXPECT_EQ(key_for("/h", wide), "route:GET /h#0|h:x-api-key=" + digest_of(escaped));
}

TEST(PolicyKeyBound, JwtClaimsAreBoundedToo) {
  Config config;
  config.jwt = JwtSettings{};
  config.jwt->secret_file = "/etc/sluice/jwt.secret";
  config.jwt->secret = "k";
  config.routes = {
      route("GET", "/a", {bucket(10, 1)}, key_spec({part(KeyPart::Kind::kJwt, "sub")}, "jwt:sub"))};
  const Policy policy(config);
  const std::string sub(1'000, 's');
  FakeHeaders headers;
  headers.add("Authorization",
              "Bearer " + test::hs256_token("k", R"({"sub":")" + sub + R"(","exp":1700000100})"));
  RequestInfo info = request("GET", "/a", &headers);
  info.now = std::chrono::seconds(1'700'000'000);
  EXPECT_EQ(policy.plan(info).client_key, "j:sub=" + digest_of(sub));
}

TEST(PolicyKeyBound, ACheckKeyIsBoundedAndNoKeySentSpellsADigest) {
  const Policy policy(login_config());
  const std::string long_key(10'000, 'u');
  const Plan p = policy.plan_policy("login", long_key);
  ASSERT_EQ(p.limits.size(), 1u);
  EXPECT_EQ(p.limits[0].store_key, "policy:login|" + digest_of(long_key));
  EXPECT_EQ(p.client_key, digest_of(long_key));
  // /admin/reset {"policy","key"} finds the same state.
  EXPECT_EQ(Policy::policy_store_key("login", long_key), p.limits[0].store_key);
  // A key that looks like a digest is hashed in turn: it cannot name the
  // state of the long key.
  const std::string spelled = digest_of(long_key);
  EXPECT_EQ(policy.plan_policy("login", spelled).limits[0].store_key,
            "policy:login|" + digest_of(spelled));
  EXPECT_EQ(policy.plan_policy("login", "user:42").limits[0].store_key, "policy:login|user:42");
}

TEST(PolicyKeyBound, AdminResetOfALongValueNamesTheStateItsRequestsCharged) {
  Config config;
  config.routes = {
      route("GET", "/h", {bucket(3, 1)}, key_spec({header_part("x-api-key")}, "header:x-api-key"))};
  const Policy policy(config);
  const std::string long_value(5'000, 'v');
  FakeHeaders headers;
  headers.add("X-Api-Key", long_value);
  const std::string charged = policy.plan(request("GET", "/h", &headers)).client_key;
  // The value as the client sent it, the client key as Sluice forms it, or
  // the key with its digest (as an unredacted log shows it).
  EXPECT_EQ(policy.client_key_of(config.routes[0], long_value), charged);
  EXPECT_EQ(policy.client_key_of(config.routes[0], "h:x-api-key=" + long_value), charged);
  EXPECT_EQ(policy.client_key_of(config.routes[0], charged), charged);
}

TEST(PolicyCopy, ACopyMatchesIntoItsOwnConfig) {
  const Policy original(login_config());
  const Policy copy = original;
  const Route* r = copy.match("POST", "/api/auth/login");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r, &copy.config().routes[0]);
  EXPECT_NE(r, original.match("POST", "/api/auth/login"));
}

}  // namespace
}  // namespace sluice::policy
