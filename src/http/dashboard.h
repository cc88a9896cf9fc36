// The dashboard route of the admin port (docs/DESIGN.md §6): the files of web/,
// embedded at build time, served under /dashboard. The page loads
// /admin/history when it opens and polls /admin/stats and /admin/history once
// a second; it needs nothing else from the server.
//
//   GET /dashboard, /dashboard/   web/index.html
//   GET /dashboard/NAME           web/NAME (NAME has no '/')
//
// Every file is sent with its Content-Type, Cache-Control: no-store and a
// Content-Security-Policy that allows the admin origin only ('self'): the
// page loads no script, style, font or image from anywhere else and may not
// be framed by another site.
//
// Thread-safety: pure functions over immutable data.
#pragma once

#include <optional>
#include <string_view>

#include "http/responses.h"

namespace sluice::http {

inline constexpr std::string_view kDashboardCsp =
    "default-src 'self'; base-uri 'self'; form-action 'self'; frame-ancestors 'self'";

// True when `path` (no query string) is /dashboard or below it.
bool is_dashboard_path(std::string_view path);

// The file at `path`, or nullopt when there is none (the caller answers 404).
std::optional<Response> dashboard_response(std::string_view path);

// The Content-Type of a web/ file, by its extension.
std::string_view web_content_type(std::string_view name);

}  // namespace sluice::http
