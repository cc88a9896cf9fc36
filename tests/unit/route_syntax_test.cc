// The syntax of a route's `match` and `key` (src/policy/route_syntax.h).
#include "policy/route_syntax.h"

#include <gtest/gtest.h>

namespace sluice::policy {
namespace {

template <class T>
std::string error_of(const Result<T>& r) {
  return r.ok() ? "(ok)" : r.error().message;
}

TEST(RouteSyntax, KeySpecs) {
  KeySpec k = *parse_key_spec("ip");
  ASSERT_EQ(k.parts.size(), 1u);
  EXPECT_EQ(k.parts[0].kind, KeyPart::Kind::kIp);
  k = *parse_key_spec("Header:X-API-Key + ip");
  ASSERT_EQ(k.parts.size(), 2u);
  EXPECT_EQ(k.parts[0].kind, KeyPart::Kind::kHeader);
  EXPECT_EQ(k.parts[0].name, "x-api-key");
  EXPECT_EQ(k.parts[1].kind, KeyPart::Kind::kIp);
  EXPECT_EQ(k.text, "header:x-api-key+ip");
  k = *parse_key_spec("global");
  EXPECT_EQ(k.parts[0].kind, KeyPart::Kind::kGlobal);
  k = *parse_key_spec("cookie:Session+query:api_key");
  ASSERT_EQ(k.parts.size(), 2u);
  EXPECT_EQ(k.parts[0].kind, KeyPart::Kind::kCookie);
  EXPECT_EQ(k.parts[0].name, "Session");  // cookie names are case-sensitive
  EXPECT_EQ(k.parts[1].kind, KeyPart::Kind::kQuery);
  EXPECT_EQ(k.parts[1].name, "api_key");
  EXPECT_EQ(k.text, "cookie:Session+query:api_key");
  const std::string like =
      "must be ip, global, header:NAME, cookie:NAME, query:NAME, jwt:CLAIM or a combination like "
      "ip+header:x-api-key, got ";
  EXPECT_EQ(error_of(parse_key_spec("cookie:a;b")),
            like + "\"cookie:a;b\" (\"a;b\" is not a valid cookie name)");
  EXPECT_EQ(error_of(parse_key_spec("query:a=b")),
            like +
                "\"query:a=b\" (\"a=b\" is not a query parameter name: printable, without & "
                "= # % + or spaces)");
  EXPECT_EQ(error_of(parse_key_spec("ip+ip")), like + "\"ip+ip\" (ip is listed twice)");
  EXPECT_EQ(error_of(parse_key_spec("ip+")), like + "\"ip+\" (an empty part)");
  EXPECT_EQ(error_of(parse_key_spec("header:")),
            like + "\"header:\" (\"\" is not a valid header name)");
  EXPECT_EQ(error_of(parse_key_spec("global+ip")),
            like + "\"global+ip\" (global is one key for everyone and cannot be combined)");
  EXPECT_EQ(error_of(parse_key_spec("user")), like + "\"user\" (unknown part \"user\")");
}

TEST(RouteSyntax, RouteMatches) {
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

TEST(RouteSyntax, RouteMatchErrors) {
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

// Methods are case-sensitive: a request's must be a token without
// lower-case letters to be routed at all.
TEST(RouteSyntax, RequestMethodsAreUpperCaseTokens) {
  for (const std::string_view method : {"GET", "HEAD", "POST", "PROPFIND", "M-SEARCH", "X_1"}) {
    EXPECT_TRUE(is_request_method(method)) << method;
  }
  for (const std::string_view method : {"", "get", "post", "PoSt", "Get", "GET ", "G/T", "GÉT"}) {
    EXPECT_FALSE(is_request_method(method)) << method;
  }
}

TEST(RouteSyntax, PatternShapeIgnoresParameterNames) {
  EXPECT_EQ(pattern_shape("/users/{id}/posts/{post}", false), "/users/{}/posts/{}");
  EXPECT_EQ(pattern_shape("/Users/{ID}", true), "/users/{}");
}

}  // namespace
}  // namespace sluice::policy
