#include "http/check_request.h"

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include "http/responses.h"

namespace sluice::http {

namespace {

// The body parsed into `v`, as an object; null with `error` set when it is
// not JSON or not an object (`example` shows what is expected).
const boost::json::object* json_object(std::string_view body, std::string_view example,
                                       boost::json::value& v, std::string& error) {
  boost::system::error_code ec;
  v = boost::json::parse(body, ec);
  if (ec) {
    error = cat({"malformed JSON body: ", ec.message()});
    return nullptr;
  }
  if (!v.is_object()) {
    error = cat({"the body must be a JSON object like ", example});
    return nullptr;
  }
  return &v.get_object();
}

}  // namespace

CheckRequest parse_check(std::string_view body) {
  CheckRequest r;
  boost::json::value v;
  const boost::json::object* object =
      json_object(body, R"({"policy":"login","key":"user:42","cost":1})", v, r.error);
  if (object == nullptr) return r;
  const boost::json::object& o = *object;
  for (const auto& member : o) {
    const std::string_view name(member.key().data(), member.key().size());
    if (name != "policy" && name != "key" && name != "cost" && name != "consumer") {
      r.error = cat({"unknown field \"", name, "\" (expected policy, key and cost, or consumer)"});
      return r;
    }
  }
  const boost::json::value* policy = o.if_contains("policy");
  const boost::json::value* consumer = o.if_contains("consumer");
  const boost::json::value* key = o.if_contains("key");
  auto non_empty_string = [](const boost::json::value* v) {
    return v != nullptr && v->is_string() && !v->get_string().empty();
  };
  if (consumer != nullptr) {
    if (policy != nullptr) {
      r.error = "give \"policy\" or \"consumer\", not both";
      return r;
    }
    if (!non_empty_string(consumer)) {
      r.error = "\"consumer\" must be a non-empty string";
      return r;
    }
    if (key != nullptr && !non_empty_string(key)) {
      r.error = "\"key\" must be a non-empty string";
      return r;
    }
    r.consumer = std::string(consumer->get_string().data(), consumer->get_string().size());
  } else {
    if (!non_empty_string(policy)) {
      r.error = "\"policy\" is required and must be a non-empty string";
      return r;
    }
    if (!non_empty_string(key)) {
      r.error = "\"key\" is required and must be a non-empty string";
      return r;
    }
    r.policy = std::string(policy->get_string().data(), policy->get_string().size());
  }
  if (key != nullptr) r.key = std::string(key->get_string().data(), key->get_string().size());
  if (const boost::json::value* cost = o.if_contains("cost")) {
    if (cost->is_uint64()) {
      r.cost = cost->get_uint64();
    } else if (cost->is_int64() && cost->get_int64() >= 0) {
      r.cost = static_cast<uint64_t>(cost->get_int64());
    } else {
      r.error = "\"cost\" must be a positive integer";
      return r;
    }
    if (r.cost == 0) {
      r.error = "\"cost\" must be at least 1";
      return r;
    }
  }
  return r;
}

ReleaseRequest parse_release(std::string_view body) {
  ReleaseRequest r;
  boost::json::value v;
  const boost::json::object* object =
      json_object(body, R"({"lease":"<id from /v1/check>"})", v, r.error);
  if (object == nullptr) return r;
  const boost::json::object& o = *object;
  for (const auto& member : o) {
    const std::string_view name(member.key().data(), member.key().size());
    if (name != "lease") {
      r.error = cat({"unknown field \"", name, "\" (expected lease)"});
      return r;
    }
  }
  const boost::json::value* lease = o.if_contains("lease");
  if (lease == nullptr || !lease->is_string() || lease->get_string().empty()) {
    r.error = "\"lease\" is required and must be a non-empty string";
    return r;
  }
  r.lease = std::string(lease->get_string().data(), lease->get_string().size());
  return r;
}

}  // namespace sluice::http
