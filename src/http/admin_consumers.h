// The admin port's /admin/consumers/<id> (docs/API.md): which plan a
// consumer is on, and changing it at runtime.
//
//   GET    /admin/consumers/<id>   200 {"consumer":id,"plan":"pro"}, 404 UNKNOWN_CONSUMER
//   PUT    /admin/consumers/<id>   {"plan":"pro"} puts the consumer on a plan
//                                  ({"plan":null} removes it, as DELETE); 400
//                                  UNKNOWN_PLAN names the plans there are
//   DELETE /admin/consumers/<id>   removes the consumer (then `unknown:` applies)
//
// <id> is percent-decoded. A change is written to the consumers file first
// (its line edited, the rest kept, written atomically: a restart or reload
// keeps it), then put in force for the next request. 404 NO_CONSUMERS when
// the config has no `consumers:`.
//
// Thread-safety: on the admin port's control thread (one change at a time).
#pragma once

#include <string_view>

#include "http/responses.h"
#include "http/state.h"

namespace sluice::http {

inline constexpr std::string_view kConsumersPath = "/admin/consumers/";
// Every path under it needs the admin token (admin_token_file), GET included.
inline constexpr std::string_view kConsumersRoot = "/admin/consumers";

// `raw_id` is the path after kConsumersPath, as sent.
Response get_consumer(const State& state, std::string_view raw_id);
Response put_consumer(const State& state, std::string_view raw_id, std::string_view body);
Response delete_consumer(const State& state, std::string_view raw_id);

}  // namespace sluice::http
