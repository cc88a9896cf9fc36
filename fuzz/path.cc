// Path normalisation and route matching (src/policy/path.h, policy.h).
//
// Input: "<route path>\n<request target>". Asserts, with case-sensitive and
// case-insensitive paths:
//   - normalising a normalised path changes nothing, and its escaped-separator
//     flag is a fixed point (normalisation never makes a path flagged that was
//     not, and never unflags a normalised one);
//   - a route loaded from "GET <route path>" matches the request path spelled
//     as its own pattern (each {param} filled in), so no route is dead;
//   - Policy::plan() of the request target reports the normalised path, the
//     flag as bad_path, the route match() picks for that path, and (case-
//     sensitive paths) forwards exactly the path it matched;
//   - all of it for each reading `paths:` allows (escaped slashes rejected,
//     decoded or kept; backslashes rejected or read as '/'; matrix
//     parameters stripped or kept).
#include <memory>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "policy/config.h"
#include "policy/path.h"
#include "policy/policy.h"
#include "policy/route_syntax.h"

namespace {

using namespace sluice;
using namespace sluice::policy;

void check_normalisation(std::string_view target, const PathReading& reading) {
  bool flagged = false;
  const std::string once = normalize_path(target, reading, &flagged);
  bool flagged_once = false;
  const std::string twice = normalize_path(once, reading, &flagged_once);
  bool flagged_twice = false;
  normalize_path(twice, reading, &flagged_twice);
  FUZZ_CHECK(!once.empty() && once.front() == '/', "normalised: \"%s\"", once.c_str());
  FUZZ_CHECK(once == twice, "\"%s\" normalises again to \"%s\"", once.c_str(), twice.c_str());
  FUZZ_CHECK(flagged || !flagged_once, "normalising flagged \"%s\" (from an unflagged target)",
             once.c_str());
  FUZZ_CHECK(flagged_once == flagged_twice, "flag of \"%s\" not stable", once.c_str());
  FUZZ_CHECK(once.size() <= 3 * target.size() + 1, "%zu bytes from %zu", once.size(),
             target.size());
}

// The pattern as a request path: every {param} filled with "x", a trailing
// "/*" dropped (it matches the prefix itself).
std::string path_of(std::string_view pattern) {
  if (pattern.ends_with("/*")) pattern.remove_suffix(2);
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '{') {
      const size_t close = pattern.find('}', i);
      out += "x";
      i = close;
      continue;
    }
    out += pattern[i];
  }
  return out.empty() ? "/" : out;
}

class NoHeaders final : public HeaderSource {
 public:
  std::optional<std::string_view> get(std::string_view) const override { return std::nullopt; }
  std::string get_all(std::string_view) const override { return {}; }
};

void check_route(std::string_view route_path, std::string_view target, bool ci) {
  Result<RouteMatch> match = parse_route_match("GET " + std::string(route_path));
  if (!match.ok()) return;
  Result<Limit> limit = Limit::token_bucket(5, 1, std::chrono::seconds(1));
  Config config;
  config.case_insensitive_paths = ci;
  Route route;
  route.name = match->name;
  route.method = match->method;
  route.pattern = match->pattern;
  route.limits.push_back(RouteLimit{route.name, false, *limit, {}});
  config.routes.push_back(route);
  const Policy policy(config);
  const Route* own = &policy.config().routes.front();

  const std::string own_path = normalize_path(path_of(match->pattern), ci);
  FUZZ_CHECK(policy.match("GET", own_path) == own,
             "route \"%s\" (pattern \"%s\") does not match its own path \"%s\"",
             match->name.c_str(), match->pattern.c_str(), own_path.c_str());

  const NoHeaders headers;
  RequestInfo info;
  info.method = "GET";
  info.target = target;
  info.headers = &headers;
  const Plan plan = policy.plan(info);
  bool flagged = false;
  const std::string normalised = normalize_path(target, ci, &flagged);
  FUZZ_CHECK(plan.normalized_path == normalised, "plan path \"%s\", normalised \"%s\"",
             plan.normalized_path.c_str(), normalised.c_str());
  const bool bad_path = plan.refusal == policy::Refusal::kBadPath;
  FUZZ_CHECK(bad_path == flagged, "bad_path %d, flag %d", bad_path, flagged);
  FUZZ_CHECK(plan.route == policy.match("GET", normalised), "plan and match disagree on \"%s\"",
             normalised.c_str());
  // paths.forward: normalized: the upstream gets the matched path (its case
  // as sent), unless the path is refused.
  // (An empty forward_target forwards the target as sent: its path must then
  // be the matched one already.)
  const std::string_view forwarded =
      plan.forward_target.empty() ? target : std::string_view(plan.forward_target);
  const std::string_view forwarded_path = forwarded.substr(0, forwarded.find_first_of("?#"));
  FUZZ_CHECK(ci || bad_path || forwarded_path == normalised, "forwarded \"%.*s\", matched \"%s\"",
             static_cast<int>(forwarded_path.size()), forwarded_path.data(), normalised.c_str());
}

// The default reading and the two others the `paths:` keys allow.
std::vector<PathReading> readings(bool ci) {
  PathReading standard;
  PathReading decoding;
  decoding.escaped_slashes = PathReading::EscapedSlashes::kDecode;
  decoding.backslash = PathReading::Backslash::kAsSlash;
  PathReading keeping;
  keeping.escaped_slashes = PathReading::EscapedSlashes::kKeep;
  keeping.strip_matrix_params = false;
  std::vector<PathReading> out = {standard, decoding, keeping};
  for (PathReading& r : out) r.case_insensitive = ci;
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view rest = sluice::fuzz::text_of(data, size);
  const std::string_view route_path = sluice::fuzz::split_first(rest, '\n');
  for (const bool ci : {false, true}) {
    for (const PathReading& reading : readings(ci)) {
      check_normalisation(route_path, reading);
      check_normalisation(rest, reading);
    }
    check_route(route_path, rest, ci);
  }
  return 0;
}
