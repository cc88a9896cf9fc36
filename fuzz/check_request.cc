// The body of POST /v1/check (src/http/check_request.h), the parser the front
// door uses. Asserts: a body is either refused with a message or gives a
// non-empty policy and key, or a non-empty consumer (and maybe a key), and a
// cost >= 1; and an accepted request written back as JSON parses to the
// same request.
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include "fuzz_check.h"
#include "http/check_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using sluice::http::CheckRequest;
  const CheckRequest r = sluice::http::parse_check(sluice::fuzz::text_of(data, size));
  if (!r.error.empty()) return 0;
  const bool by_policy = !r.policy.empty() && !r.key.empty() && r.consumer.empty();
  const bool by_consumer = !r.consumer.empty() && r.policy.empty();
  FUZZ_CHECK((by_policy || by_consumer) && r.cost >= 1, "accepted an incomplete request");
  boost::json::object o;
  if (by_policy) o["policy"] = r.policy;
  if (by_consumer) o["consumer"] = r.consumer;
  if (!r.key.empty()) o["key"] = r.key;
  o["cost"] = r.cost;
  const std::string again = boost::json::serialize(o);
  const CheckRequest back = sluice::http::parse_check(again);
  FUZZ_CHECK(back.error.empty() && back.policy == r.policy && back.consumer == r.consumer &&
                 back.key == r.key && back.cost == r.cost,
             "%s reads back as policy \"%s\" consumer \"%s\" key \"%s\" cost %llu (%s)",
             again.c_str(), back.policy.c_str(), back.consumer.c_str(), back.key.c_str(),
             static_cast<unsigned long long>(back.cost), back.error.c_str());
  return 0;
}
