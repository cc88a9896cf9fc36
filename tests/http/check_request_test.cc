// The body of POST /v1/check (src/http/check_request.h): a policy and a key,
// or a consumer; every refusal with its exact message.
#include "http/check_request.h"

#include <gtest/gtest.h>

namespace sluice::http {
namespace {

TEST(CheckRequest, PolicyAndKey) {
  const CheckRequest r = parse_check(R"({"policy":"login","key":"user:42","cost":3})");
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.policy, "login");
  EXPECT_EQ(r.key, "user:42");
  EXPECT_EQ(r.consumer, "");
  EXPECT_EQ(r.cost, 3u);
}

TEST(CheckRequest, ConsumerWithOrWithoutKey) {
  const CheckRequest r = parse_check(R"({"consumer":"key-a"})");
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.consumer, "key-a");
  EXPECT_EQ(r.policy, "");
  EXPECT_EQ(r.key, "");
  EXPECT_EQ(r.cost, 1u);
  const CheckRequest k = parse_check(R"({"consumer":"key-a","key":"ip:192.0.2.1","cost":2})");
  EXPECT_EQ(k.error, "");
  EXPECT_EQ(k.key, "ip:192.0.2.1");
  EXPECT_EQ(k.cost, 2u);
}

TEST(CheckRequest, Refusals) {
  EXPECT_EQ(parse_check(R"({"consumer":"a","policy":"login","key":"k"})").error,
            "give \"policy\" or \"consumer\", not both");
  EXPECT_EQ(parse_check(R"({"consumer":""})").error, "\"consumer\" must be a non-empty string");
  EXPECT_EQ(parse_check(R"({"consumer":7})").error, "\"consumer\" must be a non-empty string");
  EXPECT_EQ(parse_check(R"({"consumer":"a","key":""})").error,
            "\"key\" must be a non-empty string");
  EXPECT_EQ(parse_check(R"({"consumer":"a","cost":0})").error, "\"cost\" must be at least 1");
  EXPECT_EQ(parse_check(R"({"key":"k"})").error,
            "\"policy\" is required and must be a non-empty string");
  EXPECT_EQ(parse_check(R"({"policy":"p"})").error,
            "\"key\" is required and must be a non-empty string");
  EXPECT_EQ(parse_check(R"({"user":"a"})").error,
            "unknown field \"user\" (expected policy, key and cost, or consumer)");
}

}  // namespace
}  // namespace sluice::http
