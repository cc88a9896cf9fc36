// Path normalisation: every spelling of one resource maps to one string, so no
// variant can bypass a limit (docs/DESIGN.md §5).
#pragma once

#include <string>
#include <string_view>

namespace sluice::policy {

// How a path is read where frameworks disagree (the `paths:` config keys).
struct PathReading {
  // "%2F" / "%5C" in a path: Flask, nginx and others decode "%2F" into a '/',
  // so "/a%2Fb" reaches the handler of "/a/b" while it matches no route as
  // written. kReject refuses the path, kDecode reads it as a separator (and
  // "%5C" as a backslash), kKeep keeps the escape as part of a segment.
  enum class EscapedSlashes { kReject, kDecode, kKeep };
  // A raw '' (and a decoded "%5C"): Node and Windows servers read it as '/'.
  enum class Backslash { kReject, kAsSlash };
  EscapedSlashes escaped_slashes = EscapedSlashes::kReject;
  Backslash backslash = Backslash::kReject;
  // ";name=value" in a segment: Spring/Tomcat route "/login;x=1" as "/login"
  // (and ".." followed by params as ".."); true reads them the same way.
  bool strip_matrix_params = true;
  bool case_insensitive = false;
  friend bool operator==(const PathReading&, const PathReading&) = default;
};

// From a raw request target: drops the query string and fragment, decodes
// percent-encoded unreserved characters (ALPHA DIGIT - . _ ~), upper-cases the
// remaining percent escapes, merges repeated slashes, resolves "." and ".."
// segments (never above the root), drops a trailing slash (except for "/"),
// applies `reading` (matrix parameters, escaped slashes, backslashes), and
// lower-cases ASCII letters when `reading.case_insensitive` (escapes keep
// their upper-case hex digits). Bytes that may not appear raw in a path
// (space, controls, non-ASCII, a stray '%') are written as escapes, so a raw
// byte and its escape normalise alike. An absolute-form target
// (http://host/path) is reduced to its path. Always returns a path starting
// with '/'. Never fails; the result is at most 3 bytes per input byte.
//
// `refused`, when given, is set when front doors must refuse the path (400
// BAD_PATH) rather than guess which reading the upstream makes: a separator
// `reading` rejects, a NUL byte ("%00"), or escaped bytes that are not UTF-8
// (overlong forms such as "%C0%AF", which some decoders read as '/').
std::string normalize_path(std::string_view target, const PathReading& reading,
                           bool* refused = nullptr);

// The path of a raw request target as sent: what comes before its query
// ('?') or fragment ('#'). Logs write this, never the query, which may hold
// credentials (?api_key=...).
constexpr std::string_view target_path(std::string_view target) {
  return target.substr(0, target.find_first_of("?#"));
}

// With the default reading (reject escaped and raw backslash separators,
// strip matrix parameters).
inline std::string normalize_path(std::string_view target, bool case_insensitive,
                                  bool* refused = nullptr) {
  PathReading reading;
  reading.case_insensitive = case_insensitive;
  return normalize_path(target, reading, refused);
}

}  // namespace sluice::policy
