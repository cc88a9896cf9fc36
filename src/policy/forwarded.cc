#include "policy/forwarded.h"

#include <algorithm>
#include <string>

#include "util/ascii.h"

namespace sluice::policy {
namespace {

using util::is_digit;

// Reads one element left to right.
class Reader {
 public:
  explicit Reader(std::string_view text) : text_(text) {}

  bool done() const { return at_ >= text_.size(); }
  char peek() const { return text_[at_]; }
  void skip_whitespace() {
    while (!done() && (peek() == ' ' || peek() == '\t')) ++at_;
  }
  bool take(char c) {
    if (done() || peek() != c) return false;
    ++at_;
    return true;
  }
  std::string_view token() {
    const size_t start = at_;
    while (!done() && util::is_tchar(peek())) ++at_;
    return text_.substr(start, at_ - start);
  }
  // The rest of a quoted string whose opening quote was taken, unescaped
  // into `out`; false when it does not end or holds a control character.
  bool quoted(std::string& out) {
    while (!done()) {
      char c = text_[at_++];
      if (c == '"') return true;
      if (c == '\\') {
        if (done()) return false;
        c = text_[at_++];
      }
      const unsigned char u = static_cast<unsigned char>(c);
      if (u == 0x7f || (u < 0x20 && c != '\t')) return false;
      out += c;
    }
    return false;
  }

 private:
  std::string_view text_;
  size_t at_ = 0;
};

// A node-port: 1 to 5 digits, or an obfuscated one ("_" then ALPHA, DIGIT,
// ".", "_" or "-").
bool is_port(std::string_view port) {
  if (port.empty()) return false;
  if (port.front() == '_') {
    return port.size() > 1 && std::all_of(port.begin() + 1, port.end(), [](char c) {
             return util::is_alpha(c) || is_digit(c) || c == '.' || c == '_' || c == '-';
           });
  }
  return port.size() <= 5 && std::all_of(port.begin(), port.end(), is_digit);
}

}  // namespace

size_t last_forwarded_separator(std::string_view value) {
  bool quoted = false;
  for (size_t i = value.size(); i-- > 0;) {
    if (value[i] == ',' && !quoted) return i;
    if (value[i] != '"') continue;
    // A quote after an odd number of backslashes is escaped (inside a quoted
    // string; anywhere else a backslash is a syntax error anyway).
    size_t backslashes = 0;
    while (backslashes < i && value[i - 1 - backslashes] == '\\') ++backslashes;
    if (backslashes % 2 == 0) quoted = !quoted;
  }
  return std::string_view::npos;
}

std::optional<IpAddress> forwarded_element_for(std::string_view element) {
  Reader in(element);
  std::optional<std::string> node;
  std::string value;
  while (true) {
    in.skip_whitespace();
    if (in.done()) break;
    if (in.take(';')) continue;  // an empty pair
    const std::string_view name = in.token();
    if (name.empty() || !in.take('=')) return std::nullopt;
    value.clear();
    if (in.take('"')) {
      if (!in.quoted(value)) return std::nullopt;
    } else {
      value = in.token();
      if (value.empty()) return std::nullopt;
    }
    in.skip_whitespace();
    if (!in.done() && in.peek() != ';') return std::nullopt;
    if (util::iequals(name, "for")) {
      if (node) return std::nullopt;  // twice: which one is meant cannot be known
      node = value;
    }
  }
  if (!node) return std::nullopt;
  return parse_forwarded_node(*node);
}

std::optional<IpAddress> parse_forwarded_node(std::string_view node) {
  std::string_view host = node;
  std::string_view rest;
  if (!node.empty() && node.front() == '[') {
    const size_t close = node.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = node.substr(0, close + 1);  // parse_ip reads "[IPv6]" only
    rest = node.substr(close + 1);
  } else {
    const size_t colon = node.find(':');
    if (colon != std::string_view::npos) {
      host = node.substr(0, colon);  // no ':' left: parse_ip reads IPv4 only
      rest = node.substr(colon);
    }
  }
  if (!rest.empty() && (rest.front() != ':' || !is_port(rest.substr(1)))) return std::nullopt;
  return parse_ip(host);
}

}  // namespace sluice::policy
