#include "policy/key_sources.h"

#include <algorithm>

namespace sluice::policy {

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string_view trim_spaces(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::optional<std::string> percent_decode(std::string_view s, bool plus_is_space) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+' && plus_is_space) {
      out += ' ';
    } else if (s[i] == '%') {
      if (i + 2 >= s.size()) return std::nullopt;
      const int hi = hex_value(s[i + 1]);
      const int lo = hex_value(s[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::optional<std::string> cookie_value(const HeaderSource* headers, std::string_view name) {
  if (headers == nullptr) return std::nullopt;
  // Several Cookie fields arrive joined by ", "; a cookie value holds neither
  // ',' nor ';' (RFC 6265), so both separate pairs.
  const std::string all = headers->get_all("cookie");
  std::optional<std::string_view> found;
  size_t at = 0;
  while (at <= all.size()) {
    const size_t end = std::min(all.find_first_of(";,", at), all.size());
    const std::string_view pair = trim_spaces(std::string_view(all).substr(at, end - at));
    at = end + 1;
    const size_t equals = pair.find('=');
    if (equals == std::string_view::npos || trim_spaces(pair.substr(0, equals)) != name) continue;
    if (found) return std::nullopt;
    found = trim_spaces(pair.substr(equals + 1));
  }
  if (!found) return std::nullopt;
  std::string_view value = *found;
  if (value.size() >= 2 && value.front() == '"' && value.back() == '"')
    value = value.substr(1, value.size() - 2);
  if (value.empty()) return std::nullopt;
  return std::string(value);
}

std::optional<std::string> query_value(std::string_view target, std::string_view name) {
  const size_t question = target.find('?');
  if (question == std::string_view::npos) return std::nullopt;
  std::string_view query = target.substr(question + 1);
  query = query.substr(0, query.find('#'));
  std::optional<std::string> found;
  size_t at = 0;
  while (at <= query.size()) {
    const size_t end = std::min(query.find('&', at), query.size());
    const std::string_view pair = query.substr(at, end - at);
    at = end + 1;
    const size_t equals = pair.find('=');
    const std::optional<std::string> key = percent_decode(pair.substr(0, equals), true);
    if (!key || *key != name) continue;
    if (found) return std::nullopt;
    if (equals == std::string_view::npos) return std::nullopt;
    found = percent_decode(pair.substr(equals + 1), true);
    if (!found) return std::nullopt;
  }
  if (!found || found->empty()) return std::nullopt;
  return found;
}

}  // namespace sluice::policy
