#include "policy/consumers_file.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "config/files.h"
#include "config/values/values.h"
#include "config/walker.h"

namespace sluice::policy {
namespace {

bool is_blank(char c) {
  return c == ' ' || c == '\t';
}

bool is_id_byte(char ch) {
  const auto c = static_cast<unsigned char>(ch);
  return c > 0x20 && c != 0x7f;
}

// A byte a bare (unquoted) id may hold.
bool is_bare_byte(char c) {
  return is_id_byte(c) && c != ':' && c != '#' && c != '"' && c != '\\';
}

// "'x'", or "byte 0x01" for a byte that would not print.
std::string shown(char ch) {
  const auto c = static_cast<unsigned char>(ch);
  if (c > 0x20 && c < 0x7f) return std::string("'") + ch + "'";
  char buf[16];
  std::snprintf(buf, sizeof buf, "byte 0x%02X", c);
  return buf;
}

// One line, read: a blank line or comment, an entry, or an error.
struct Line {
  enum class Kind { kNothing, kEntry, kError };
  Kind kind = Kind::kNothing;
  std::string_view id;  // bare: a view of the line; quoted: of the scratch buffer
  size_t id_column = 0;
  std::string_view plan;
  size_t plan_column = 0;
  std::string error;
  size_t error_column = 0;
};

Line error_at(size_t index, std::string message) {
  Line l;
  l.kind = Line::Kind::kError;
  l.error = std::move(message);
  l.error_column = index + 1;
  return l;
}

// The quoted id starting at line[i] == '"', decoded into `scratch`; `i`
// ends after the closing quote.
std::optional<Line> read_quoted(std::string_view line, size_t& i, std::string& scratch) {
  const size_t open = i;
  scratch.clear();
  for (++i;; ++i) {
    if (i == line.size()) return error_at(open, "the quoted id has no closing '\"'");
    const char c = line[i];
    if (c == '"') break;
    if (c == '\\') {
      if (i + 1 < line.size() && (line[i + 1] == '"' || line[i + 1] == '\\')) {
        scratch.push_back(line[++i]);
        continue;
      }
      return error_at(i, "a quoted id knows only the escapes \\\" and \\\\");
    }
    if (!is_id_byte(c)) {
      return error_at(i, "a consumer id holds no whitespace or control bytes, got " + shown(c));
    }
    scratch.push_back(c);
  }
  ++i;
  if (scratch.empty()) return error_at(open, "a consumer id must not be empty");
  return std::nullopt;
}

Line read_line(std::string_view line, std::string& scratch) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  size_t i = 0;
  auto skip_blanks = [&] {
    while (i < line.size() && is_blank(line[i])) ++i;
  };
  skip_blanks();
  if (i == line.size() || line[i] == '#') return Line{};
  Line l;
  l.id_column = i + 1;
  if (line[i] == '"') {
    if (std::optional<Line> bad = read_quoted(line, i, scratch)) return std::move(*bad);
    l.id = scratch;
  } else {
    const size_t start = i;
    while (i < line.size() && is_bare_byte(line[i])) ++i;
    if (i == start) {
      if (line[i] == ':') return error_at(i, "the consumer id is missing before ':'");
      return error_at(i, "a consumer id cannot start with " + shown(line[i]) +
                             " (quote ids that hold ':', '#', '\"' or '\\')");
    }
    l.id = line.substr(start, i - start);
  }
  if (l.id.size() > ConsumerTable::kMaxIdBytes) {
    return error_at(l.id_column - 1, "a consumer id is at most " +
                                         std::to_string(ConsumerTable::kMaxIdBytes) +
                                         " bytes, this one has " + std::to_string(l.id.size()));
  }
  skip_blanks();
  if (i == line.size()) return error_at(i, "expected ':' and a plan after the consumer id");
  if (line[i] != ':') {
    return error_at(i, "expected ':' after the consumer id, got " + shown(line[i]) +
                           " (quote ids that hold ':', '#', '\"' or '\\')");
  }
  ++i;
  skip_blanks();
  const size_t plan_start = i;
  while (i < line.size() && !is_blank(line[i])) ++i;
  if (i == plan_start || line[plan_start] == '#') {
    return error_at(plan_start, "the plan is missing after ':'");
  }
  l.plan = line.substr(plan_start, i - plan_start);
  l.plan_column = plan_start + 1;
  skip_blanks();
  if (i < line.size() && line[i] != '#') {
    return error_at(i, "unexpected text after the plan (one `<consumer id>: <plan>` per line)");
  }
  l.kind = Line::Kind::kEntry;
  return l;
}

std::string unknown_plan_message(std::string_view plan, const std::vector<std::string>& plans) {
  const std::vector<std::string_view> names(plans.begin(), plans.end());
  const std::string guess = config::closest_match(plan, names);
  std::string message = "unknown plan " + config::quoted(plan);
  if (!guess.empty()) return message + "; did you mean `" + guess + "`?";
  return message + " (plans: " + config::join(names) + ")";
}

// Calls `visit(line)` for each line of `text` (without its '\n').
template <class Visit>
void for_each_line(std::string_view text, Visit&& visit) {
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = std::min(text.find('\n', start), text.size());
    visit(text.substr(start, end - start));
    start = end + 1;
  }
}

// A YAML indicator: a plain scalar cannot start with it.
bool yaml_indicator(char c) {
  return std::string_view("-?,[]{}&*!|>'%@`").find(c) != std::string_view::npos;
}

}  // namespace

ConsumersFile parse_consumers(std::string_view text, const std::string& file,
                              const std::vector<std::string>& plans) {
  ConsumersFile out;
  const size_t lines = static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) + 1;
  ConsumerTable::Builder builder(lines, text.size());
  // The line of each consumer, for "listed twice"; freed with the builder.
  std::vector<uint32_t> first_line;
  first_line.reserve(lines);
  std::string scratch;
  size_t number = 0;
  bool stopped = false;
  auto error = [&](size_t column, std::string message) {
    if (out.errors.size() == kMaxConsumersFileErrors) {
      out.errors.emplace_back(
          file, static_cast<int>(number), 1,
          "stopped after " + std::to_string(kMaxConsumersFileErrors) + " errors; fix those first");
      stopped = true;
      return;
    }
    out.errors.emplace_back(file, static_cast<int>(number), static_cast<int>(column),
                            std::move(message));
  };
  for_each_line(text, [&](std::string_view raw) {
    ++number;
    if (stopped) return;
    const Line line = read_line(raw, scratch);
    if (line.kind == Line::Kind::kNothing) return;
    if (line.kind == Line::Kind::kError) return error(line.error_column, line.error);
    const auto plan = std::find(plans.begin(), plans.end(), line.plan);
    if (plan == plans.end()) return error(line.plan_column, unknown_plan_message(line.plan, plans));
    size_t existing = 0;
    if (!builder.add(line.id, static_cast<uint16_t>(plan - plans.begin()), &existing)) {
      return error(line.id_column, "consumer " + config::quoted(line.id) +
                                       " is listed twice (first at line " +
                                       std::to_string(first_line[existing]) + ")");
    }
    first_line.push_back(static_cast<uint32_t>(number));
  });
  if (out.errors.empty()) out.table = std::move(builder).build();
  return out;
}

ConsumersFile read_consumers_file(const std::string& path, const std::vector<std::string>& plans) {
  std::string reason;
  const std::optional<std::string> text =
      config::read_small_file(path, "the consumers file " + path, kMaxConsumersFileBytes, &reason);
  if (!text) {
    ConsumersFile out;
    out.errors.emplace_back(path, 0, 0, reason);
    return out;
  }
  return parse_consumers(*text, path, plans);
}

bool valid_consumer_id(std::string_view id) {
  return !id.empty() && id.size() <= ConsumerTable::kMaxIdBytes &&
         std::all_of(id.begin(), id.end(), is_id_byte);
}

std::string consumer_line(std::string_view id, std::string_view plan) {
  const bool bare =
      !id.empty() && !yaml_indicator(id.front()) && std::all_of(id.begin(), id.end(), is_bare_byte);
  std::string out;
  out.reserve(id.size() + plan.size() + 4);
  if (bare) {
    out.append(id);
  } else {
    out.push_back('"');
    for (const char c : id) {
      if (c == '"' || c == '\\') out.push_back('\\');
      out.push_back(c);
    }
    out.push_back('"');
  }
  out.append(": ");
  out.append(plan);
  return out;
}

std::string with_consumers(std::string_view text, std::span<const ConsumerEdit> edits) {
  // The last edit of an id wins; ids without a line are appended in the
  // order they were first edited.
  std::map<std::string_view, std::optional<std::string_view>> last;
  std::vector<std::string_view> order;
  size_t added_bytes = 0;
  for (const ConsumerEdit& e : edits) {
    const auto [it, inserted] = last.insert_or_assign(e.id, e.plan);
    if (inserted) order.push_back(e.id);
    added_bytes += e.id.size() + 16;
  }
  std::set<std::string_view> written;
  std::string out;
  out.reserve(text.size() + added_bytes);
  std::string scratch;
  for_each_line(text, [&](std::string_view raw) {
    const Line line = read_line(raw, scratch);
    const auto edit = line.kind == Line::Kind::kEntry ? last.find(line.id) : last.end();
    if (edit == last.end()) {
      out.append(raw).push_back('\n');
      return;
    }
    if (edit->second && written.insert(edit->first).second) {
      out.append(consumer_line(edit->first, *edit->second)).push_back('\n');
    }
    written.insert(edit->first);
  });
  for (const std::string_view id : order) {
    const std::optional<std::string_view> plan = last.at(id);
    if (plan && !written.contains(id)) out.append(consumer_line(id, *plan)).push_back('\n');
  }
  return out;
}

std::string with_consumer(std::string_view text, std::string_view id,
                          std::optional<std::string_view> plan) {
  const ConsumerEdit edit{id, plan};
  return with_consumers(text, {&edit, 1});
}

}  // namespace sluice::policy
