// The one grammar of values (src/config/values/values.h): durations, rates, sizes,
// addresses, URLs, "did you mean", as every config file reads them.
#include "config/values/values.h"

#include <gtest/gtest.h>

namespace sluice::config {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

template <class T>
std::string error_of(const Result<T>& r) {
  return r.ok() ? "(ok)" : r.error().message;
}

TEST(Values, DurationsTakeAnIntegerAndAUnit) {
  EXPECT_EQ(*parse_duration("500ms", false), milliseconds(500));
  EXPECT_EQ(*parse_duration("1s", false), seconds(1));
  EXPECT_EQ(*parse_duration("1m", false), minutes(1));
  EXPECT_EQ(*parse_duration("1h", false), hours(1));
  EXPECT_EQ(*parse_duration("1d", false), hours(24));
  EXPECT_EQ(*parse_duration("2w", false), hours(24 * 14));
  EXPECT_EQ(*parse_duration("1_500ms", false), milliseconds(1500));
  EXPECT_EQ(*parse_duration("0s", true), seconds(0));
}

TEST(Values, DurationErrorsSayWhatIsWrong) {
  const std::string like = "must be a duration like 500ms, 1s, 1m, 1h, 1d or 1w, got ";
  EXPECT_EQ(error_of(parse_duration("1.5s", false)),
            like + "\"1.5s\" (whole numbers only: write 1500ms, not 1.5s)");
  EXPECT_EQ(error_of(parse_duration("10", false)),
            like + "\"10\" (the unit is missing: add ms, s, m, h, d or w)");
  EXPECT_EQ(error_of(parse_duration("-1s", false)),
            like + "\"-1s\" (a duration cannot be negative)");
  EXPECT_EQ(error_of(parse_duration("5x", false)),
            like + "\"5x\" (unknown unit \"x\"; use ms, s, m, h, d or w)");
  EXPECT_EQ(error_of(parse_duration("s", false)),
            like + "\"s\" (it must start with a whole number)");
  EXPECT_EQ(error_of(parse_duration("", false)), like + "\"\"");
  EXPECT_EQ(error_of(parse_duration("1 s", false)),
            like + "\"1 s\" (unknown unit \" s\"; use ms, s, m, h, d or w)");
  EXPECT_EQ(error_of(parse_duration("0s", false)), "must be greater than 0, got \"0s\"");
  EXPECT_EQ(error_of(parse_duration("999999999999d", false)),
            like + "\"999999999999d\" (too large)");
}

TEST(Values, RatesAreCountPerUnitOrPerDuration) {
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
  r = *parse_rate("7/w");
  EXPECT_EQ(r.period, hours(24 * 7));
}

TEST(Values, RateErrorsSayWhatIsWrong) {
  const std::string like = "must be a rate like 10/s, 100/m, 1000/h, 5/d or 10/2s, got ";
  EXPECT_EQ(error_of(parse_rate("10")),
            like + "\"10\" (write a count, '/', and a unit or a duration)");
  EXPECT_EQ(error_of(parse_rate("0/s")), like + "\"0/s\" (the count must be at least 1)");
  EXPECT_EQ(error_of(parse_rate("1.5/s")),
            like + "\"1.5/s\" (whole numbers only: write 3/2s, not 1.5/s)");
  EXPECT_EQ(error_of(parse_rate("-1/s")), like + "\"-1/s\" (a rate cannot be negative)");
  EXPECT_EQ(error_of(parse_rate("5/x")),
            like + "\"5/x\" (unknown unit \"x\"; use ms, s, m, h, d or w)");
  EXPECT_EQ(error_of(parse_rate("5/sec")),
            like + "\"5/sec\" (unknown unit \"sec\"; use ms, s, m, h, d or w)");
  EXPECT_EQ(error_of(parse_rate("5/0s")), like + "\"5/0s\" (the period must be greater than 0)");
  EXPECT_EQ(error_of(parse_rate("ten/s")), like + "\"ten/s\"");
}

TEST(Values, SizesInBytesWithBinaryUnits) {
  EXPECT_EQ(*parse_size("16384"), 16384u);
  EXPECT_EQ(*parse_size("16KiB"), 16384u);
  EXPECT_EQ(*parse_size("1MiB"), 1048576u);
  EXPECT_EQ(*parse_size("2GiB"), 2147483648u);
  EXPECT_EQ(error_of(parse_size("16KB")),
            "must be a size in bytes like 16384, 16KiB or 1MiB, got \"16KB\" (units: B, KiB, "
            "MiB, GiB)");
}

TEST(Values, HostPortAcceptsNamesV4AndBracketedV6) {
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

TEST(Values, HostPortErrors) {
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

TEST(Values, HttpUrlIsPlainHttp) {
  HttpUrl u = *parse_http_url("http://127.0.0.1:3000");
  EXPECT_EQ(u.url, "http://127.0.0.1:3000");
  EXPECT_EQ(u.address.host, "127.0.0.1");
  EXPECT_EQ(u.address.port, 3000);
  EXPECT_EQ(u.base_path, "");
  u = *parse_http_url("http://api.internal/v2/");
  EXPECT_EQ(u.address.host, "api.internal");
  EXPECT_EQ(u.address.port, 80);
  EXPECT_EQ(u.base_path, "/v2");
  u = *parse_http_url("HTTP://[::1]:81");
  EXPECT_EQ(u.address.host, "::1");
  EXPECT_EQ(u.address.port, 81);
}

TEST(Values, HttpUrlErrors) {
  const std::string like = "must be an http:// URL like http://127.0.0.1:3000, got ";
  EXPECT_EQ(error_of(parse_http_url("https://a")),
            like +
                "\"https://a\" (https is not supported: the gateway speaks plain HTTP to its "
                "upstream)");
  EXPECT_EQ(error_of(parse_http_url("127.0.0.1:3000")),
            like + "\"127.0.0.1:3000\" (the scheme is missing: write http://127.0.0.1:3000)");
  EXPECT_EQ(error_of(parse_http_url("ftp://a")), like + "\"ftp://a\" (only http:// is supported)");
  EXPECT_EQ(error_of(parse_http_url("http://u:p@a")),
            like + "\"http://u:p@a\" (user info is not supported)");
  EXPECT_EQ(error_of(parse_http_url("http://a/x?y=1")),
            like + "\"http://a/x?y=1\" (a query string or fragment is not allowed)");
  EXPECT_EQ(error_of(parse_http_url("http://:80")), like + "\"http://:80\" (the host is missing)");
}

TEST(Values, RedisUrlWithOptionalUserPasswordAndDatabase) {
  RedisUrl u = *parse_redis_url("redis://10.0.0.5:6380/2");
  EXPECT_EQ(u.address.text(), "10.0.0.5:6380");
  EXPECT_EQ(u.database, 2);
  EXPECT_FALSE(u.has_credentials);
  u = *parse_redis_url("redis://:s%40cret@cache");
  EXPECT_EQ(u.address.text(), "cache:6379");
  EXPECT_TRUE(u.has_credentials);
  EXPECT_EQ(u.username, "");
  EXPECT_EQ(u.password, "s@cret");
  EXPECT_EQ(u.database, -1);  // not given: the store's option applies
  // An ACL user (Redis 6+), as redis-cli and every client library read it.
  u = *parse_redis_url("redis://sluice:p%3Aw@[::1]:6380/0");
  EXPECT_EQ(u.username, "sluice");
  EXPECT_EQ(u.password, "p:w");
  EXPECT_EQ(u.address.text(), "[::1]:6380");
  EXPECT_EQ(u.database, 0);
  // A plain host:port where URLs are optional (the Redis store's addresses).
  u = *parse_redis_url("127.0.0.1:7000", /*url_only=*/false);
  EXPECT_EQ(u.address.text(), "127.0.0.1:7000");
  EXPECT_FALSE(u.has_credentials);
  EXPECT_FALSE(u.tls);
  // rediss:// is TLS, with the same user info, port and database.
  u = *parse_redis_url("rediss://alice:secret@redis.internal:6380/2");
  EXPECT_TRUE(u.tls);
  EXPECT_EQ(u.username, "alice");
  EXPECT_EQ(u.password, "secret");
  EXPECT_EQ(u.address.text(), "redis.internal:6380");
  EXPECT_EQ(u.database, 2);
  EXPECT_FALSE(parse_redis_url("redis://a")->tls);
}

TEST(Values, RedisUrlErrors) {
  const std::string like =
      "must be a Redis URL like redis://127.0.0.1:6379/0 or redis://user:password@host:6379, got ";
  EXPECT_EQ(error_of(parse_redis_url("http://a")),
            like + "\"http://a\" (it must start with redis:// or rediss://)");
  EXPECT_EQ(error_of(parse_redis_url("127.0.0.1:6379")),
            like + "\"127.0.0.1:6379\" (it must start with redis:// or rediss://)");
  EXPECT_EQ(error_of(parse_redis_url("redis://a:6379/x")),
            like + "\"redis://a:6379/x\" (the database after '/' must be a number)");
  EXPECT_EQ(error_of(parse_redis_url("redis://:%zz@a")),
            like + "\"redis://:%zz@a\" (bad %-escape in the user info)");
  EXPECT_EQ(error_of(parse_redis_url("redis://a?timeout=1")),
            like + "\"redis://a?timeout=1\" (query options are not supported)");
  EXPECT_EQ(error_of(parse_redis_url("a", /*url_only=*/false)),
            "must be host:port like 127.0.0.1:6379 or a Redis URL like "
            "redis://user:password@host:6379/0, got \"a\" (the port is missing)");
}

TEST(Values, ClosestMatchSuggestsTyposAndOtherLimitersWordsOnly) {
  const std::vector<std::string_view> keys = {"capacity", "refill_rate", "algorithm", "window"};
  EXPECT_EQ(closest_match("refil_rate", keys), "refill_rate");
  EXPECT_EQ(closest_match("capcaity", keys), "capacity");  // a transposition is one edit
  EXPECT_EQ(closest_match("Window", keys), "window");
  EXPECT_EQ(closest_match("size", keys), "");
  // nginx's and express-rate-limit's words, when the word they stand for is a candidate.
  EXPECT_EQ(closest_match("burst", keys), "capacity");
  EXPECT_EQ(closest_match("windowMs", keys), "window");
  EXPECT_EQ(closest_match("burst", {"limit", "window"}), "");
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
}

TEST(Values, QuotedEscapesControlCharacters) {
  EXPECT_EQ(quoted("a\"b\\c\n"), "\"a\\\"b\\\\c\\x0a\"");
}

}  // namespace
}  // namespace sluice::config
