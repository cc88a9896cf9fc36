#include "policy/route_syntax.h"

#include <algorithm>
#include <set>
#include <vector>

#include "config/values/values.h"
#include "util/ascii.h"

namespace sluice::policy {
namespace {

using config::quoted;
using config::to_lower;

Error bad(std::string message) {
  return Error{ErrorCode::kInvalidArgument, std::move(message)};
}

using util::hex_value;
using util::iequals;
using util::is_alpha;
using util::is_digit;
using util::is_unreserved;
using util::trim;
char lower(char c) {
  return util::to_lower(c);
}
char upper(char c) {
  return util::to_upper(c);
}

}  // namespace

bool is_http_token(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), util::is_tchar);
}

bool is_request_method(std::string_view text) {
  return is_http_token(text) &&
         std::none_of(text.begin(), text.end(), [](char c) { return c >= 'a' && c <= 'z'; });
}

Result<KeySpec> parse_key_spec(std::string_view text) {
  const std::string like =
      "must be ip, global, header:NAME, cookie:NAME, query:NAME, jwt:CLAIM or a combination like "
      "ip+header:x-api-key, got " +
      quoted(text);
  KeySpec spec;
  spec.parts.clear();
  spec.text.clear();
  std::set<std::string> seen;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('+', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view part = trim(text.substr(start, end - start));
    start = end + 1;
    KeyPart kp;
    std::string normal;
    if (part.empty()) return bad(like + " (an empty part)");
    if (iequals(part, "ip")) {
      kp.kind = KeyPart::Kind::kIp;
      normal = "ip";
    } else if (iequals(part, "global")) {
      kp.kind = KeyPart::Kind::kGlobal;
      normal = "global";
    } else if (part.size() >= 7 && iequals(part.substr(0, 7), "header:")) {
      const std::string_view name = trim(part.substr(7));
      if (!is_http_token(name))
        return bad(like + " (" + quoted(name) + " is not a valid header name)");
      kp.kind = KeyPart::Kind::kHeader;
      kp.name = to_lower(name);
      normal = "header:" + kp.name;
    } else if (part.size() >= 7 && iequals(part.substr(0, 7), "cookie:")) {
      const std::string_view name = trim(part.substr(7));
      if (!is_http_token(name))
        return bad(like + " (" + quoted(name) + " is not a valid cookie name)");
      kp.kind = KeyPart::Kind::kCookie;
      kp.name = std::string(name);
      normal = "cookie:" + kp.name;
    } else if (part.size() >= 6 && iequals(part.substr(0, 6), "query:")) {
      const std::string_view name = trim(part.substr(6));
      if (name.empty() || name.find_first_of("&=#%+ ") != std::string_view::npos ||
          !std::all_of(name.begin(), name.end(), [](char c) { return c > 0x20 && c < 0x7f; }))
        return bad(like + " (" + quoted(name) +
                   " is not a query parameter name: printable, without & = # % + or spaces)");
      kp.kind = KeyPart::Kind::kQuery;
      kp.name = std::string(name);
      normal = "query:" + kp.name;
    } else if (part.size() >= 4 && iequals(part.substr(0, 4), "jwt:")) {
      const std::string_view name = trim(part.substr(4));
      if (name.empty() || !std::all_of(name.begin(), name.end(), [](char c) {
            return c > 0x20 && c < 0x7f && c != '+' && c != '"' && c != '\\';
          }))
        return bad(like + " (" + quoted(name) +
                   " is not a claim name: printable, without + \" \\ or spaces)");
      kp.kind = KeyPart::Kind::kJwt;
      kp.name = std::string(name);
      normal = "jwt:" + kp.name;
    } else {
      return bad(like + " (unknown part " + quoted(part) + ")");
    }
    if (!seen.insert(normal).second) return bad(like + " (" + normal + " is listed twice)");
    if (!spec.text.empty()) spec.text += '+';
    spec.text += normal;
    spec.parts.push_back(std::move(kp));
  }
  if (seen.count("global") != 0 && spec.parts.size() > 1)
    return bad(like + " (global is one key for everyone and cannot be combined)");
  return spec;
}

Result<RouteMatch> parse_route_match(std::string_view text) {
  const std::string like =
      "must be \"METHOD /path\" like \"GET /api/users/{id}\" or \"* /static/*\", got " +
      quoted(text);
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
    const size_t start = i;
    while (i < text.size() && text[i] != ' ' && text[i] != '\t') ++i;
    if (i > start) words.push_back(text.substr(start, i - start));
  }
  if (words.size() == 1 && words[0].front() == '/')
    return bad(like + " (the method is missing; * matches every method)");
  if (words.size() != 2) return bad(like);
  const std::string_view method = words[0];
  const std::string_view path = words[1];
  RouteMatch match;
  if (method != "*" && !is_http_token(method))
    return bad(like + " (" + quoted(method) + " is not an HTTP method)");
  for (char c : method) match.method += upper(c);
  if (path.front() != '/') return bad(like + " (the path must start with '/')");
  if (path.find_first_of("?#") != std::string_view::npos)
    return bad(like + " (a query string or fragment is never matched; remove it)");

  std::string pattern;
  std::set<std::string, std::less<>> params;
  std::string_view body = path.substr(1);
  if (!body.empty() && body.back() == '/') body.remove_suffix(1);  // "/api/" == "/api"
  size_t start = 0;
  while (!body.empty() && start <= body.size()) {
    size_t end = body.find('/', start);
    if (end == std::string_view::npos) end = body.size();
    const std::string_view seg = body.substr(start, end - start);
    const bool last = end == body.size();
    start = end + 1;
    if (seg.empty()) return bad(like + " (an empty segment: \"//\")");
    if (seg == "." || seg == "..")
      return bad(like +
                 " (\".\" and \"..\" are resolved before matching, so no route can hold them)");
    std::string out;
    if (seg.find_first_of("{}") != std::string_view::npos) {
      if (seg.size() < 2 || seg.front() != '{' || seg.back() != '}' ||
          seg.substr(1, seg.size() - 2).find_first_of("{}") != std::string_view::npos)
        return bad(like + " ({param} must be a whole segment, like /users/{id})");
      const std::string_view name = seg.substr(1, seg.size() - 2);
      const bool ok = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
        return is_alpha(c) || is_digit(c) || c == '_';
      });
      if (!ok) return bad(like + " (a {param} name is letters, digits and '_')");
      if (!params.insert(std::string(name)).second)
        return bad(like + " ({" + std::string(name) + "} appears twice)");
      out = seg;
    } else if (seg.find('*') != std::string_view::npos) {
      if (seg != "*" || !last)
        return bad(like + " (* is allowed only as the whole last segment, like /static/*)");
      out = "*";
    } else {
      // The request path is normalised before matching: escapes of unreserved
      // characters are decoded and the others upper-cased. Do the same here.
      for (size_t k = 0; k < seg.size(); ++k) {
        if (seg[k] != '%') {
          out += seg[k];
          continue;
        }
        if (k + 2 >= seg.size() || hex_value(seg[k + 1]) < 0 || hex_value(seg[k + 2]) < 0)
          return bad(like + " (a '%' must start an escape like %2F)");
        const char decoded = static_cast<char>(hex_value(seg[k + 1]) * 16 + hex_value(seg[k + 2]));
        if (is_unreserved(decoded)) {
          out += decoded;
        } else {
          out += '%';
          out += upper(seg[k + 1]);
          out += upper(seg[k + 2]);
        }
        k += 2;
      }
    }
    pattern += '/';
    pattern += out;
  }
  match.pattern = pattern.empty() ? "/" : pattern;
  match.name = match.method + " " + std::string(path);
  return match;
}

std::string pattern_shape(std::string_view pattern, bool case_insensitive) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '{') {
      const size_t close = pattern.find('}', i);
      if (close != std::string_view::npos) {
        out += "{}";
        i = close;
        continue;
      }
    }
    out += case_insensitive ? lower(pattern[i]) : pattern[i];
  }
  return out;
}

}  // namespace sluice::policy
