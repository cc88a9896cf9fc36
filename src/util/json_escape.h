// JSON string escaping (RFC 8259 §7), shared by the server's JSON responses
// (src/http) and `sluice simulate --format json` (src/cli). Header-only so any
// library can use it without a link dependency.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

namespace sluice {

// Appends `text` as the inside of a JSON string: '"' and '\' are escaped,
// \n, \r and \t get their short forms, other control characters (below 0x20)
// become \u00XX. Every other byte passes through unchanged, so UTF-8 text
// stays UTF-8 (it is not validated: invalid sequences pass through too).
inline void append_json_escaped(std::string_view text, std::string& out) {
  // Names and messages rarely hold a byte to escape: the run before the
  // first one is appended at once, not byte by byte.
  std::size_t clean = 0;
  while (clean < text.size()) {
    const char c = text[clean];
    if (static_cast<unsigned char>(c) < 0x20 || c == '"' || c == '\\') break;
    ++clean;
  }
  out.append(text.data(), clean);
  constexpr char kHex[] = "0123456789abcdef";
  for (char c : text.substr(clean)) {
    switch (c) {
      case '"':
        out.append("\\\"", 2);
        break;
      case '\\':
        out.append("\\\\", 2);
        break;
      case '\n':
        out.append("\\n", 2);
        break;
      case '\r':
        out.append("\\r", 2);
        break;
      case '\t':
        out.append("\\t", 2);
        break;
      default: {
        const auto byte = static_cast<unsigned char>(c);
        if (byte < 0x20) {
          const char escaped[6] = {'\\', 'u', '0', '0', kHex[byte >> 4], kHex[byte & 0xf]};
          out.append(escaped, sizeof escaped);
        } else {
          out.push_back(c);
        }
      }
    }
  }
}

// `text` as the inside of a JSON string (see append_json_escaped).
inline std::string json_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  append_json_escaped(text, out);
  return out;
}

}  // namespace sluice
