#include "http/admin.h"

#include <string_view>

#include <spdlog/spdlog.h>
#include <boost/asio/post.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include "http/access.h"
#include "http/admin_consumers.h"
#include "http/admin_history.h"
#include "http/dashboard.h"
#include "policy/policy.h"
#include "sluice/version.h"

namespace sluice::http {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;

namespace {

std::string_view sv(boost::beast::string_view s) {
  return {s.data(), s.size()};
}

Response text_response(HttpStatus status, std::string body,
                       const char* content_type = "text/plain") {
  Response res{status, 11};
  res.set(bhttp::field::content_type, content_type);
  res.body() = std::move(body);
  return res;
}

Response method_not_allowed(const char* allow) {
  Response res =
      error_response(HttpStatus::method_not_allowed, "METHOD_NOT_ALLOWED", cat({"use ", allow}));
  res.set(bhttp::field::allow, allow);
  return res;
}

std::string quoted_json(std::string_view s) {
  return cat({"\"", json_escape(s), "\""});
}

void append_route_stats(std::string& out, const RouteMetrics& m) {
  out +=
      cat({"{\"route\":", quoted_json(m.name), ",\"allowed\":", std::to_string(m.allowed->value()),
           ",\"denied\":", std::to_string(m.denied->value()),
           ",\"errors\":", std::to_string(m.error->value()), "}"});
}

std::string string_field(const boost::json::object& o, std::string_view name, bool* present) {
  const boost::json::value* v = o.if_contains(name);
  *present = v != nullptr && v->is_string() && !v->get_string().empty();
  return *present ? std::string(v->get_string().data(), v->get_string().size()) : std::string();
}

uint64_t counter_value(const observe::Counter* c) {
  return c == nullptr ? 0 : c->value();
}

std::optional<std::string_view> field(const RequestHeader& req, bhttp::field name) {
  const auto it = req.find(name);
  if (it == req.end()) return std::nullopt;
  return sv(it->value());
}

// application/json, with or without parameters ("; charset=utf-8").
bool is_json(std::string_view content_type) {
  const std::string_view media = content_type.substr(0, content_type.find(';'));
  size_t end = media.size();
  while (end > 0 && (media[end - 1] == ' ' || media[end - 1] == '\t')) --end;
  return boost::beast::iequals(media.substr(0, end), "application/json");
}

}  // namespace

AdminHandler::AdminHandler(ServerContext& context, ReloadFunction reload,
                           RlsConfigFunction rls_config, NotReadyFunction companion_not_ready)
    : context_(context),
      reload_(std::move(reload)),
      rls_config_(std::move(rls_config)),
      companion_not_ready_(std::move(companion_not_ready)),
      started_(std::chrono::steady_clock::now()) {}

void AdminHandler::note_reload(const ReloadOutcome& outcome) {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  last_reload_ =
      LastReload{outcome, std::chrono::duration_cast<std::chrono::milliseconds>(now).count()};
}

std::optional<Response> AdminHandler::refuse(const Session& session, std::string_view path) const {
  const RequestHeader& req = session.header();
  const policy::Config& config = context_.state.load()->policy.config();
  const policy::AdminAccess& access = config.admin_access;
  const std::optional<std::string_view> host = field(req, bhttp::field::host);
  if (!admin_host_allowed(host, config.admin.host, session.local_address(), access)) {
    return error_response(HttpStatus::misdirected_request, "MISDIRECTED_REQUEST",
                          cat({"this admin port answers IP addresses, localhost and the names in "
                               "admin_hosts, not ",
                               host.value_or("")}));
  }
  // POST, PUT and DELETE change things (reload, reset, consumers): guarded alike.
  const bool post = req.method() == bhttp::verb::post || req.method() == bhttp::verb::put ||
                    req.method() == bhttp::verb::delete_;
  const std::string_view method = sv(req.method_string());
  if (post && access.read_only) {
    return error_response(HttpStatus::forbidden, "FORBIDDEN",
                          cat({"this admin port is read-only (admin_read_only: true): a ", method,
                               " changes state and is not served"}));
  }
  if (post) {
    // A browser sends Origin with every cross-site POST: a web page must
    // never drive the admin port (reset, reload) from a user's machine.
    const std::optional<std::string_view> origin = field(req, bhttp::field::origin);
    if (origin && !same_origin(*origin, host.value_or(""))) {
      return error_response(HttpStatus::forbidden, "FORBIDDEN",
                            cat({"a ", method, " from origin ", *origin, " is not allowed"}));
    }
  }
  // The dashboard's files hold no data (the page asks /admin/stats with the
  // token), so a browser can load them before it has a token. A GET of
  // /admin/consumers tells whether an API key exists and its plan: always
  // guarded.
  const bool guarded =
      post || path.starts_with(kConsumersRoot) || (access.token_all && !is_dashboard_path(path));
  if (guarded && !access.token.empty()) {
    const std::optional<std::string_view> authorization = field(req, bhttp::field::authorization);
    if (!authorization || !bearer_token_matches(*authorization, access.token)) {
      Response res = error_response(HttpStatus::unauthorized, "UNAUTHORIZED",
                                    "this admin endpoint needs \"Authorization: Bearer <token>\" "
                                    "(admin_token_file)");
      res.set(bhttp::field::www_authenticate, "Bearer");
      return res;
    }
  }
  // Forms and text/plain are what a page can POST without asking (no CORS
  // preflight): a body must say it is JSON. A POST without a body (reload)
  // needs no Content-Type.
  if (post) {
    const std::optional<std::string_view> type = field(req, bhttp::field::content_type);
    if ((session.has_body() || type) && !(type && is_json(*type))) {
      return error_response(
          HttpStatus::unsupported_media_type, "UNSUPPORTED_MEDIA_TYPE",
          cat({"the body of an admin ", method, " must be Content-Type: application/json"}));
    }
  }
  return std::nullopt;
}

void AdminHandler::on_header(const std::shared_ptr<Session>& session) {
  const RequestHeader& req = session->header();
  std::string_view path = sv(req.target());
  path = path.substr(0, path.find('?'));
  if (std::optional<Response> refused = refuse(*session, path)) {
    return session->respond(std::move(*refused));
  }
  const bool get = req.method() == bhttp::verb::get || req.method() == bhttp::verb::head;
  const bool post = req.method() == bhttp::verb::post;

  if (path == "/healthz") {
    return session->respond(get ? text_response(HttpStatus::ok, "ok\n")
                                : method_not_allowed("GET"));
  }
  if (path == "/readyz") {
    if (!get) return session->respond(method_not_allowed("GET"));
    // Every reason, one a line.
    std::string why;
    if (!context_.store.ready()) why = "store unavailable\n";
    if (companion_not_ready_) {
      if (std::optional<std::string> companion = companion_not_ready_()) why += *companion + "\n";
    }
    return session->respond(why.empty()
                                ? text_response(HttpStatus::ok, "ready\n")
                                : text_response(HttpStatus::service_unavailable, std::move(why)));
  }
  if (path == "/metrics") {
    if (!get) return session->respond(method_not_allowed("GET"));
    return session->respond(text_response(HttpStatus::ok, context_.registry.render(),
                                          "text/plain; version=0.0.4; charset=utf-8"));
  }
  if (is_dashboard_path(path)) {
    if (!get) return session->respond(method_not_allowed("GET"));
    std::optional<Response> page = dashboard_response(path);
    if (page) return session->respond(std::move(*page));
    return session->respond(
        error_response(HttpStatus::not_found, "NOT_FOUND", cat({"no dashboard file ", path})));
  }
  if (path == "/admin/stats") {
    return session->respond(get ? stats() : method_not_allowed("GET"));
  }
  if (path == "/admin/history") {
    if (!get) return session->respond(method_not_allowed("GET"));
    const std::string_view target = sv(req.target());
    const size_t mark = target.find('?');
    const std::string_view query =
        mark == std::string_view::npos ? std::string_view() : target.substr(mark + 1);
    return session->respond(history_response(context_.history, context_.clock.now(), query));
  }
  if (path == "/admin/rls") {
    if (!get) return session->respond(method_not_allowed("GET"));
    std::optional<std::string> body = rls_config_ ? rls_config_() : std::nullopt;
    if (!body) {
      return session->respond(error_response(
          HttpStatus::not_found, "NOT_FOUND",
          "no Envoy RLS API is configured (`grpc` and `rls.config_dir` in the config)"));
    }
    return session->respond(json_response(HttpStatus::ok, std::move(*body)));
  }
  if (path == "/admin/reload") {
    if (!post) return session->respond(method_not_allowed("POST"));
    // The body (if any) is not used; read it so the connection stays usable.
    return session->read_body([this, session](std::string) { session->respond(reload()); });
  }
  if (path.starts_with(kConsumersPath))
    return consumers(session, path.substr(kConsumersPath.size()));
  if (path == "/admin/reset") {
    if (!post) return session->respond(method_not_allowed("POST"));
    return session->read_body([this, session](std::string body) { session->respond(reset(body)); });
  }
  session->respond(
      error_response(HttpStatus::not_found, "NOT_FOUND", cat({"no admin endpoint ", path})));
}

void AdminHandler::consumers(const std::shared_ptr<Session>& session, std::string_view raw_id) {
  const RequestHeader& req = session->header();
  // The State of this request: a reload meanwhile does not change its plans.
  std::shared_ptr<const State> state = context_.state.load();
  switch (req.method()) {
    case bhttp::verb::get:
    case bhttp::verb::head:
      return session->respond(get_consumer(*state, raw_id));
    case bhttp::verb::put:
      return session->read_body([this, session, state, id = std::string(raw_id)](std::string body) {
        change_consumer(session, *state, put_change(*state, id, body));
      });
    case bhttp::verb::delete_:
      return session->read_body([this, session, state, id = std::string(raw_id)](std::string) {
        change_consumer(session, *state, delete_change(*state, id));
      });
    default:
      return session->respond(method_not_allowed("GET, PUT, DELETE"));
  }
}

void AdminHandler::change_consumer(const std::shared_ptr<Session>& session, const State& state,
                                   ConsumerChange change) {
  if (change.refused) return session->respond(std::move(*change.refused));
  ConsumersWriter::Change write{state.policy.config().consumers->file, change.id, change.plan};
  // Written on the writer's thread; put in force and answered back on this
  // one (the session's), where reloads run.
  consumers_writer_.submit(
      std::move(write), [this, session, change = std::move(change)](const std::string& error) {
        asio::post(session->stream().get_executor(), [this, session, change, error] {
          session->respond(finish_change(*context_.state.load(), change, error));
        });
      });
}

Response AdminHandler::stats() const {
  const std::shared_ptr<const State> state = context_.state.load();
  const auto uptime =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started_);
  std::string out = cat(
      {"{\"generation\":", std::to_string(state->generation),
       ",\"uptime_seconds\":", std::to_string(uptime.count()), ",\"keys_held\":",
       std::to_string(context_.store.observed_size()), ",\"version\":", quoted_json(kVersion),
       ",\"store\":{\"backend\":", quoted_json(context_.store.backend()),
       ",\"ready\":", context_.store.ready() ? "true" : "false", "},\"reloads\":{\"succeeded\":",
       std::to_string(counter_value(context_.metrics.reload_success)), ",\"failed\":",
       std::to_string(counter_value(context_.metrics.reload_failure)), ",\"last\":"});
  if (!last_reload_) {
    out += "null";
  } else {
    const ReloadOutcome& r = last_reload_->outcome;
    out +=
        cat({"{\"ok\":", r.ok ? "true" : "false", ",\"generation\":", std::to_string(r.generation),
             ",\"unix_ms\":", std::to_string(last_reload_->unix_ms), ",\"errors\":["});
    // The first few errors say what is wrong; all of them are in the log.
    constexpr size_t kMaxErrors = 10;
    for (size_t i = 0; i < r.errors.size() && i < kMaxErrors; ++i) {
      if (i > 0) out += ',';
      out += quoted_json(r.errors[i]);
    }
    out += "]}";
  }
  out += "},\"routes\":[";
  bool first = true;
  auto add = [&](const RouteMetrics& m) {
    if (!first) out += ',';
    first = false;
    append_route_stats(out, m);
  };
  for (const RouteMetrics& m : state->routes) add(m);
  if (state->policy.config().default_route) add(state->default_route);
  out += "],\"policies\":[";
  first = true;
  for (const RouteMetrics& m : state->policies) add(m);
  out += "],\"top_denied_keys\":[";
  first = true;
  for (const observe::TopKeys::Entry& e : context_.top_denied.top()) {
    if (!first) out += ',';
    first = false;
    out += cat({"{\"key\":", quoted_json(e.key), ",\"count\":", std::to_string(e.count),
                ",\"error\":", std::to_string(e.error), "}"});
  }
  out +=
      cat({"],\"denials_logged\":", std::to_string(state->decision_log->gate.logged()),
           ",\"denials_not_logged\":", std::to_string(state->decision_log->gate.suppressed_total()),
           "}"});
  return json_response(HttpStatus::ok, std::move(out));
}

Response AdminHandler::reload() {
  const ReloadOutcome outcome = reload_();
  note_reload(outcome);
  if (outcome.ok) {
    return json_response(
        HttpStatus::ok,
        cat({"{\"reloaded\":true,\"generation\":", std::to_string(outcome.generation), "}"}));
  }
  std::string out = cat({"{\"error\":{\"code\":\"INVALID_CONFIG\",\"message\":",
                         quoted_json("the config was refused; the previous one stays in force"),
                         "},\"generation\":", std::to_string(outcome.generation), ",\"errors\":["});
  for (size_t i = 0; i < outcome.errors.size(); ++i) {
    if (i > 0) out += ',';
    out += quoted_json(outcome.errors[i]);
  }
  out += "]}";
  return json_response(HttpStatus::bad_request, std::move(out));
}

namespace {
constexpr std::string_view kResetShapes =
    R"({"policy":NAME,"key":KEY}, {"route":NAME,"client":KEY} or {"consumer":ID})";
}  // namespace

Response AdminHandler::reset(std::string_view body) {
  auto bad = [](std::string_view message) {
    return error_response(HttpStatus::bad_request, "BAD_REQUEST", message);
  };
  boost::system::error_code ec;
  const boost::json::value v = boost::json::parse(body, ec);
  if (ec) return bad(cat({"malformed JSON body: ", ec.message()}));
  if (!v.is_object()) {
    return bad(cat({"the body must be ", kResetShapes}));
  }
  const boost::json::object& o = v.get_object();
  const std::shared_ptr<const State> state = context_.state.load();
  bool has_policy = false, has_key = false, has_route = false, has_client = false;
  const std::string policy_name = string_field(o, "policy", &has_policy);
  const std::string key = string_field(o, "key", &has_key);
  const std::string route_name = string_field(o, "route", &has_route);
  const std::string client = string_field(o, "client", &has_client);
  bool has_consumer = false;
  const std::string consumer = string_field(o, "consumer", &has_consumer);

  // The (limit, store key) pairs to forget, and how the operator named them.
  std::vector<std::pair<const Limit*, std::string>> targets;
  std::string what;
  const int fields = int{has_policy} + has_key + has_route + has_client + has_consumer;
  if (has_policy && has_key && fields == 2) {
    const policy::NamedPolicy* named = state->policy.find_policy(policy_name);
    if (named == nullptr) {
      return error_response(HttpStatus::not_found, "UNKNOWN_POLICY",
                            cat({"no policy named \"", policy_name, "\""}));
    }
    targets.emplace_back(&named->limit, policy::Policy::policy_store_key(policy_name, key));
    what = cat({"policy \"", policy_name, "\" key \"", key, "\""});
  } else if (has_consumer && fields == 1) {
    // A known consumer's plan is keyed by the consumer; an unknown id has no
    // state of its own (its plan is keyed by the client address: reset it by
    // route and client).
    if (state->policy.consumers() == nullptr || !state->policy.consumers()->find(consumer)) {
      return error_response(
          HttpStatus::not_found, "UNKNOWN_CONSUMER",
          cat({"no consumer \"", consumer,
               "\" (an unknown id's plan is keyed by the client address: reset it with "
               "{\"route\":NAME,\"client\":ADDRESS})"}));
    }
    const policy::Plan plan = state->policy.plan_consumer(consumer, "");
    for (const policy::PlannedLimit& planned : plan.limits) {
      targets.emplace_back(&planned.limit->limit, planned.store_key);
    }
    what = cat({"consumer \"", consumer, "\""});
  } else if (has_route && has_client && fields == 2) {
    const policy::Config& config = state->policy.config();
    const policy::Route* route = nullptr;
    for (const policy::Route& r : config.routes) {
      if (r.name == route_name) route = &r;
    }
    if (route == nullptr && config.default_route && config.default_route->name == route_name) {
      route = &*config.default_route;
    }
    if (route == nullptr) {
      return error_response(HttpStatus::not_found, "UNKNOWN_ROUTE",
                            cat({"no route named \"", route_name, "\""}));
    }
    const std::optional<std::string> client_key = state->policy.client_key_of(*route, client);
    if (!client_key) {
      return bad(cat({"route \"", route_name, "\" is keyed by ", route->key.text,
                      ": give \"client\" as the key Sluice forms, like "
                      "\"ip:192.0.2.1+h:x-api-key=abc\""}));
    }
    const std::vector<std::string> keys = state->policy.store_keys(*route, *client_key);
    for (size_t i = 0; i < keys.size(); ++i) targets.emplace_back(&route->limits[i].limit, keys[i]);
    what = cat({"route \"", route_name, "\" client key \"", *client_key, "\""});
  } else {
    return bad(cat({"expected ", kResetShapes}));
  }

  bool existed = false;
  for (const auto& [limit, store_key] : targets) {
    Result<bool> r = context_.store.reset(*limit, store_key);
    if (!r.ok()) {
      spdlog::error("admin reset of \"{}\" failed: {}", store_key, r.error().message);
      return error_response(HttpStatus::service_unavailable, "STORE_UNAVAILABLE",
                            r.error().message);
    }
    existed = existed || r.value();
  }
  // Nothing forgotten is a typo or the wrong client: say what was looked for,
  // never a 200 that reset nothing.
  if (!existed) {
    std::string keys;
    for (const auto& [limit, store_key] : targets)
      keys += cat({keys.empty() ? "" : ", ", store_key});
    return error_response(
        HttpStatus::not_found, "NO_STATE",
        cat({"nothing to reset for ", what, " (store keys looked for: ", keys, ")"}));
  }
  spdlog::info("admin reset: {} ({} limit(s))", what, targets.size());
  return json_response(HttpStatus::ok, "{\"reset\":true,\"had_state\":true}");
}

}  // namespace sluice::http
