#include "http/check_request.h"

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include "http/responses.h"

namespace sluice::http {

CheckRequest parse_check(std::string_view body) {
  CheckRequest r;
  boost::system::error_code ec;
  const boost::json::value v = boost::json::parse(body, ec);
  if (ec) {
    r.error = cat({"malformed JSON body: ", ec.message()});
    return r;
  }
  if (!v.is_object()) {
    r.error = R"(the body must be a JSON object like {"policy":"login","key":"user:42","cost":1})";
    return r;
  }
  const boost::json::object& o = v.get_object();
  for (const auto& member : o) {
    const std::string_view name(member.key().data(), member.key().size());
    if (name != "policy" && name != "key" && name != "cost") {
      r.error = cat({"unknown field \"", name, "\" (expected policy, key and cost)"});
      return r;
    }
  }
  const boost::json::value* policy = o.if_contains("policy");
  if (policy == nullptr || !policy->is_string() || policy->get_string().empty()) {
    r.error = "\"policy\" is required and must be a non-empty string";
    return r;
  }
  const boost::json::value* key = o.if_contains("key");
  if (key == nullptr || !key->is_string() || key->get_string().empty()) {
    r.error = "\"key\" is required and must be a non-empty string";
    return r;
  }
  r.policy = std::string(policy->get_string().data(), policy->get_string().size());
  r.key = std::string(key->get_string().data(), key->get_string().size());
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

}  // namespace sluice::http
