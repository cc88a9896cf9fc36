#include "policy/usage_reader.h"

#include "util/ascii.h"

namespace sluice::policy {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

// The longest number kept for the field: 2^32 has 10 digits.
constexpr size_t kMaxNumberText = 32;
// A field name of text/event-stream longer than this is not `data`.
constexpr size_t kMaxSseField = 16;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool is_event_stream(std::string_view content_type) {
  constexpr std::string_view kType = "text/event-stream";
  content_type = trim(content_type);
  if (content_type.size() < kType.size()) return false;
  if (!util::iequals(content_type.substr(0, kType.size()), kType)) return false;
  const std::string_view rest = trim(content_type.substr(kType.size()));
  return rest.empty() || rest.front() == ';';
}

}  // namespace

std::optional<uint64_t> parse_figure(std::string_view text) {
  text = trim(text);
  if (text.empty() || text.size() > 20) return std::nullopt;
  uint64_t n = 0;
  for (const char c : text) {
    if (!util::is_digit(c)) return std::nullopt;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  if (n > kMaxReportedCost) return std::nullopt;
  return n;
}

// ---------------------------------------------------------------- JSON

void JsonFieldScanner::reset() {
  state_ = State::kValue;
  frames_.clear();
  in_key_ = false;
  key_usable_ = false;
  key_.clear();
  next_on_path_ = true;  // the top value is reached by no name at all
  target_ = false;
  number_.clear();
  number_usable_ = false;
  literal_ = nullptr;
  hex_left_ = 0;
  found_.reset();
}

void JsonFieldScanner::feed(std::string_view bytes) {
  for (const char c : bytes) {
    if (state_ == State::kFailed) return;
    step(c);
  }
}

std::optional<uint64_t> JsonFieldScanner::finish() {
  if (state_ == State::kNumber) end_value();
  if (state_ != State::kDone) return std::nullopt;
  return found_;
}

void JsonFieldScanner::begin_value(char c) {
  if (target_ && c != '-' && !util::is_digit(c)) found_.reset();  // the last value counts
  switch (c) {
    case '{':
    case '[':
      if (frames_.size() == kMaxJsonDepth) return fail();
      frames_.push_back(Frame{c == '{', c == '{' && next_on_path_});
      next_on_path_ = false;
      target_ = false;
      state_ = c == '{' ? State::kKeyOrClose : State::kArrayOpen;
      return;
    case '"':
      in_key_ = false;
      state_ = State::kString;
      return;
    case 't':
      literal_ = "rue";
      state_ = State::kLiteral;
      return;
    case 'f':
      literal_ = "alse";
      state_ = State::kLiteral;
      return;
    case 'n':
      literal_ = "ull";
      state_ = State::kLiteral;
      return;
    default:
      break;
  }
  if (c == '-' || util::is_digit(c)) {
    state_ = State::kNumber;
    if (target_) {
      number_.assign(1, c);
      number_usable_ = true;
    }
    return;
  }
  fail();
}

void JsonFieldScanner::end_value() {
  if (target_ && state_ == State::kNumber) {
    found_ = number_usable_ ? parse_figure(number_) : std::nullopt;
  }
  target_ = false;
  next_on_path_ = false;
  state_ = frames_.empty() ? State::kDone : State::kAfterValue;
}

void JsonFieldScanner::end_string() {
  if (!in_key_) return end_value();
  in_key_ = false;
  const size_t depth = frames_.size() - 1;
  const bool match = key_usable_ && key_ == (*path_)[depth];
  target_ = match && depth + 1 == path_->size();
  next_on_path_ = match && !target_;
  state_ = State::kColon;
}

void JsonFieldScanner::step(char c) {
  switch (state_) {
    case State::kFailed:
      return;
    case State::kDone:
      if (!is_space(c)) fail();
      return;
    case State::kValue:
      if (!is_space(c)) begin_value(c);
      return;
    case State::kArrayOpen:
      if (is_space(c)) return;
      if (c == ']') {
        frames_.pop_back();
        return end_value();
      }
      return begin_value(c);
    case State::kKeyOrClose:
    case State::kKey:
      if (is_space(c)) return;
      if (c == '}' && state_ == State::kKeyOrClose) {
        frames_.pop_back();
        return end_value();
      }
      if (c != '"') return fail();
      in_key_ = true;
      key_.clear();
      key_usable_ = frames_.back().on_path && frames_.size() - 1 < path_->size();
      state_ = State::kString;
      return;
    case State::kColon:
      if (is_space(c)) return;
      if (c != ':') return fail();
      state_ = State::kValue;
      return;
    case State::kAfterValue:
      if (is_space(c)) return;
      if (c == ',') {
        state_ = frames_.back().object ? State::kKey : State::kValue;
        return;
      }
      if ((c == '}' && frames_.back().object) || (c == ']' && !frames_.back().object)) {
        frames_.pop_back();
        return end_value();
      }
      return fail();
    case State::kString:
      if (c == '"') return end_string();
      if (c == '\\') {
        state_ = State::kEscape;
        return;
      }
      if (static_cast<unsigned char>(c) < 0x20) return fail();
      break;
    case State::kEscape:
      switch (c) {
        case '"':
        case '\\':
        case '/':
          break;
        case 'b':
          c = '\b';
          break;
        case 'f':
          c = '\f';
          break;
        case 'n':
          c = '\n';
          break;
        case 'r':
          c = '\r';
          break;
        case 't':
          c = '\t';
          break;
        case 'u':
          // Names in a path are plain ASCII written as such; a member name
          // spelt with \u escapes is not compared.
          key_usable_ = false;
          hex_left_ = 4;
          state_ = State::kUnicode;
          return;
        default:
          return fail();
      }
      state_ = State::kString;
      break;
    case State::kUnicode:
      if (util::hex_value(c) < 0) return fail();
      if (--hex_left_ == 0) state_ = State::kString;
      return;
    case State::kNumber:
      if (util::is_digit(c) || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
        if (target_) {
          if (number_.size() == kMaxNumberText) {
            number_usable_ = false;
          } else {
            number_.push_back(c);
          }
        }
        return;
      }
      end_value();
      return step(c);
    case State::kLiteral:
      if (c != *literal_) return fail();
      if (*++literal_ == '\0') end_value();
      return;
  }
  // A character of a string (kString, or an escape decoded).
  if (in_key_ && key_usable_) {
    if (key_.size() > (*path_)[frames_.size() - 1].size()) {
      key_usable_ = false;
    } else {
      key_.push_back(c);
    }
  }
}

// ---------------------------------------------------------------- the reader

void UsageReader::on_header(std::string_view content_type,
                            std::optional<std::string_view> header_value) {
  if (!cost_->header.empty()) {
    if (header_value) header_figure_ = parse_figure(*header_value);
    return;
  }
  sse_ = is_event_stream(content_type);
  json_.reset();
}

void UsageReader::on_body(std::string_view bytes) {
  if (!cost_->header.empty()) return;
  if (!sse_) return json_.feed(bytes);
  size_t i = 0;
  while (i < bytes.size()) {
    if (line_ == Line::kValue) {
      // The rest of the line in one piece.
      const size_t end = bytes.find_first_of("\r\n", i);
      const size_t stop = end == std::string_view::npos ? bytes.size() : end;
      if (is_data_) json_.feed(bytes.substr(i, stop - i));
      i = stop;
      if (i == bytes.size()) return;
    }
    sse_byte(bytes[i++]);
  }
}

void UsageReader::sse_byte(char c) {
  if (c == '\n' && after_cr_) {  // the end of a CRLF line already ended
    after_cr_ = false;
    return;
  }
  after_cr_ = c == '\r';
  if (c == '\r' || c == '\n') return sse_end_of_line();
  switch (line_) {
    case Line::kStart:
      if (c == ':') {  // a comment
        line_ = Line::kIgnore;
        return;
      }
      field_.assign(1, c);
      line_ = Line::kName;
      return;
    case Line::kName:
      if (c != ':') {
        if (field_.size() == kMaxSseField) {
          line_ = Line::kIgnore;
        } else {
          field_.push_back(c);
        }
        return;
      }
      is_data_ = field_ == "data";
      if (is_data_) {
        // Data lines of one event are joined with a line feed.
        if (event_has_data_) json_.feed("\n");
        event_has_data_ = true;
      }
      line_ = Line::kValueStart;
      return;
    case Line::kValueStart:
      line_ = Line::kValue;
      if (c == ' ') return;  // one space after the colon is not part of the value
      if (is_data_) json_.feed(std::string_view(&c, 1));
      return;
    case Line::kValue:
      if (is_data_) json_.feed(std::string_view(&c, 1));
      return;
    case Line::kIgnore:
      return;
  }
}

void UsageReader::sse_end_of_line() {
  if (line_ == Line::kStart) {
    // An empty line ends the event: its data is one JSON document.
    if (event_has_data_) {
      if (const std::optional<uint64_t> f = json_.finish()) event_figure_ = f;
      json_.reset();
      event_has_data_ = false;
    }
  } else if (line_ == Line::kName && field_ == "data") {
    // "data" alone: a data line with an empty value.
    if (event_has_data_) json_.feed("\n");
    event_has_data_ = true;
  }
  line_ = Line::kStart;
  is_data_ = false;
}

std::optional<uint64_t> UsageReader::finish(std::optional<std::string_view> trailer_value) {
  if (!cost_->header.empty()) {
    // A trailer says the last word when it is usable: it is sent after the body.
    if (trailer_value) {
      if (const std::optional<uint64_t> f = parse_figure(*trailer_value)) return f;
    }
    return header_figure_;
  }
  // An event the stream did not end with an empty line never happened.
  if (sse_) return event_figure_;
  return json_.finish();
}

}  // namespace sluice::policy
