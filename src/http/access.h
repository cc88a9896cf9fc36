// Who may ask: the checks that guard the decision API and the admin port.
//
//   bearer token    Authorization: Bearer <token>, compared in constant time
//   admin Host      DNS rebinding: a page on evil.example whose name now
//                   resolves to 127.0.0.1 reaches the admin port with
//                   "Host: evil.example"; only IP literals, localhost and
//                   the names in admin_hosts are answered
//   admin Origin    a browser's cross-site POST carries the page's Origin;
//                   the admin port takes POSTs only from itself
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string_view>

#include "policy/config.h"

namespace sluice::http {

// True when `a` and `b` are equal. The time taken depends on their lengths,
// never on where they differ.
bool constant_time_equals(std::string_view a, std::string_view b);

// True when `authorization` (the Authorization field's value) is
// "Bearer <token>" (the scheme in any case, one or more spaces) with exactly
// `token`.
bool bearer_token_matches(std::string_view authorization, std::string_view token);

// The host part of a Host field value: "example.com:9090" -> "example.com",
// "[::1]:9090" -> "::1". Lower-cased by the caller where it matters.
std::string_view host_of(std::string_view host_field);

// True when `host_field` is an IP address literal with or without a port:
// "192.0.2.1", "192.0.2.1:9090", "[2001:db8::1]", "[2001:db8::1]:9090".
bool is_ip_literal_host(std::string_view host_field);

// True when the admin port may answer a request whose Host field is
// `host_field`: it is an IP literal (a browser that addressed an IP sends it
// as such, so no DNS name was rebound: kubelet probes and port mappings send
// "Host: <IP>:<port>"), or its host part is `admin_host` (the configured
// address's host), `local_address` (the address the connection arrived on,
// as text), "localhost", or one of `access.hosts` (ASCII case ignored). A
// request with no Host field (HTTP/1.0) is answered: no browser sends one.
bool admin_host_allowed(std::optional<std::string_view> host_field, std::string_view admin_host,
                        std::string_view local_address, const policy::AdminAccess& access);

// True when `origin` (an Origin field's value) is this server's own origin
// as the client addressed it: "http://" + `host_field`, ASCII case ignored.
bool same_origin(std::string_view origin, std::string_view host_field);

}  // namespace sluice::http
