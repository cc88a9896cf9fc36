// The admin port's /admin/consumers/<id> (docs/API.md): which plan a
// consumer is on, and changing it at runtime.
//
//   GET    /admin/consumers/<id>   200 {"consumer":id,"plan":"pro"}, 404 UNKNOWN_CONSUMER
//   PUT    /admin/consumers/<id>   {"plan":"pro"} (Content-Type: application/json, else
//                                  415) puts the consumer on a plan
//                                  ({"plan":null} removes it, as DELETE); 400
//                                  UNKNOWN_PLAN names the plans there are
//   DELETE /admin/consumers/<id>   removes the consumer (then `unknown:` applies)
//
// <id> is percent-decoded. A change is written to the consumers file first
// (its line edited, the rest kept, written atomically: a restart or reload
// keeps it), then put in force for the next request. 404 NO_CONSUMERS when
// the config has no `consumers:`.
//
// Thread-safety: on the admin port's control thread (the file is written
// by a ConsumersWriter meanwhile).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "http/responses.h"
#include "http/state.h"

namespace sluice::http {

inline constexpr std::string_view kConsumersPath = "/admin/consumers/";
// Every path under it needs the admin token (admin_token_file), GET included.
inline constexpr std::string_view kConsumersRoot = "/admin/consumers";

// `raw_id` is the path after kConsumersPath, as sent.
Response get_consumer(const State& state, std::string_view raw_id);

// The change a PUT or DELETE asks for, checked against `state`, or the
// response that refuses it. The file is then written off the control thread
// (http/consumers_writer.h) and finish_change() answers.
struct ConsumerChange {
  std::string id;                   // percent-decoded
  std::optional<std::string> plan;  // the plan's name; nullopt: remove the consumer
  std::optional<Response> refused;
};
ConsumerChange put_change(const State& state, std::string_view raw_id, std::string_view body);
ConsumerChange delete_change(const State& state, std::string_view raw_id);

// Once the file holds `change` (error empty) or could not be written
// (`error` says why; nothing changes): puts the change in force in `state`,
// the State in force now, logs it, and returns the answer. On the control
// thread, as reloads, so a reload cannot come between.
Response finish_change(const State& state, const ConsumerChange& change, const std::string& error);

}  // namespace sluice::http
