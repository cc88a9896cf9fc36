#include "http/dashboard.h"

#include <boost/beast/http/field.hpp>

#include "http/web_assets.h"

namespace sluice::http {

namespace bhttp = boost::beast::http;

namespace {

constexpr std::string_view kPrefix = "/dashboard";

}  // namespace

bool is_dashboard_path(std::string_view path) {
  return path == kPrefix || (path.starts_with(kPrefix) && path[kPrefix.size()] == '/');
}

std::string_view web_content_type(std::string_view name) {
  if (name.ends_with(".html")) return "text/html; charset=utf-8";
  if (name.ends_with(".js")) return "text/javascript; charset=utf-8";
  if (name.ends_with(".css")) return "text/css; charset=utf-8";
  if (name.ends_with(".svg")) return "image/svg+xml";
  return "application/octet-stream";
}

std::optional<Response> dashboard_response(std::string_view path) {
  if (!is_dashboard_path(path)) return std::nullopt;
  std::string_view name = path.substr(kPrefix.size());
  if (name.starts_with('/')) name.remove_prefix(1);
  if (name.empty()) name = "index.html";
  if (name.find('/') != std::string_view::npos) return std::nullopt;
  for (const WebAsset& asset : web_assets()) {
    if (asset.name != name) continue;
    Response res{HttpStatus::ok, 11};
    res.set(bhttp::field::content_type, web_content_type(name));
    // The page shows live numbers: never serve a stale copy after an upgrade.
    res.set(bhttp::field::cache_control, "no-store");
    res.set("Content-Security-Policy", kDashboardCsp);
    res.set("X-Content-Type-Options", "nosniff");
    res.set("Referrer-Policy", "no-referrer");
    res.body() = std::string(asset.body);
    return res;
  }
  return std::nullopt;
}

}  // namespace sluice::http
