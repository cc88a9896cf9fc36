#include "http/access.h"

#include <algorithm>
#include <cstddef>

#include "policy/ip.h"
#include "util/ascii.h"

namespace sluice::http {

using util::iequals;

bool constant_time_equals(std::string_view a, std::string_view b) {
  // Every byte of the longer string is looked at whatever the content, so an
  // attacker timing answers learns the length at most.
  const size_t n = a.size() > b.size() ? a.size() : b.size();
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff = static_cast<unsigned char>(diff | (x ^ y));
  }
  return diff == 0;
}

bool bearer_token_matches(std::string_view authorization, std::string_view token) {
  constexpr std::string_view kScheme = "bearer";
  if (authorization.size() <= kScheme.size() ||
      !iequals(authorization.substr(0, kScheme.size()), kScheme) ||
      authorization[kScheme.size()] != ' ') {
    return false;
  }
  std::string_view credentials = authorization.substr(kScheme.size());
  while (!credentials.empty() && credentials.front() == ' ') credentials.remove_prefix(1);
  while (!credentials.empty() && credentials.back() == ' ') credentials.remove_suffix(1);
  return constant_time_equals(credentials, token);
}

std::string_view host_of(std::string_view host_field) {
  if (!host_field.empty() && host_field.front() == '[') {
    const size_t close = host_field.find(']');
    return close == std::string_view::npos ? host_field : host_field.substr(1, close - 1);
  }
  return host_field.substr(0, host_field.rfind(':'));
}

namespace {

// RFC 3986's port: digits, possibly none ("192.0.2.1:" is a valid Host).
bool is_port(std::string_view text) {
  return text.size() <= 5 &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

bool is_ip_literal_host(std::string_view host_field) {
  std::string_view address = host_field;
  std::string_view rest;
  if (!host_field.empty() && host_field.front() == '[') {
    const size_t close = host_field.find(']');
    if (close == std::string_view::npos) return false;
    address = host_field.substr(0, close + 1);  // parse_ip takes the brackets
    rest = host_field.substr(close + 1);
  } else if (const size_t colon = host_field.find(':'); colon != std::string_view::npos) {
    // Unbracketed, only IPv4 may precede a port: "::1" is no valid Host.
    address = host_field.substr(0, colon);
    rest = host_field.substr(colon);
  }
  if (!rest.empty() && (rest.front() != ':' || !is_port(rest.substr(1)))) return false;
  return policy::parse_ip(address).has_value();
}

bool admin_host_allowed(std::optional<std::string_view> host_field, std::string_view admin_host,
                        std::string_view local_address, const policy::AdminAccess& access) {
  if (!host_field || is_ip_literal_host(*host_field)) return true;
  const std::string_view host = host_of(*host_field);
  if (iequals(host, "localhost") || iequals(host, admin_host) || iequals(host, local_address)) {
    return true;
  }
  for (const std::string& name : access.hosts) {
    if (iequals(host, name)) return true;
  }
  return false;
}

bool same_origin(std::string_view origin, std::string_view host_field) {
  constexpr std::string_view kScheme = "http://";
  return origin.size() == kScheme.size() + host_field.size() &&
         iequals(origin.substr(0, kScheme.size()), kScheme) &&
         iequals(origin.substr(kScheme.size()), host_field);
}

}  // namespace sluice::http
