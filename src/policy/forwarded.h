// RFC 7239 `Forwarded`: its elements, read from the right as the client
// address walk of ip.h reads them (client_ip.header: forwarded), and the
// address of an element's `for=` node. Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string_view>

#include "policy/ip.h"

namespace sluice::policy {

// The position of the last ',' of a Forwarded value (several fields joined
// by ", ") that separates two elements: outside quoted strings, which may
// hold commas. Read from the right, so whatever a client wrote on the left
// (an unterminated quote included) cannot move where the elements proxies
// appended on its right begin. npos when there is none.
size_t last_forwarded_separator(std::string_view value);

// The address of one element's `for=` node ("for=192.0.2.60;proto=http",
// parameter names in any case, the value a token or a quoted string).
// Nothing when the element names no address to use: no `for=`, `for=`
// twice, `unknown`, an obfuscated identifier (`_hidden`), a node that does
// not parse, or a syntax error.
std::optional<IpAddress> forwarded_element_for(std::string_view element);

// A node as RFC 7239 §6 writes it: "192.0.2.1", "192.0.2.1:4711",
// "[2001:db8::1]", "[2001:db8::1]:4711", a port may be obfuscated ("_p1").
// Nothing for `unknown`, an obfuscated name, IPv6 outside brackets or a port
// that is not one.
std::optional<IpAddress> parse_forwarded_node(std::string_view node);

}  // namespace sluice::policy
