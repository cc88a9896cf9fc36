#include "policy/path.h"

#include "util/ascii.h"
#include "util/utf8.h"

namespace sluice::policy {
namespace {

constexpr char kHex[] = "0123456789ABCDEF";

using util::hex_value;
using util::is_alpha;
using util::is_digit;
using util::is_unreserved;

// Characters a path segment may hold literally (pchar minus the escapes):
// unreserved, sub-delims, ':' and '@'. Everything else is written as an escape,
// so a raw byte and its escape ("/a b", "/a%20b") normalise alike.
bool is_raw_pchar(unsigned char c) {
  if (is_unreserved(c)) return true;
  switch (c) {
    case '!':
    case '$':
    case '&':
    case '\'':
    case '(':
    case ')':
    case '*':
    case '+':
    case ',':
    case ';':
    case '=':
    case ':':
    case '@':
      return true;
    default:
      return false;
  }
}

// Strips "scheme://authority" from an absolute-form target (RFC 9112 3.2.2).
std::string_view strip_absolute_form(std::string_view target) {
  if (target.empty() || target.front() == '/' || !is_alpha(static_cast<unsigned char>(target[0])))
    return target;
  size_t i = 1;
  while (i < target.size()) {
    const unsigned char c = static_cast<unsigned char>(target[i]);
    if (!(is_alpha(c) || is_digit(c) || c == '+' || c == '-' || c == '.')) break;
    ++i;
  }
  if (target.substr(i, 3) != "://") return target;
  const size_t path = target.find_first_of("/?#", i + 3);
  return path == std::string_view::npos ? std::string_view() : target.substr(path);
}

class Builder {
 public:
  Builder(std::string& out, bool case_insensitive) : out_(out), lower_(case_insensitive) {}

  void open_segment() {
    segment_start_ = out_.size();
    out_.push_back('/');
  }

  void literal(unsigned char c) {
    if (lower_ && c >= 'A' && c <= 'Z') c = static_cast<unsigned char>(c - 'A' + 'a');
    out_.push_back(static_cast<char>(c));
  }

  void escape(unsigned char c) {
    out_.push_back('%');
    out_.push_back(kHex[c >> 4]);
    out_.push_back(kHex[c & 0xf]);
  }

  // Resolves the segment just written: empty and "." vanish, ".." removes
  // itself and its parent (at the root there is no parent: it just vanishes).
  // Dots decoded from %2E count too, so "/a/%2e%2e/b" is "/b".
  void close_segment() {
    const std::string_view segment = std::string_view(out_).substr(segment_start_);
    if (segment == "/" || segment == "/.") {
      out_.resize(segment_start_);
    } else if (segment == "/..") {
      out_.resize(segment_start_);
      const size_t parent = out_.rfind('/');
      out_.resize(parent == std::string::npos ? 0 : parent);
    }
  }

 private:
  std::string& out_;
  bool lower_;
  size_t segment_start_ = 0;
};

}  // namespace

std::string normalize_path(std::string_view target, const PathReading& reading, bool* refused) {
  target = strip_absolute_form(target);
  target = target_path(target);

  std::string out;
  out.reserve(target.size() + 1);
  Builder b(out, reading.case_insensitive);
  // A target without a leading '/' (asterisk-form, garbage) is read as if it had one.
  b.open_segment();
  bool refuse = false;
  bool in_params = false;  // after a ';' of this segment, when stripping them
  std::string high_bytes;  // escaped bytes >= 0x80 of the current run, to check as UTF-8
  auto end_run = [&] {
    if (!high_bytes.empty() && util::invalid_utf8(high_bytes) != std::string::npos) refuse = true;
    high_bytes.clear();
  };
  auto separator = [&] {
    end_run();
    in_params = false;
    b.close_segment();
    b.open_segment();
  };
  auto backslash = [&] {
    if (reading.backslash == PathReading::Backslash::kAsSlash) return separator();
    refuse = true;
    if (!in_params) b.escape('\\');
  };
  for (size_t i = 0; i < target.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(target[i]);
    if (c == '/') {
      separator();
      continue;
    }
    if (c == '\\') {
      backslash();
      continue;
    }
    if (c == 0) refuse = true;
    if (c == ';' && reading.strip_matrix_params) in_params = true;
    if (c != '%') {
      // A raw byte and its escape are read alike: raw non-ASCII bytes are
      // checked as UTF-8 together with escaped ones.
      if (c >= 0x80) {
        high_bytes.push_back(static_cast<char>(c));
      } else {
        end_run();
      }
      if (in_params) continue;
      if (is_raw_pchar(c)) {
        b.literal(c);
      } else {
        b.escape(c);
      }
      continue;
    }
    const int hi = i + 2 < target.size() ? hex_value(target[i + 1]) : -1;
    const int lo = hi >= 0 ? hex_value(target[i + 2]) : -1;
    if (lo < 0) {
      // A stray '%' ("%", "%zz") is a literal percent sign: "%25" is its
      // canonical spelling.
      end_run();
      if (!in_params) b.escape('%');
      continue;
    }
    i += 2;
    const unsigned char decoded = static_cast<unsigned char>(hi * 16 + lo);
    if (decoded >= 0x80) {
      high_bytes.push_back(static_cast<char>(decoded));
    } else {
      end_run();
    }
    if (decoded == 0) refuse = true;
    if ((decoded == '/' || decoded == '\\') &&
        reading.escaped_slashes != PathReading::EscapedSlashes::kKeep) {
      if (reading.escaped_slashes == PathReading::EscapedSlashes::kReject) {
        refuse = true;
      } else {
        decoded == '/' ? separator() : backslash();
        continue;
      }
    }
    if (in_params) continue;
    // Unreserved characters are decoded; every other escape stays an escape
    // (in upper case), so a kept "%2F" never becomes a path separator.
    if (is_unreserved(decoded)) {
      b.literal(decoded);
    } else {
      b.escape(decoded);
    }
  }
  end_run();
  b.close_segment();
  if (out.empty()) out.push_back('/');
  if (refused != nullptr) *refused = refuse;
  return out;
}

}  // namespace sluice::policy
