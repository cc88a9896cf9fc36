#include "http/admin_consumers.h"

#include <optional>
#include <string>

#include <spdlog/spdlog.h>
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

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

ConsumerChange put_change(const State& state, std::string_view raw_id, std::string_view body) {
  ConsumerChange c;
  Target t = target_of(state, raw_id);
  if (t.refused) {
    c.refused = std::move(t.refused);
    return c;
  }
  auto bad = [](std::string_view message) {
    return error_response(HttpStatus::bad_request, "BAD_REQUEST", message);
  };
  boost::system::error_code ec;
  const boost::json::value v = boost::json::parse(body, ec);
  if (ec) {
    c.refused = bad(cat({"malformed JSON body: ", ec.message()}));
    return c;
  }
  const boost::json::object* o = v.if_object();
  const boost::json::value* plan = o != nullptr ? o->if_contains("plan") : nullptr;
  if (plan == nullptr || o->size() != 1 || !(plan->is_string() || plan->is_null())) {
    c.refused = bad(R"(the body must be {"plan":"<plan name>"} (or {"plan":null} to remove))");
    return c;
  }
  if (plan->is_null()) return delete_change(state, raw_id);
  const std::string_view name(plan->get_string().data(), plan->get_string().size());
  if (state.policy.find_plan(name) == nullptr) {
    std::string names;
    for (const policy::ConsumerPlan& p : state.policy.config().plans) {
      names += cat({names.empty() ? "" : ", ", p.name});
    }
    c.refused = error_response(HttpStatus::bad_request, "UNKNOWN_PLAN",
                               cat({"no plan named \"", name, "\" (plans: ", names, ")"}));
    return c;
  }
  c.id = std::move(t.id);
  c.plan = std::string(name);
  return c;
}

ConsumerChange delete_change(const State& state, std::string_view raw_id) {
  ConsumerChange c;
  Target t = target_of(state, raw_id);
  if (t.refused) {
    c.refused = std::move(t.refused);
    return c;
  }
  if (!state.policy.consumers()->find(t.id)) {
    c.refused = error_response(HttpStatus::not_found, "UNKNOWN_CONSUMER",
                               cat({"no consumer \"", t.id, "\" (not in the consumers file)"}));
    return c;
  }
  c.id = std::move(t.id);
  return c;
}

Response finish_change(const State& state, const ConsumerChange& change, const std::string& error) {
  if (!error.empty()) {
    spdlog::error("admin: consumer {} not changed: {}", shown_id(state, change.id), error);
    return error_response(
        HttpStatus::internal_server_error, "WRITE_FAILED",
        cat({"the consumers file could not be written, nothing changed: ", error}));
  }
  // `state` is the one in force now: a reload while the file was written may
  // have read the file before the change.
  size_t index = 0;
  const bool known_plan = change.plan && state.policy.find_plan(*change.plan, &index) != nullptr;
  if (state.policy.consumers() != nullptr && (known_plan || !change.plan)) {
    state.policy.consumers()->set(
        change.id,
        known_plan ? std::optional<uint16_t>(static_cast<uint16_t>(index)) : std::nullopt);
  } else {
    spdlog::warn(
        "admin: consumer {} written to the consumers file, but the config reloaded since "
        "has no such plan or no consumers",
        shown_id(state, change.id));
  }
  spdlog::info("admin: consumer {} {}{}", shown_id(state, change.id),
               change.plan ? "is now on plan " : "removed", change.plan ? *change.plan : "");
  return consumer_body(change.id, change.plan ? &*change.plan : nullptr);
}

}  // namespace sluice::http
