// Path normalisation: every spelling of one resource maps to one string, so no
// variant can bypass a limit (docs/DESIGN.md §5).
#pragma once

#include <string>
#include <string_view>

namespace sluice::policy {

// From a raw request target: drops the query string and fragment, decodes
// percent-encoded unreserved characters (ALPHA DIGIT - . _ ~), upper-cases the
// remaining percent escapes, merges repeated slashes, resolves "." and ".."
// segments (never above the root), drops a trailing slash (except for "/"),
// and lower-cases ASCII letters when `case_insensitive` (escapes keep their
// upper-case hex digits). Bytes that may not appear raw in a path (space,
// controls, NUL, non-ASCII, a stray '%') are written as escapes, so a raw byte
// and its escape normalise alike. An absolute-form target (http://host/path)
// is reduced to its path. Always returns a path starting with '/'.
// Never fails; the result is at most 3 bytes per input byte.
//
// `escaped_separator`, when given, is set when the path holds a separator
// that frameworks read differently: "%2F" / "%2f" (Flask, nginx and others
// decode it into a '/', so "/a%2Fb" reaches the handler of "/a/b" while it
// matches no route here), "%5C" / "%5c" or a raw '\' (Node and Windows
// servers read a backslash as '/'). Front doors refuse such paths (400
// BAD_PATH) rather than guess which reading the upstream makes.
std::string normalize_path(std::string_view target, bool case_insensitive,
                           bool* escaped_separator = nullptr);

}  // namespace sluice::policy
