// The scalar syntaxes of the config file: durations, rates, sizes, addresses,
// URLs, key specs and route matches (src/policy/config_values.h).
#include "policy/config_values.h"

#include <gtest/gtest.h>

namespace sluice::policy {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

template <class T>
std::string error_of(const Result<T>& r) {
  return r.ok() ? "(ok)" : r.error().message;
}

TEST(ConfigValues, DurationsTakeAnIntegerAndAUnit) {
  EXPECT_EQ(*parse_duration("500ms", false), milliseconds(500));
  EXPECT_EQ(*parse_duration("1s", false), seconds(1));
  EXPECT_EQ(*parse_duration("1m", false), minutes(1));
  EXPECT_EQ(*parse_duration("1h", false), hours(1));
  EXPECT_EQ(*parse_duration("1d", false), hours(24));
  EXPECT_EQ(*parse_duration("1_500ms", false), milliseconds(1500));
  EXPECT_EQ(*parse_duration("0s", true), seconds(0));
}

TEST(ConfigValues, DurationErrorsSayWhatIsWrong) {
  const std::string like = "must be a duration like 500ms, 1s, 1m, 1h or 1d, got ";
  EXPECT_EQ(error_of(parse_duration("1.5s", false)),
            like + "\"1.5s\" (whole numbers only: write 1500ms, not 1.5s)");
  EXPECT_EQ(error_of(parse_duration("10", false)),
            like + "\"10\" (the unit is missing: add ms, s, m, h or d)");
  EXPECT_EQ(error_of(parse_duration("-1s", false)),
            like + "\"-1s\" (a duration cannot be negative)");
  EXPECT_EQ(error_of(parse_duration("5x", false)),
            like + "\"5x\" (unknown unit \"x\"; use ms, s, m, h or d)");
  EXPECT_EQ(error_of(parse_duration("s", false)),
            like + "\"s\" (it must start with a whole number)");
  EXPECT_EQ(error_of(parse_duration("", false)), like + "\"\"");
  EXPECT_EQ(error_of(parse_duration("1 s", false)),
            like + "\"1 s\" (unknown unit \" s\"; use ms, s, m, h or d)");
  EXPECT_EQ(error_of(parse_duration("0s", false)), "must be greater than 0, got \"0s\"");
  EXPECT_EQ(error_of(parse_duration("999999999999d", false)),
            like + "\"999999999999d\" (too large)");
}

TEST(ConfigValues, RatesAreCountPerUnitOrPerDuration) {
  Rate r = *parse_rate("10/s");
  EXPECT_EQ(r.tokens, 10u);
  EXPECT_EQ(r.period, seconds(1));
  r = *parse_rate("100/m");
  EXPECT_EQ(r.period, minutes(1));
  r = *parse_rate("1000/h");
  EXPECT_EQ(r.period, hours(1));
  r = *parse_rate("5/d");
  EXPECT_EQ(r.period, hours(24));
  r = *parse_rate("10/2s");
  EXPECT_EQ(r.tokens, 10u);
  EXPECT_EQ(r.period, seconds(2));
  r = *parse_rate("1/500ms");
  EXPECT_EQ(r.period, milliseconds(500));
}

TEST(ConfigValues, RateErrorsSayWhatIsWrong) {
  const std::string like = "must be a rate like 10/s, 100/m, 1000/h, 5/d or 10/2s, got ";
  EXPECT_EQ(error_of(parse_rate("10")),
            like + "\"10\" (write a count, '/', and a unit or a duration)");
  EXPECT_EQ(error_of(parse_rate("0/s")), like + "\"0/s\" (the count must be at least 1)");
  EXPECT_EQ(error_of(parse_rate("1.5/s")),
            like + "\"1.5/s\" (whole numbers only: write 3/2s, not 1.5/s)");
  EXPECT_EQ(error_of(parse_rate("-1/s")), like + "\"-1/s\" (a rate cannot be negative)");
  EXPECT_EQ(error_of(parse_rate("5/x")),
            like + "\"5/x\" (unknown unit \"x\"; use ms, s, m, h or d)");
  EXPECT_EQ(error_of(parse_rate("5/sec")),
            like + "\"5/sec\" (unknown unit \"sec\"; use ms, s, m, h or d)");
  EXPECT_EQ(error_of(parse_rate("5/0s")), like + "\"5/0s\" (the period must be greater than 0)");
  EXPECT_EQ(error_of(parse_rate("ten/s")), like + "\"ten/s\"");
}

TEST(ConfigValues, SizesInBytesWithBinaryUnits) {
  EXPECT_EQ(*parse_size("16384"), 16384u);
  EXPECT_EQ(*parse_size("16KiB"), 16384u);
  EXPECT_EQ(*parse_size("1MiB"), 1048576u);
  EXPECT_EQ(*parse_size("2GiB"), 2147483648u);
  EXPECT_EQ(error_of(parse_size("16KB")),
            "must be a size in bytes like 16384, 16KiB or 1MiB, got \"16KB\" (units: B, KiB, "
            "MiB, GiB)");
}

TEST(ConfigValues, HostPortAcceptsNamesV4AndBracketedV6) {
  HostPort hp = *parse_host_port("127.0.0.1:8080", false);
  EXPECT_EQ(hp.host, "127.0.0.1");
  EXPECT_EQ(hp.port, 8080);
  hp = *parse_host_port("[::1]:9090", false);
  EXPECT_EQ(hp.host, "::1");
  EXPECT_EQ(hp.text(), "[::1]:9090");
  hp = *parse_host_port("localhost:1", false);
  EXPECT_EQ(hp.host, "localhost");
  hp = *parse_host_port("0.0.0.0:0", true);
  EXPECT_EQ(hp.port, 0);
}

TEST(ConfigValues, HostPortErrors) {
  const std::string like = "must be host:port like 127.0.0.1:8080 or [::1]:8080, got ";
  EXPECT_EQ(error_of(parse_host_port("8080", true)),
            like + "\"8080\" (the host is missing: write 127.0.0.1:8080)");
  EXPECT_EQ(error_of(parse_host_port("localhost", true)),
            like + "\"localhost\" (the port is missing)");
  EXPECT_EQ(error_of(parse_host_port("::1:80", true)),
            like + "\"::1:80\" (put an IPv6 address in brackets, like [::1]:8080)");
  EXPECT_EQ(error_of(parse_host_port("[::1:80", true)),
            like + "\"[::1:80\" (the ']' closing the IPv6 address is missing)");
  EXPECT_EQ(error_of(parse_host_port("[zz::1]:80", true)),
            like + "\"[zz::1]:80\" (\"zz::1\" is not an IPv6 address)");
  EXPECT_EQ(error_of(parse_host_port("300.1.1.1:80", true)),
            like + "\"300.1.1.1:80\" (\"300.1.1.1\" is not an IPv4 address)");
  EXPECT_EQ(error_of(parse_host_port("a..b:80", true)),
            like + "\"a..b:80\" (\"a..b\" is not a valid host name)");
  EXPECT_EQ(error_of(parse_host_port("h:65536", true)),
            like + "\"h:65536\" (the port must be 0 to 65535)");
  EXPECT_EQ(error_of(parse_host_port("h:0", false)),
            like + "\"h:0\" (the port must be 1 to 65535)");
  EXPECT_EQ(error_of(parse_host_port(":80", true)), like + "\":80\" (the host is missing)");
}

TEST(ConfigValues, UpstreamUrlIsPlainHttp) {
  Upstream u = *parse_upstream_url("http://127.0.0.1:3000");
  EXPECT_EQ(u.url, "http://127.0.0.1:3000");
  EXPECT_EQ(u.address.host, "127.0.0.1");
  EXPECT_EQ(u.address.port, 3000);
  EXPECT_EQ(u.base_path, "");
  u = *parse_upstream_url("http://api.internal/v2/");
  EXPECT_EQ(u.address.host, "api.internal");
  EXPECT_EQ(u.address.port, 80);
  EXPECT_EQ(u.base_path, "/v2");
  u = *parse_upstream_url("HTTP://[::1]:81");
  EXPECT_EQ(u.address.host, "::1");
  EXPECT_EQ(u.address.port, 81);
}

TEST(ConfigValues, UpstreamUrlErrors) {
  const std::string like = "must be an http:// URL like http://127.0.0.1:3000, got ";
  EXPECT_EQ(error_of(parse_upstream_url("https://a")),
            like +
                "\"https://a\" (https is not supported: the gateway speaks plain HTTP to its "
                "upstream)");
  EXPECT_EQ(error_of(parse_upstream_url("127.0.0.1:3000")),
            like + "\"127.0.0.1:3000\" (the scheme is missing: write http://127.0.0.1:3000)");
  EXPECT_EQ(error_of(parse_upstream_url("ftp://a")),
            like + "\"ftp://a\" (only http:// is supported)");
  EXPECT_EQ(error_of(parse_upstream_url("http://u:p@a")),
            like + "\"http://u:p@a\" (user info is not supported)");
  EXPECT_EQ(error_of(parse_upstream_url("http://a/x?y=1")),
            like + "\"http://a/x?y=1\" (a query string or fragment is not allowed)");
  EXPECT_EQ(error_of(parse_upstream_url("http://:80")),
            like + "\"http://:80\" (the host is missing)");
}

TEST(ConfigValues, RedisUrl) {
  RedisUrl u = *parse_redis_url("redis://10.0.0.5:6380/2");
  EXPECT_EQ(u.address.text(), "10.0.0.5:6380");
  EXPECT_EQ(u.database, 2);
  EXPECT_EQ(u.password, "");
  u = *parse_redis_url("redis://:s%40cret@cache");
  EXPECT_EQ(u.address.text(), "cache:6379");
  EXPECT_EQ(u.password, "s@cret");
  EXPECT_EQ(u.database, 0);
  EXPECT_EQ(error_of(parse_redis_url("rediss://a")),
            "must be a Redis URL like redis://127.0.0.1:6379/0 or redis://:password@host:6379, "
            "got \"rediss://a\" (TLS (rediss://) is not supported)");
  EXPECT_EQ(error_of(parse_redis_url("redis://user:pw@a")),
            "must be a Redis URL like redis://127.0.0.1:6379/0 or redis://:password@host:6379, "
            "got \"redis://user:pw@a\" (user names are not supported; write "
            "redis://:password@host)");
}

TEST(ConfigValues, KeySpecs) {
  KeySpec k = *parse_key_spec("ip");
  ASSERT_EQ(k.parts.size(), 1u);
  EXPECT_EQ(k.parts[0].kind, KeyPart::Kind::kIp);
  k = *parse_key_spec("Header:X-API-Key + ip");
  ASSERT_EQ(k.parts.size(), 2u);
  EXPECT_EQ(k.parts[0].kind, KeyPart::Kind::kHeader);
  EXPECT_EQ(k.parts[0].header, "x-api-key");
  EXPECT_EQ(k.parts[1].kind, KeyPart::Kind::kIp);
  EXPECT_EQ(k.text, "header:x-api-key+ip");
  k = *parse_key_spec("global");
  EXPECT_EQ(k.parts[0].kind, KeyPart::Kind::kGlobal);
  const std::string like =
      "must be ip, global, header:NAME or a combination like ip+header:x-api-key, got ";
  EXPECT_EQ(error_of(parse_key_spec("ip+ip")), like + "\"ip+ip\" (ip is listed twice)");
  EXPECT_EQ(error_of(parse_key_spec("ip+")), like + "\"ip+\" (an empty part)");
  EXPECT_EQ(error_of(parse_key_spec("header:")),
            like + "\"header:\" (\"\" is not a valid header name)");
  EXPECT_EQ(error_of(parse_key_spec("global+ip")),
            like + "\"global+ip\" (global is one key for everyone and cannot be combined)");
  EXPECT_EQ(error_of(parse_key_spec("user")), like + "\"user\" (unknown part \"user\")");
}

TEST(ConfigValues, RouteMatches) {
  RouteMatch m = *parse_route_match("get   /api/users/{id}/");
  EXPECT_EQ(m.method, "GET");
  EXPECT_EQ(m.pattern, "/api/users/{id}");
  EXPECT_EQ(m.name, "GET /api/users/{id}/");
  m = *parse_route_match("* /static/*");
  EXPECT_EQ(m.method, "*");
  EXPECT_EQ(m.pattern, "/static/*");
  m = *parse_route_match("GET /");
  EXPECT_EQ(m.pattern, "/");
  // Escapes of unreserved characters are decoded, as in request paths.
  m = *parse_route_match("GET /%7euser/a%2fb");
  EXPECT_EQ(m.pattern, "/~user/a%2Fb");
}

TEST(ConfigValues, RouteMatchErrors) {
  const std::string like =
      "must be \"METHOD /path\" like \"GET /api/users/{id}\" or \"* /static/*\", got ";
  EXPECT_EQ(error_of(parse_route_match("/x")),
            like + "\"/x\" (the method is missing; * matches every method)");
  EXPECT_EQ(error_of(parse_route_match("GET x")),
            like + "\"GET x\" (the path must start with '/')");
  EXPECT_EQ(error_of(parse_route_match("G(T /x")),
            like + "\"G(T /x\" (\"G(T\" is not an HTTP method)");
  EXPECT_EQ(error_of(parse_route_match("GET /a//b")),
            like + "\"GET /a//b\" (an empty segment: \"//\")");
  EXPECT_EQ(error_of(parse_route_match("GET /a/../b")),
            like +
                "\"GET /a/../b\" (\".\" and \"..\" are resolved before matching, so no route "
                "can hold them)");
  EXPECT_EQ(error_of(parse_route_match("GET /a/x{id}")),
            like + "\"GET /a/x{id}\" ({param} must be a whole segment, like /users/{id})");
  EXPECT_EQ(error_of(parse_route_match("GET /a/{}")),
            like + "\"GET /a/{}\" (a {param} name is letters, digits and '_')");
  EXPECT_EQ(error_of(parse_route_match("GET /{a}/{a}")),
            like + "\"GET /{a}/{a}\" ({a} appears twice)");
  EXPECT_EQ(error_of(parse_route_match("GET /a*")),
            like + "\"GET /a*\" (* is allowed only as the whole last segment, like /static/*)");
  EXPECT_EQ(error_of(parse_route_match("GET /a?b=1")),
            like + "\"GET /a?b=1\" (a query string or fragment is never matched; remove it)");
  EXPECT_EQ(error_of(parse_route_match("GET /a b")), like + "\"GET /a b\"");
}

TEST(ConfigValues, PatternShapeIgnoresParameterNames) {
  EXPECT_EQ(pattern_shape("/users/{id}/posts/{post}", false), "/users/{}/posts/{}");
  EXPECT_EQ(pattern_shape("/Users/{ID}", true), "/users/{}");
}

TEST(ConfigValues, ClosestMatchSuggestsTyposOnly) {
  const std::vector<std::string_view> keys = {"capacity", "refill_rate", "algorithm", "window"};
  EXPECT_EQ(closest_match("refil_rate", keys), "refill_rate");
  EXPECT_EQ(closest_match("capcaity", keys), "capacity");  // a transposition is one edit
  EXPECT_EQ(closest_match("Window", keys), "window");
  EXPECT_EQ(closest_match("burst", keys), "");
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
}

TEST(ConfigValues, QuotedEscapesControlCharacters) {
  EXPECT_EQ(quoted("a\"b\\c\n"), "\"a\\\"b\\\\c\\x0a\"");
}

}  // namespace
}  // namespace sluice::policy
