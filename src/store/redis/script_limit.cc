#include "store/redis/script_limit.h"

#include <array>
#include <charconv>
#include <numeric>

#include "util/fnv1a.h"

namespace sluice::redis {
namespace {

constexpr int64_t kNanosPerMicro = 1'000;
// Blocks below 2^49 us (Limit::create() takes at most 10 years, 2^48.2 us),
// so that now + block stays exact (below 2^53 us) for centuries.
constexpr uint64_t kMaxBlockUs = uint64_t{1} << 49;

void append_hex16(std::string& out, uint64_t v) {
  static constexpr char kDigits[] = "0123456789abcdef";
  for (int shift = 60; shift >= 0; shift -= 4) out.push_back(kDigits[(v >> shift) & 0xf]);
}

constexpr std::array<uint16_t, 256> make_crc16_table() {
  std::array<uint16_t, 256> table{};
  for (int i = 0; i < 256; ++i) {
    uint16_t crc = static_cast<uint16_t>(i << 8);
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc & 0x8000) ? static_cast<uint16_t>((crc << 1) ^ 0x1021)
                           : static_cast<uint16_t>(crc << 1);
    }
    table[i] = crc;
  }
  return table;
}

constexpr std::array<uint16_t, 256> kCrc16Table = make_crc16_table();

// The script arguments of `limit` whose lockout is `block_us`.
Result<ScriptLimit> script_limit_of(const Limit& limit, uint64_t block_us) {
  const LimitSpec& spec = limit.spec();
  switch (limit.algorithm()) {
    case Algorithm::kTokenBucket:
    case Algorithm::kGcra: {
      const uint64_t period_us = static_cast<uint64_t>(spec.refill_period.count() / kNanosPerMicro);
      const uint64_t g = std::gcd(spec.refill_tokens, period_us);
      const uint64_t unit = period_us / g;
      const uint64_t rate = spec.refill_tokens / g;
      // capacity <= 2^32 and unit <= 2^49 (10 years in us): the product fits
      // 128 bits. The scripts form debt + need <= 2 * full and level plus one
      // step of refill <= full + rate.
      const unsigned __int128 full = static_cast<unsigned __int128>(spec.capacity) * unit;
      if (2 * full + rate > kExactLimit) {
        return Error{ErrorCode::kInvalidArgument,
                     "the Redis store cannot count " + limit.describe() +
                         " exactly: capacity x (refill period in microseconds / gcd with "
                         "refill tokens) must stay below 2^52; use a smaller capacity, a refill "
                         "amount that divides the period, or the memory store"};
      }
      return ScriptLimit{algorithm_name(limit.algorithm()), spec.capacity, unit, rate, block_us};
    }
    case Algorithm::kFixedWindow:
    case Algorithm::kSlidingLog:
    case Algorithm::kSlidingWindow:
      return ScriptLimit{algorithm_name(limit.algorithm()), spec.limit,
                         static_cast<uint64_t>(spec.window.count() / kNanosPerMicro), 0, block_us};
    case Algorithm::kConcurrency:
      // Slots are sliding_log entries whose window is the lease (limit.h).
      return ScriptLimit{algorithm_name(Algorithm::kSlidingLog),
                         spec.limit,
                         static_cast<uint64_t>(spec.window.count() / kNanosPerMicro),
                         0,
                         block_us,
                         true};
  }
  return Error{ErrorCode::kInvalidArgument, "unknown algorithm"};
}

}  // namespace

Result<ScriptLimit> script_limit(const Limit& limit) {
  const LimitSpec& spec = limit.spec();
  // Limit::create() checks this; kept here, where exactness is promised.
  const int64_t block_ns = limit.block().count();
  if (block_ns < 0 || block_ns % kNanosPerMicro != 0 ||
      static_cast<uint64_t>(block_ns / kNanosPerMicro) >= kMaxBlockUs) {
    return Error{ErrorCode::kInvalidArgument,
                 "the Redis store cannot count the block of " + limit.describe() +
                     " exactly: it must be whole microseconds, at most 10 years"};
  }
  const uint64_t block_us = static_cast<uint64_t>(block_ns / kNanosPerMicro);
  Result<ScriptLimit> out = script_limit_of(limit, block_us);
  if (!out.ok() || !limit.block_grows()) return out;
  // Limit::create() took only whole microseconds up to 10 years for max and
  // forget_after: every sum the script forms stays below 2^53 us.
  ScriptLimit grows = *out;
  grows.block_factor = spec.block_factor;
  grows.block_max_us = static_cast<uint64_t>(spec.block_max.count() / kNanosPerMicro);
  grows.block_forget_us = static_cast<uint64_t>(spec.block_forget_after.count() / kNanosPerMicro);
  return grows;
}

std::string growing_block_arg(const ScriptLimit& limit) {
  return std::to_string(limit.block_us) + " " + std::to_string(limit.block_factor) + " " +
         std::to_string(limit.block_max_us) + " " + std::to_string(limit.block_forget_us);
}

std::string state_key(std::string_view prefix, const Limit& limit, std::string_view key) {
  const size_t bar = key.find('|');
  const std::string_view client = bar == std::string_view::npos ? key : key.substr(bar + 1);
  std::string out;
  out.reserve(prefix.size() + 36 + key.size());
  out.append(prefix);
  out.push_back('{');
  // The same in every instance, so all put a client key in the same slot. A
  // collision only puts two clients in one slot; their Redis keys stay distinct.
  append_hex16(out, util::fnv1a64(client));
  out.push_back('}');
  append_hex16(out, limit.fingerprint());
  out.push_back(':');
  out.append(key);
  return out;
}

uint64_t refund_cost(uint64_t cost) {
  return cost < kExactLimit ? cost : kExactLimit;
}

namespace {

// Appends `state_key` with `mark` after the limit's fingerprint, where a
// state key has ':' (<prefix>{<16 hex>}<16 hex>:<key>).
void append_marked(std::string& out, std::string_view state_key, std::string_view prefix,
                   std::string_view mark) {
  const size_t at = prefix.size() + 1 + 16 + 1 + 16;
  out.append(state_key.substr(0, at));
  out.append(mark);
  out.append(state_key.substr(at));
}

std::string marked_key(std::string_view state_key, std::string_view prefix, std::string_view mark) {
  std::string out;
  out.reserve(state_key.size() + mark.size());
  append_marked(out, state_key, prefix, mark);
  return out;
}

// "#<index>": the mark of a window's counter.
std::string_view window_mark(int64_t index, char (&buf)[24]) {
  buf[0] = '#';
  const auto [end, ec] = std::to_chars(buf + 1, buf + sizeof buf, index);
  (void)ec;  // 23 characters hold any int64
  return std::string_view(buf, static_cast<size_t>(end - buf));
}

}  // namespace

std::string lockout_key(std::string_view state_key, std::string_view prefix) {
  return marked_key(state_key, prefix, "!b");
}

std::string window_key(std::string_view state_key, std::string_view prefix, int64_t index) {
  char buf[24];
  return marked_key(state_key, prefix, window_mark(index, buf));
}

void append_window_key_bulk(std::string& out, std::string_view state_key, std::string_view prefix,
                            int64_t index) {
  char buf[24];
  const std::string_view mark = window_mark(index, buf);
  char size[24];
  const auto [end, ec] = std::to_chars(size, size + sizeof size, state_key.size() + mark.size());
  (void)ec;
  out.push_back('$');
  out.append(size, end);
  out.append("\r\n", 2);
  append_marked(out, state_key, prefix, mark);
  out.append("\r\n", 2);
}

uint16_t crc16(std::string_view data) {
  uint16_t crc = 0;
  for (unsigned char c : data) {
    crc = static_cast<uint16_t>((crc << 8) ^ kCrc16Table[((crc >> 8) ^ c) & 0xff]);
  }
  return crc;
}

uint16_t key_slot(std::string_view key) {
  const size_t open = key.find('{');
  if (open != std::string_view::npos) {
    const size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1)
      return crc16(key.substr(open + 1, close - open - 1)) & 16383;
  }
  return crc16(key) & 16383;
}

std::vector<uint32_t> slot_tags() {
  constexpr uint32_t kNone = UINT32_MAX;
  std::vector<uint32_t> tags(16384, kNone);
  size_t left = tags.size();
  char text[16] = "{";
  for (uint32_t n = 0; left > 0 && n < 10'000'000; ++n) {
    char* end = std::to_chars(text + 1, text + sizeof(text) - 1, n).ptr;
    *end++ = '}';
    uint32_t& tag = tags[key_slot(std::string_view(text, static_cast<size_t>(end - text)))];
    if (tag == kNone) {
      tag = n;
      --left;
    }
  }
  return tags;
}

}  // namespace sluice::redis
