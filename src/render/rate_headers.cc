#include "render/rate_headers.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cstring>
#include <vector>

#include "util/json_escape.h"

namespace sluice::render {
namespace {

constexpr int64_t kNanosPerSecond = 1'000'000'000;
constexpr size_t kMaxUintDigits = 20;

// Writes into space obtained from RateHeaders::begin_value(); the caller sizes
// that space from an upper bound, so no check per byte is needed.
class Writer {
 public:
  explicit Writer(char* begin) : begin_(begin), p_(begin) {}
  void put(std::string_view s) {
    std::memcpy(p_, s.data(), s.size());
    p_ += s.size();
  }
  void put(char c) { *p_++ = c; }
  void put_uint(uint64_t v) { p_ = std::to_chars(p_, p_ + kMaxUintDigits, v).ptr; }
  void put_int(int64_t v) { put_uint(v < 0 ? 0 : static_cast<uint64_t>(v)); }
  // An sf-string (RFC 9651 3.3.3): '"' and '\' are escaped; bytes outside
  // printable ASCII cannot appear in one and are written as '?'.
  void put_sf_string(std::string_view s) {
    put('"');
    for (char ch : s) {
      const unsigned char c = static_cast<unsigned char>(ch);
      if (c == '"' || c == '\\') {
        put('\\');
        put(ch);
      } else if (c < 0x20 || c > 0x7e) {
        put('?');
      } else {
        put(ch);
      }
    }
    put('"');
  }
  size_t used() const { return static_cast<size_t>(p_ - begin_); }

 private:
  char* begin_;
  char* p_;
};

void add_uint(RateHeaders& out, std::string_view name, uint64_t value) {
  char* space = out.begin_value(kMaxUintDigits);
  if (space == nullptr) return;
  Writer w(space);
  w.put_uint(value);
  out.commit_value(name, w.used());
}

bool is_bucket(Algorithm a) {
  return a == Algorithm::kTokenBucket || a == Algorithm::kGcra;
}

constexpr std::string_view kConcurrentUnit = ";qu=\"concurrent-requests\"";

// Upper bound of one draft list item: quotes, an escaped name (2 bytes per
// byte at worst), two parameters with 20-digit values or the quota unit, and
// the ", " separator.
size_t item_bound(std::string_view name) {
  return 2 + 2 * name.size() + 2 * (3 + kMaxUintDigits) + kConcurrentUnit.size() + 2;
}

}  // namespace

int64_t seconds_rounded_up(Nanos d) {
  const int64_t ns = d.count();
  if (ns <= 0) return 0;
  return ns / kNanosPerSecond + (ns % kNanosPerSecond != 0 ? 1 : 0);
}

Nanos until_more_quota(const Limit& limit, const Decision& decision) {
  if (!decision.allowed) return decision.retry_after;
  if (decision.remaining >= decision.limit) return Nanos{0};  // full: nothing more to come
  if (!is_bucket(limit.algorithm())) return decision.reset_after;
  // The bucket holds L units with remaining = floor(L / unit) and reset_after
  // = ceil((full - L) / rate). One more token needs (remaining + 1) * unit
  // units, i.e. (full - L) - k more with k = (size - remaining - 1) * unit, so
  // the wait is at most reset_after - floor(k / rate): never too short, and
  // longer than exact by under 1 ns. k <= full < 2^62: no overflow.
  const int64_t missing = static_cast<int64_t>(decision.limit - decision.remaining - 1);
  const int64_t k = missing * limit.token_units();
  const int64_t wait = decision.reset_after.count() - k / limit.units_per_ns();
  return Nanos{std::max<int64_t>(wait, 0)};
}

DraftItem draft_item(std::string_view name, const Limit& limit, const Decision& decision) {
  int64_t t = seconds_rounded_up(until_more_quota(limit, decision));
  if (!decision.allowed) t = std::max<int64_t>(t, 1);
  const bool concurrent = limit.algorithm() == Algorithm::kConcurrency;
  return DraftItem{
      name,       limit.size(),     seconds_rounded_up(limit.period()), decision.remaining, t,
      concurrent, !decision.allowed};
}

void append_draft_fields(std::span<const DraftItem> items, RateHeaders& out) {
  if (items.empty()) return;
  size_t bound = 0;
  for (const DraftItem& item : items) bound += item_bound(item.name);
  if (char* space = out.begin_value(bound)) {
    Writer w(space);
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) w.put(", ");
      w.put_sf_string(items[i].name);
      w.put(";q=");
      w.put_uint(items[i].quota);
      if (items[i].concurrent) {
        w.put(kConcurrentUnit);
        continue;
      }
      w.put(";w=");
      w.put_int(items[i].window_s);
    }
    out.commit_value(kRateLimitPolicy, w.used());
  }
  if (char* space = out.begin_value(bound)) {
    Writer w(space);
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) w.put(", ");
      w.put_sf_string(items[i].name);
      w.put(";r=");
      w.put_uint(items[i].remaining);
      if (items[i].concurrent && !items[i].denied) continue;
      w.put(";t=");
      w.put_int(items[i].until_s);
    }
    out.commit_value(kRateLimit, w.used());
  }
}

void append_envoy_fields(const Decision& decision, RateHeaders& out) {
  add_uint(out, kEnvoyRateLimitLimit, decision.limit);
  add_uint(out, kEnvoyRateLimitRemaining, decision.remaining);
  add_uint(out, kEnvoyRateLimitReset,
           static_cast<uint64_t>(
               seconds_rounded_up(decision.allowed ? decision.reset_after : decision.retry_after)));
}

std::optional<std::string_view> RateHeaders::find(std::string_view name) const {
  for (size_t i = 0; i < count_; ++i) {
    if (fields_[i].name == name) return fields_[i].value;
  }
  return std::nullopt;
}

void RateHeaders::clear() {
  count_ = 0;
  inline_used_ = 0;
  spill_used_ = 0;
  pending_ = nullptr;
  pending_spill_ = nullptr;
}

bool RateHeaders::add(std::string_view name, std::string_view value) {
  char* space = begin_value(value.size());
  if (space == nullptr) return false;
  if (!value.empty()) std::memcpy(space, value.data(), value.size());
  commit_value(name, value.size());
  return true;
}

char* RateHeaders::begin_value(size_t max_bytes) {
  if (count_ == kMaxFields) return nullptr;
  pending_spill_ = nullptr;
  if (max_bytes <= kInlineBytes - inline_used_) {
    pending_ = inline_ + inline_used_;
    return pending_;
  }
  if (spill_.capacity() < kMaxFields) spill_.reserve(kMaxFields);
  if (spill_used_ == spill_.size()) spill_.emplace_back();
  pending_spill_ = &spill_[spill_used_];
  pending_spill_->resize(max_bytes);
  pending_ = pending_spill_->data();
  return pending_;
}

void RateHeaders::commit_value(std::string_view name, size_t used_bytes) {
  if (pending_spill_ != nullptr) {
    pending_spill_->resize(used_bytes);  // shrinking keeps the buffer in place
    ++spill_used_;
  } else {
    inline_used_ += used_bytes;
  }
  fields_[count_++] = Field{name, std::string_view(pending_, used_bytes)};
  pending_ = nullptr;
  pending_spill_ = nullptr;
}

void append_rate_headers(const policy::Verdict& verdict, const policy::HeaderModes& modes,
                         Nanos now, RateHeaders& out) {
  if (!verdict.limited() || verdict.invalid()) return;
  if (verdict.store_failed()) {
    if (!verdict.allowed()) {
      add_uint(out, kRetryAfter,
               static_cast<uint64_t>(
                   std::max<int64_t>(1, seconds_rounded_up(verdict.decision.retry_after))));
    }
    return;
  }

  const Decision& d = verdict.decision;
  if (modes.legacy) {
    add_uint(out, kXRateLimitLimit, d.limit);
    add_uint(out, kXRateLimitRemaining, d.remaining);
    // Rounded up: at that second the limit is restored, never before it.
    add_uint(out, kXRateLimitReset, static_cast<uint64_t>(seconds_rounded_up(now + d.reset_after)));
  }

  if (modes.draft && !verdict.outcomes.empty()) {
    // Up to 8 limits on the stack: a route rarely has more.
    std::array<DraftItem, 8> inline_items;
    std::vector<DraftItem> heap_items;
    std::span<DraftItem> items(inline_items.data(), verdict.outcomes.size());
    if (verdict.outcomes.size() > inline_items.size()) {
      heap_items.resize(verdict.outcomes.size());
      items = heap_items;
    }
    for (size_t i = 0; i < items.size(); ++i) {
      const policy::LimitOutcome& o = verdict.outcomes[i];
      items[i] = draft_item(o.limit->name, o.limit->limit, o.decision);
    }
    append_draft_fields(items, out);
  }

  if (!verdict.allowed()) {
    // Never 0: "retry after 0 seconds" would invite an immediate, denied retry.
    add_uint(out, kRetryAfter,
             static_cast<uint64_t>(std::max<int64_t>(1, seconds_rounded_up(d.retry_after))));
  }
}

std::string rate_limited_body(std::string_view limit) {
  if (limit.empty()) return std::string(kRateLimitedBody);
  constexpr std::string_view kEnd = "}}";
  const std::string_view head = kRateLimitedBody.substr(0, kRateLimitedBody.size() - kEnd.size());
  std::string body;
  body.reserve(kRateLimitedBody.size() + limit.size() + 12);
  body.append(head).append(",\"limit\":\"");
  append_json_escaped(limit, body);
  body.append("\"").append(kEnd);
  return body;
}

}  // namespace sluice::render
