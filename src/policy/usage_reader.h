// UsageReader: reads the actual cost of a response (a route's `cost:`) while
// the response passes through the gateway, never holding it: from a header
// or trailer, from a field of a JSON body, or from the last event of a
// text/event-stream whose data carries that field. Memory is bounded
// whatever the response: a few names and a stack of at most kMaxJsonDepth
// frames (a deeper document yields no figure).
//
// Thread-safety: one thread at a time (the exchange's).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "policy/route_cost.h"

namespace sluice::policy {

// A usable figure: ASCII digits only (optional surrounding spaces and tabs
// for a header), at most kMaxReportedCost. nullopt for anything else
// (negative, a fraction, an exponent, empty, too large).
std::optional<uint64_t> parse_figure(std::string_view text);

inline constexpr size_t kMaxJsonDepth = 64;

// Finds one field (by its path of member names) in a JSON document fed in
// pieces of any size. The figure counts only when the whole document is
// valid JSON (finish() checks the end); a member given twice counts its
// last value.
class JsonFieldScanner {
 public:
  explicit JsonFieldScanner(const std::vector<std::string>& path) : path_(&path) { reset(); }
  void feed(std::string_view bytes);
  // The document has ended: returns the figure, nullopt when the document
  // was not valid JSON, lacked the field, or its value is not a usable figure.
  std::optional<uint64_t> finish();
  void reset();

 private:
  enum class State : uint8_t {
    kValue,       // a value is expected
    kKeyOrClose,  // after '{': a key or '}'
    kKey,         // after ',' in an object: a key
    kColon,       // after a key
    kAfterValue,  // ',' or a closing bracket (or the end at the top)
    kArrayOpen,   // after '[': a value or ']'
    kString,      // inside a string
    kEscape,      // after '\' in a string
    kUnicode,     // in \uXXXX (hex_left_ digits to go)
    kNumber,      // inside a number
    kLiteral,     // inside true, false or null
    kDone,        // the top value has ended: only whitespace may follow
    kFailed,      // not JSON: nothing counts
  };
  struct Frame {
    bool object;
    bool on_path;  // this container is reached by the path's first names
  };
  void step(char c);
  void begin_value(char c);
  void end_value();
  void end_string();
  void fail() { state_ = State::kFailed; }

  const std::vector<std::string>* path_;
  State state_ = State::kValue;
  std::vector<Frame> frames_;
  bool in_key_ = false;        // the string being read is a member name
  bool key_usable_ = false;    // the name so far may still equal the wanted one
  std::string key_;            // the member name, up to one byte beyond the wanted one
  bool next_on_path_ = false;  // the value about to start is reached by the path's first names
  bool target_ = false;        // the value being read is the field itself
  std::string number_;         // the field's number as written (bounded)
  bool number_usable_ = false;
  const char* literal_ = nullptr;  // the rest of true/false/null to match
  int hex_left_ = 0;
  std::optional<uint64_t> found_;
};

class UsageReader {
 public:
  explicit UsageReader(const RouteCost& cost) : cost_(&cost), json_(cost.json_path) {}

  // The response's header block: the content type says how the body is
  // read; a `header:` figure is taken from `header_value` (nullopt: absent).
  void on_header(std::string_view content_type, std::optional<std::string_view> header_value);
  void on_body(std::string_view bytes);
  // The response has ended whole; `trailer_value` is the `header:` field as
  // a trailer (nullopt: none). Returns the figure, nullopt when none is usable.
  std::optional<uint64_t> finish(std::optional<std::string_view> trailer_value);

 private:
  void sse_byte(char c);
  void sse_end_of_line();

  const RouteCost* cost_;
  bool sse_ = false;
  std::optional<uint64_t> header_figure_;
  JsonFieldScanner json_;
  // text/event-stream: where a line is, its field name (bounded), and the
  // figure of the last whole event that carried the field.
  enum class Line : uint8_t { kStart, kName, kValueStart, kValue, kIgnore };
  Line line_ = Line::kStart;
  bool after_cr_ = false;
  std::string field_;
  bool is_data_ = false;
  bool event_has_data_ = false;
  std::optional<uint64_t> event_figure_;
};

}  // namespace sluice::policy
