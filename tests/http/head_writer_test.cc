// The responses Sluice writes as text (src/http/head_writer.h): exact bytes,
// and the same bytes Beast's serializer writes for the same message.
#include "http/head_writer.h"

#include <cstring>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>
#include <boost/beast/http/write.hpp>

#include "http/responses.h"
#include "render/rate_headers.h"

namespace sluice::http {
namespace {

namespace bhttp = boost::beast::http;
using namespace render;

// What the session writes for a Reply.
std::string written(const Reply& reply, unsigned version, bool keep_alive, bool head) {
  std::string out;
  append_status_line(version, static_cast<unsigned>(reply.status), {}, out);
  append_reply_fields(reply, out);
  append_framing(static_cast<unsigned>(reply.status), version, keep_alive, reply.body.size(), out);
  if (!head) out.append(reply.body);
  return out;
}

// What Beast's serializer writes for the same message, prepared as the
// session used to prepare it.
std::string serialized_by_beast(Response res, unsigned version, bool keep_alive, bool head) {
  res.version(version);
  res.keep_alive(keep_alive);
  res.prepare_payload();
  if (head) res.body().clear();
  std::ostringstream os;
  os << res;
  return os.str();
}

TEST(HeadWriter, RateLimitedReplyIsExactlyTheSeedsResponse) {
  RateHeaders headers;
  ASSERT_TRUE(headers.add(kXRateLimitLimit, "1"));
  ASSERT_TRUE(headers.add(kXRateLimitRemaining, "0"));
  ASSERT_TRUE(headers.add(kXRateLimitReset, "1764495600"));
  ASSERT_TRUE(headers.add(kRetryAfter, "3600"));
  Reply reply;
  reply.status = HttpStatus::too_many_requests;
  reply.content_type = kRateLimitedContentType;
  reply.rate_headers = &headers;
  reply.body = kRateLimitedBody;
  EXPECT_EQ(
      written(reply, 11, true, false),
      "HTTP/1.1 429 Too Many Requests\r\n"
      "Content-Type: application/json\r\n"
      "X-RateLimit-Limit: 1\r\n"
      "X-RateLimit-Remaining: 0\r\n"
      "X-RateLimit-Reset: 1764495600\r\n"
      "Retry-After: 3600\r\n"
      "Content-Length: 107\r\n"
      "\r\n"
      R"({"error":{"code":"RATE_LIMITED","message":"Too many requests. Please retry after the Retry-After period."}})");
}

TEST(HeadWriter, ConnectionFieldFollowsVersionAndKeepAlive) {
  Reply reply;
  reply.status = HttpStatus::no_content;
  // A 204 has no Content-Length (RFC 9110 §8.6).
  EXPECT_EQ(written(reply, 11, true, false), "HTTP/1.1 204 No Content\r\n\r\n");
  EXPECT_EQ(written(reply, 11, false, false),
            "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(written(reply, 10, true, false),
            "HTTP/1.0 204 No Content\r\nConnection: keep-alive\r\n\r\n");
  EXPECT_EQ(written(reply, 10, false, false), "HTTP/1.0 204 No Content\r\n\r\n");
}

TEST(HeadWriter, HeadRequestKeepsContentLengthWithoutBody) {
  Reply reply;
  reply.content_type = "application/json";
  reply.body = R"({"allowed":true})";
  EXPECT_EQ(written(reply, 11, true, true),
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 16\r\n\r\n");
}

TEST(HeadWriter, StatusLineUsesTheGivenReasonElseTheStandardOne) {
  std::string out;
  append_status_line(11, 502, {}, out);
  append_status_line(10, 200, "Fine", out);
  append_status_line(11, 299, {}, out);
  EXPECT_EQ(out,
            "HTTP/1.1 502 Bad Gateway\r\nHTTP/1.0 200 Fine\r\nHTTP/1.1 299 <unknown-status>\r\n");
}

// Every Reply the front doors send, in every framing, is what Beast wrote
// for the same message before the session wrote replies itself.
TEST(HeadWriter, RepliesMatchBeastsSerializerByteForByte) {
  RateHeaders legacy_and_draft;
  ASSERT_TRUE(legacy_and_draft.add(kXRateLimitLimit, "5"));
  ASSERT_TRUE(legacy_and_draft.add(kXRateLimitRemaining, "4"));
  ASSERT_TRUE(legacy_and_draft.add(kXRateLimitReset, "1764495601"));
  ASSERT_TRUE(legacy_and_draft.add(kRateLimitPolicy, R"("login";q=5;w=5, "burst";q=100;w=3600)"));
  ASSERT_TRUE(legacy_and_draft.add(kRateLimit, R"("login";r=4;t=1, "burst";r=99;t=36)"));
  RateHeaders denied;
  ASSERT_TRUE(denied.add(kRateLimitPolicy, R"("login";q=5;w=5)"));
  ASSERT_TRUE(denied.add(kRateLimit, R"("login";r=0;t=2)"));
  ASSERT_TRUE(denied.add(kRetryAfter, "2"));
  RateHeaders none;

  std::vector<Reply> replies;
  for (int status : {429, 403}) {  // the gateway's 429 and /v1/auth's auth_deny_status
    Reply r;
    r.status = static_cast<HttpStatus>(status);
    r.content_type = kRateLimitedContentType;
    r.rate_headers = &denied;
    r.body = kRateLimitedBody;
    replies.push_back(r);
  }
  {
    Reply r;  // /v1/auth allowed
    r.status = HttpStatus::no_content;
    r.rate_headers = &legacy_and_draft;
    replies.push_back(r);
  }
  {
    Reply r;  // /v1/check
    r.content_type = "application/json";
    r.rate_headers = &legacy_and_draft;
    r.body = R"({"allowed":true,"limit":5,"remaining":4,"reset_after_ms":1000,"retry_after_ms":0})";
    replies.push_back(r);
  }
  {
    Reply r;  // decision-only gateway, unlimited route
    r.content_type = "application/json";
    r.rate_headers = &none;
    r.body = R"({"allowed":true})";
    replies.push_back(r);
  }
  {
    Reply r;  // 405 on /v1/check
    r.status = HttpStatus::method_not_allowed;
    r.content_type = "application/json";
    r.extra_name = "Allow";
    r.extra_value = "POST";
    r.body = R"({"error":{"code":"METHOD_NOT_ALLOWED","message":"/v1/check takes POST"}})";
    replies.push_back(r);
  }
  for (const Reply& reply : replies) {
    for (unsigned version : {10u, 11u}) {
      for (bool keep_alive : {false, true}) {
        for (bool head : {false, true}) {
          std::string beast = serialized_by_beast(to_response(reply), version, keep_alive, head);
          if (reply.status == HttpStatus::no_content) {
            // The one difference: Beast 1.81 frames a 204 with "Content-Length: 0".
            const size_t at = beast.find("Content-Length: 0\r\n");
            ASSERT_NE(at, std::string::npos);
            beast.erase(at, std::strlen("Content-Length: 0\r\n"));
          }
          EXPECT_EQ(written(reply, version, keep_alive, head), beast)
              << static_cast<unsigned>(reply.status) << " HTTP " << version << " keep-alive "
              << keep_alive << " HEAD " << head;
        }
      }
    }
  }
}

TEST(HeadWriter, BeastResponsesAreWrittenAsBeastSerializesThem) {
  for (unsigned version : {10u, 11u}) {
    for (bool keep_alive : {false, true}) {
      for (bool head : {false, true}) {
        Response text{HttpStatus::ok, 11};
        text.set(bhttp::field::content_type, "text/plain; version=0.0.4");
        text.set("X-Content-Type-Options", "nosniff");
        text.body() = "sluice_up 1\n";
        Response empty{HttpStatus::no_content, 11};
        Response error = error_response(HttpStatus::not_found, "NOT_FOUND", "no such key");
        for (Response* res : {&text, &empty, &error}) {
          const std::string expected = serialized_by_beast(*res, version, keep_alive, head);
          std::string out;
          append_beast_response(*res, version, keep_alive, head, out);
          EXPECT_EQ(out, expected) << res->result_int() << " HTTP " << version << " keep-alive "
                                   << keep_alive << " HEAD " << head;
        }
      }
    }
  }
}

TEST(HeadWriter, ToResponseCarriesEveryPartOfTheReply) {
  RateHeaders headers;
  ASSERT_TRUE(headers.add(kRetryAfter, "7"));
  Reply reply;
  reply.status = HttpStatus::too_many_requests;
  reply.content_type = "application/json";
  reply.rate_headers = &headers;
  reply.extra_name = "X-Extra";
  reply.extra_value = "yes";
  reply.body = "{}";
  const Response res = to_response(reply);
  EXPECT_EQ(res.result_int(), 429u);
  EXPECT_EQ(res[bhttp::field::content_type], "application/json");
  EXPECT_EQ(res["Retry-After"], "7");
  EXPECT_EQ(res["X-Extra"], "yes");
  EXPECT_EQ(res.body(), "{}");
}

}  // namespace
}  // namespace sluice::http
