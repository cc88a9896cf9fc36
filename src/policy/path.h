// Path normalisation: every spelling of one resource maps to one string, so no
// variant can bypass a limit (DESIGN.md §5).
#pragma once

#include <string>
#include <string_view>

namespace sluice::policy {

// From a raw request target: drops the query string and fragment, decodes
// percent-encoded unreserved characters (ALPHA DIGIT - . _ ~), upper-cases the
// remaining percent escapes, merges repeated slashes, resolves "." and ".."
// segments (never above the root), drops a trailing slash (except for "/"),
// and lower-cases everything when `case_insensitive`. An absolute-form target
// (http://host/path) is reduced to its path. Always returns a path starting with '/'.
std::string normalize_path(std::string_view target, bool case_insensitive);

}  // namespace sluice::policy
