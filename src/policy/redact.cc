#include "policy/redact.h"

#include <algorithm>
#include <cstdint>

#include "util/fnv1a.h"

namespace sluice::policy {

namespace {

constexpr char kHex[] = "0123456789abcdef";
constexpr int kHashDigits = 12;

// A key part starts at the beginning, after '+' (parts) or after '|' (the
// scope of a store key). Values never hold either: plan() escapes them.
bool part_starts_at(std::string_view key, size_t i) {
  return i == 0 || key[i - 1] == '+' || key[i - 1] == '|';
}

}  // namespace

std::string redact_key(std::string_view key) {
  std::string out;
  out.reserve(key.size());
  size_t i = 0;
  while (i < key.size()) {
    const size_t equals = key.find('=', i);
    const std::string_view prefix = key.substr(i, 2);
    const bool from_request = prefix == "h:" || prefix == "c:" || prefix == "q:" || prefix == "j:";
    const bool value_part = part_starts_at(key, i) && from_request &&
                            equals != std::string_view::npos && key.find_first_of("+|", i) > equals;
    if (!value_part) {
      out += key[i++];
      continue;
    }
    const size_t end = std::min(key.find_first_of("+|", equals), key.size());
    out.append(key.substr(i, equals + 1 - i));
    out += '~';
    uint64_t h = util::fnv1a64(key.substr(equals + 1, end - equals - 1));
    for (int d = 0; d < kHashDigits; ++d, h >>= 4) out += kHex[h & 0xf];
    i = end;
  }
  return out;
}

}  // namespace sluice::policy
