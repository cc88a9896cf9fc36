// Where a client key's `cookie:NAME` and `query:NAME` parts come from.
//
// A value that could be read two ways gives no key (the caller then keys by
// the client address, as for a missing value): a name present twice, since
// frameworks differ on which one wins and a client could otherwise pick a
// fresh key with every request; query values are percent-decoded (and '+'
// read as a space, as HTML forms encode it), so that "a%62c" and "abc" are
// one key.
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "policy/request.h"

namespace sluice::policy {

// `s` with its %XX escapes decoded, and '+' read as a space when
// `plus_is_space` (application/x-www-form-urlencoded, as HTML forms send
// queries); nullopt for a bad escape.
std::optional<std::string> percent_decode(std::string_view s, bool plus_is_space);

// The value of cookie `name` (case-sensitive) in the request's Cookie
// fields; nullopt when absent, empty or set twice. Quotes around a value
// are not part of it.
std::optional<std::string> cookie_value(const HeaderSource* headers, std::string_view name);

// The decoded value of query parameter `name` (compared decoded) in
// `target` ("/path?a=1&b=2"); nullopt when absent, empty, set twice or
// badly escaped.
std::optional<std::string> query_value(std::string_view target, std::string_view name);

}  // namespace sluice::policy
