// GET /admin/history?seconds=N: the decisions of every route in each of the
// last N whole seconds (observe/decision_history.h), for the dashboard to
// draw when it opens and for anyone looking back at an incident.
//
//   seconds  1..900, default 900 (all the server keeps); anything else, or
//            another query parameter, is a 400 BAD_REQUEST
//
// 200 {"seconds":N,"end":E,"routes":{"ROUTE":{"allowed":[N ints],
//      "denied":[...],"error":[...]}}}
// E is the Unix second now, which is not over yet: the arrays hold seconds
// E-N ... E-1, oldest first, and the decisions of second E show from E+1 on.
// ROUTE is the `route` label of sluice_requests_total (routes, the default
// route, "none", "policy:NAME", "plan:NAME", "rls"), in name order.
//
// Thread-safety: a pure function of the history, which may be recorded in
// meanwhile.
#pragma once

#include <string_view>

#include "http/responses.h"
#include "observe/decision_history.h"
#include "sluice/clock.h"

namespace sluice::http {

inline constexpr size_t kHistoryDefaultSeconds = observe::RouteHistory::kSeconds;

// The answer to GET /admin/history with `query` (the target after '?', or
// empty) at `now`.
Response history_response(const observe::DecisionHistory& history, Nanos now,
                          std::string_view query);

}  // namespace sluice::http
