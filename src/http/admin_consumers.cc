#include "http/admin_consumers.h"

#include <optional>
#include <string>

#include <spdlog/spdlog.h>
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include "config/files.h"
#include "policy/consumers_file.h"
#include "policy/key_sources.h"
#include "policy/redact.h"

namespace sluice::http {
namespace {

std::string quoted_json(std::string_view s) {
  return cat({"\"", json_escape(s), "\""});
}

Response consumer_body(std::string_view id, const std::string* plan) {
  return json_response(HttpStatus::ok, cat({"{\"consumer\":", quoted_json(id), ",\"plan\":",
                                            plan != nullptr ? quoted_json(*plan) : "null", "}"}));
}

// The consumer id of a request, or the response that refuses it.
struct Target {
  std::string id;
  std::optional<Response> refused;
};

Target target_of(const State& state, std::string_view raw_id) {
  Target t;
  if (state.policy.consumers() == nullptr) {
    t.refused = error_response(HttpStatus::not_found, "NO_CONSUMERS",
                               "the config has no `consumers:` (plans per consumer)");
    return t;
  }
  std::optional<std::string> id = policy::percent_decode(raw_id, false);
  if (!id || !policy::valid_consumer_id(*id)) {
    t.refused = error_response(
        HttpStatus::bad_request, "BAD_REQUEST",
        "a consumer id is 1 to 1024 bytes without whitespace or control bytes (percent-encode "
        "the others in the path)");
    return t;
  }
  t.id = std::move(*id);
  return t;
}

// How an operator reads a consumer id in the log: hashed unless
// logging.redact_keys is off (ids are API keys, often secret).
std::string shown_id(const State& state, std::string_view id) {
  if (!state.policy.config().logging.redact_keys) return std::string(id);
  return policy::redact_key(cat({"h:consumer=", id}));
}

// Writes the change to the consumers file, then puts it in force.
Response change(const State& state, const std::string& id, std::optional<size_t> plan) {
  const policy::ConsumersConfig& consumers = *state.policy.config().consumers;
  const std::string* plan_name = plan ? &state.policy.config().plans[*plan].name : nullptr;
  std::string error;
  const std::optional<std::string> text =
      config::read_small_file(consumers.file, "the consumers file " + consumers.file,
                              policy::kMaxConsumersFileBytes, &error);
  if (text) {
    const std::string edited = policy::with_consumer(
        *text, id, plan_name ? std::optional<std::string_view>(*plan_name) : std::nullopt);
    if (config::write_file_atomically(consumers.file, edited, &error)) error.clear();
  }
  if (!error.empty()) {
    spdlog::error("admin: consumer {} not changed: {}", shown_id(state, id), error);
    return error_response(
        HttpStatus::internal_server_error, "WRITE_FAILED",
        cat({"the consumers file could not be written, nothing changed: ", error}));
  }
  state.policy.consumers()->set(
      id, plan ? std::optional<uint16_t>(static_cast<uint16_t>(*plan)) : std::nullopt);
  spdlog::info("admin: consumer {} {}{}", shown_id(state, id),
               plan_name ? "is now on plan " : "removed", plan_name ? *plan_name : "");
  return consumer_body(id, plan_name);
}

}  // namespace

Response get_consumer(const State& state, std::string_view raw_id) {
  Target t = target_of(state, raw_id);
  if (t.refused) return std::move(*t.refused);
  const std::optional<uint16_t> plan = state.policy.consumers()->find(t.id);
  if (!plan) {
    return error_response(HttpStatus::not_found, "UNKNOWN_CONSUMER",
                          cat({"no consumer \"", t.id, "\" (not in the consumers file)"}));
  }
  return consumer_body(t.id, &state.policy.config().plans[*plan].name);
}

Response put_consumer(const State& state, std::string_view raw_id, std::string_view body) {
  Target t = target_of(state, raw_id);
  if (t.refused) return std::move(*t.refused);
  auto bad = [](std::string_view message) {
    return error_response(HttpStatus::bad_request, "BAD_REQUEST", message);
  };
  boost::system::error_code ec;
  const boost::json::value v = boost::json::parse(body, ec);
  if (ec) return bad(cat({"malformed JSON body: ", ec.message()}));
  const boost::json::object* o = v.if_object();
  const boost::json::value* plan = o != nullptr ? o->if_contains("plan") : nullptr;
  if (plan == nullptr || o->size() != 1 || !(plan->is_string() || plan->is_null())) {
    return bad(R"(the body must be {"plan":"<plan name>"} (or {"plan":null} to remove))");
  }
  if (plan->is_null()) return delete_consumer(state, raw_id);
  const std::string_view name(plan->get_string().data(), plan->get_string().size());
  size_t index = 0;
  if (state.policy.find_plan(name, &index) == nullptr) {
    std::string names;
    for (const policy::ConsumerPlan& p : state.policy.config().plans) {
      names += cat({names.empty() ? "" : ", ", p.name});
    }
    return error_response(HttpStatus::bad_request, "UNKNOWN_PLAN",
                          cat({"no plan named \"", name, "\" (plans: ", names, ")"}));
  }
  return change(state, t.id, index);
}

Response delete_consumer(const State& state, std::string_view raw_id) {
  Target t = target_of(state, raw_id);
  if (t.refused) return std::move(*t.refused);
  if (!state.policy.consumers()->find(t.id)) {
    return error_response(HttpStatus::not_found, "UNKNOWN_CONSUMER",
                          cat({"no consumer \"", t.id, "\" (not in the consumers file)"}));
  }
  return change(state, t.id, std::nullopt);
}

}  // namespace sluice::http
