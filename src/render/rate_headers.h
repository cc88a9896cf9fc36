// The rate-limit response headers of docs/DESIGN.md §6 and the 429 body.
//
//   RateHeaders headers;                       // reusable; clear() between requests
//   append_rate_headers(verdict, config.headers, now, headers);
//   for (const RateHeaders::Field& f : headers) response.set(f.name, f.value);
//
// What is written, for a limited verdict (Verdict::limited):
// - legacy (HeaderModes::legacy), from the most restrictive decision:
//     X-RateLimit-Limit: <limit>
//     X-RateLimit-Remaining: <remaining>
//     X-RateLimit-Reset: <Unix epoch second, rounded up, of now + reset_after>
// - draft (HeaderModes::draft, draft-ietf-httpapi-ratelimit-headers-10), one
//   list item per limit of the route, named by RouteLimit::name as an sf-string,
//   items separated by ", " (RFC 9651 list serialisation):
//     RateLimit-Policy: "<name>";q=<limit size>;w=<Limit::period() in s, rounded up>
//     RateLimit: "<name>";r=<remaining>;t=<seconds until more quota>
//   t, rounded up: for a limit that denied, its retry_after (>= 1); for a limit
//   that allowed, the time until at least one more unit is available — exact
//   for token_bucket and gcra (computed from reset_after and the refill rate)
//   and for fixed_window (the window's end); for sliding_log and
//   sliding_window the Decision does not say when the oldest use expires, so t
//   is reset_after (full restoration), an upper bound. 0 when the limit is full.
//   t is never too short: waiting t seconds always brings the promised quota.
//   A concurrency limit is an item of the draft's quota unit
//   "concurrent-requests", which has no window:
//     RateLimit-Policy: "<name>";q=<max>;qu="concurrent-requests"
//     RateLimit: "<name>";r=<slots free>          (allowed)
//     RateLimit: "<name>";r=0;t=1                 (denied: t is its retry_after)
//   No store knows when a slot comes back, so t is written only on a denial.
// - Retry-After: <retry_after in s, rounded up, at least 1> on every denial,
//   whatever the modes (it is plain HTTP, RFC 9110, and a 429 needs it).
// Nothing is written for an unlimited verdict or an invalid request; for a
// store failure only Retry-After: 1 when on_failure denied (the store could
// not say what is left, so no quota is claimed).
// Field order: X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset,
// RateLimit-Policy, RateLimit, Retry-After.
//
// Durations are rounded up so a client that waits exactly Retry-After (or t)
// and retries is allowed.
//
// Thread-safety: append_rate_headers is a pure function; a RateHeaders object
// is used by one thread at a time.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "policy/config.h"
#include "policy/decider.h"
#include "sluice/clock.h"

namespace sluice::render {

// The seed's 429 body, byte for byte, and its content type.
inline constexpr std::string_view kRateLimitedBody =
    R"({"error":{"code":"RATE_LIMITED","message":"Too many requests. Please retry after the Retry-After period."}})";
inline constexpr std::string_view kRateLimitedContentType = "application/json";

// The default 429 body of a denial by `limit` (the limit that fired, its
// RouteLimit::name): kRateLimitedBody with "limit":"NAME" after the message.
// kRateLimitedBody itself when `limit` is empty.
std::string rate_limited_body(std::string_view limit);

inline constexpr std::string_view kXRateLimitLimit = "X-RateLimit-Limit";
inline constexpr std::string_view kXRateLimitRemaining = "X-RateLimit-Remaining";
inline constexpr std::string_view kXRateLimitReset = "X-RateLimit-Reset";
inline constexpr std::string_view kRateLimitPolicy = "RateLimit-Policy";
inline constexpr std::string_view kRateLimit = "RateLimit";
inline constexpr std::string_view kRetryAfter = "Retry-After";
// envoyproxy/ratelimit's LIMIT_RESPONSE_HEADERS_ENABLED fields (the RLS API's
// response_headers: ratelimit).
inline constexpr std::string_view kEnvoyRateLimitLimit = "RateLimit-Limit";
inline constexpr std::string_view kEnvoyRateLimitRemaining = "RateLimit-Remaining";
inline constexpr std::string_view kEnvoyRateLimitReset = "RateLimit-Reset";

// A small list of header fields. Values live in an inline buffer; only values
// that do not fit (long draft lists: many limits with long names) go to the
// heap. Field views stay valid until clear() or destruction; not copyable.
class RateHeaders {
 public:
  static constexpr size_t kMaxFields = 6;
  static constexpr size_t kInlineBytes = 512;

  struct Field {
    std::string_view name;
    std::string_view value;
  };

  RateHeaders() = default;
  RateHeaders(const RateHeaders&) = delete;
  RateHeaders& operator=(const RateHeaders&) = delete;

  size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  const Field* begin() const { return fields_.data(); }
  const Field* end() const { return fields_.data() + count_; }
  const Field& operator[](size_t i) const { return fields_[i]; }
  // The value of the field named exactly `name`, if present.
  std::optional<std::string_view> find(std::string_view name) const;
  void clear();

  // Appends a field. `name` must outlive this object (use the constants
  // above); `value` is copied. Returns false (and adds nothing) when full.
  bool add(std::string_view name, std::string_view value);

  // For writers: space for a value of at most `max_bytes`, then commit the
  // bytes actually written. Returns nullptr when full.
  char* begin_value(size_t max_bytes);
  void commit_value(std::string_view name, size_t used_bytes);

 private:
  std::array<Field, kMaxFields> fields_{};
  size_t count_ = 0;
  size_t inline_used_ = 0;
  char* pending_ = nullptr;
  std::string* pending_spill_ = nullptr;
  // Reserved to kMaxFields before the first use, so its strings never move.
  std::vector<std::string> spill_;
  size_t spill_used_ = 0;
  char inline_[kInlineBytes];
};

// Appends the headers for `verdict` (see the top of this file) to `out`.
// `now` is the time the verdict was decided at (nanoseconds since the epoch).
void append_rate_headers(const policy::Verdict& verdict, const policy::HeaderModes& modes,
                         Nanos now, RateHeaders& out);

// One item of the draft fields: a limit's name (an sf-string once written),
// quota q, window w (seconds), remaining r and t (seconds), as above.
struct DraftItem {
  std::string_view name;
  uint64_t quota = 0;
  int64_t window_s = 0;
  uint64_t remaining = 0;
  int64_t until_s = 0;
  // A concurrency limit: qu="concurrent-requests", no w, t only when denied.
  bool concurrent = false;
  bool denied = false;
};

// The draft item of one limit's decision, as every front door writes it
// (HTTP per limit of the route, the RLS API per descriptor).
DraftItem draft_item(std::string_view name, const Limit& limit, const Decision& decision);

// RateLimit-Policy and RateLimit with one list item per entry of `items`.
void append_draft_fields(std::span<const DraftItem> items, RateHeaders& out);

// RateLimit-Limit (decision.limit), RateLimit-Remaining and RateLimit-Reset
// (seconds, rounded up, until full when allowed, until retry when denied):
// envoyproxy/ratelimit's three fields for the most restrictive descriptor.
void append_envoy_fields(const Decision& decision, RateHeaders& out);

// Helpers, exposed for tests and other front doors.
// ceil(d / 1 s), 0 for d <= 0.
int64_t seconds_rounded_up(Nanos d);
// The draft's t for one limit's decision (see above), in nanoseconds.
Nanos until_more_quota(const Limit& limit, const Decision& decision);

}  // namespace sluice::render
