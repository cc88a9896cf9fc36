#include "config/walker.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>

#include <algorithm>
#include <map>
#include <sstream>

#include "config/files.h"
#include "sluice/limit.h"
#include "util/utf8.h"

namespace sluice::config {

namespace {

constexpr size_t kMaxSecretBytes = 4096;

// yaml-cpp reads UTF-16 and UTF-32 too, told by a byte order mark or a zero
// byte among the first ones; everything else is read as UTF-8.
bool read_as_utf8(std::string_view text) {
  if (text.starts_with("\xFE\xFF") || text.starts_with("\xFF\xFE")) return false;
  return text.substr(0, 4).find('\0') == std::string_view::npos;
}

// Reads documents for the root node's mark of each, building nothing.
class DocumentRoots final : public YAML::EventHandler {
 public:
  std::vector<YAML::Mark> roots;

  void OnDocumentStart(const YAML::Mark&) override { in_root_ = true; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& m, YAML::anchor_t) override { node(m); }
  void OnAlias(const YAML::Mark& m, YAML::anchor_t) override { node(m); }
  void OnScalar(const YAML::Mark& m, const std::string&, YAML::anchor_t,
                const std::string&) override {
    node(m);
  }
  void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    node(m);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    node(m);
  }
  void OnMapEnd() override {}

 private:
  void node(const YAML::Mark& m) {
    if (in_root_) roots.push_back(m);
    in_root_ = false;
  }
  bool in_root_ = false;
};

// Bounds the repairs of one file: each is a reparse.
constexpr int kMaxQuotedStars = 32;

// A plain scalar starting with `*` (a route's "any method") reads as a YAML
// alias. yaml-cpp says so with one of these.
bool is_alias_error(const YAML::Exception& e) {
  return e.msg == YAML::ErrorMsg::ALIAS_NOT_FOUND || e.msg == YAML::ErrorMsg::UNKNOWN_ANCHOR;
}

// Quotes, in `text`, the value starting with the `*` the alias error at `at`
// points at (or just after), so that the rest of the file can be read and
// its errors reported too. The column of the `*` (0-based) on success.
std::optional<size_t> quote_star_value(std::string* text, const YAML::Mark& at) {
  if (at.is_null() || at.line < 0) return std::nullopt;
  size_t line_start = 0;
  for (int line = 0; line < at.line; ++line) {
    line_start = text->find('\n', line_start);
    if (line_start == std::string::npos) return std::nullopt;
    ++line_start;
  }
  const size_t line_end = std::min(text->find('\n', line_start), text->size());
  const std::string_view line(text->data() + line_start, line_end - line_start);
  if (line.empty()) return std::nullopt;
  size_t star = std::min(static_cast<size_t>(std::max(at.column, 0)), line.size() - 1);
  while (star > 0 && line[star] != '*') --star;
  if (line[star] != '*') return std::nullopt;
  // Only at the start of a value: after "key:", "- ", "[", "{" or ",".
  if (star > 0) {
    const size_t before = line.find_last_not_of(' ', star - 1);
    if (before != std::string_view::npos &&
        std::string_view(":-[{,").find(line[before]) == std::string_view::npos)
      return std::nullopt;
  }
  const bool flow = line.substr(0, star).find_first_of("[{") != std::string_view::npos;
  size_t end = line.find(" #", star);
  if (end == std::string_view::npos) end = line.size();
  if (flow) end = std::min(end, line.find_first_of(",]}", star));
  while (end > star && line[end - 1] == ' ') --end;
  std::string quoted_value = "\"";
  for (char c : line.substr(star, end - star)) {
    if (c == '"' || c == '\\') quoted_value += '\\';
    quoted_value += c;
  }
  quoted_value += '"';
  text->replace(line_start + star, end - star, quoted_value);
  return star;
}

}  // namespace

std::string join(const Keys& keys) {
  std::string out;
  for (std::string_view k : keys) {
    if (!out.empty()) out += ", ";
    out += k;
  }
  return out;
}

std::string child_path(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}

std::string index_path(const std::string& path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

const Item* Mapping::get(std::string_view key) const {
  const Entry* e = entry(key);
  return e == nullptr ? nullptr : &e->value;
}

const Mapping::Entry* Mapping::entry(std::string_view key) const {
  for (const Entry& e : entries) {
    if (e.key == key) return &e;
  }
  return nullptr;
}

Walker::Walker(std::string file, Diagnostics& diagnostics)
    : file_(std::move(file)), diagnostics_(diagnostics) {}

std::optional<Item> Walker::document(std::string_view text) {
  // YAML text is Unicode. yaml-cpp reads invalid UTF-8 as it comes and writes
  // it back as U+FFFD, so such a value would not survive a round trip through
  // to_yaml (found by fuzz/config.cc); a request path never holds raw bytes
  // above 0x7F (they arrive percent-encoded) and envoyproxy/ratelimit refuses
  // such descriptor files too.
  if (const size_t at = util::invalid_utf8(text);
      at != std::string_view::npos && read_as_utf8(text)) {
    YAML::Mark where;
    where.pos = static_cast<int>(at);
    const std::string_view before = text.substr(0, at);
    const size_t newline = before.rfind('\n');
    where.line = static_cast<int>(std::count(before.begin(), before.end(), '\n'));
    where.column = static_cast<int>(newline == std::string_view::npos ? at : at - newline - 1);
    error(where, "", "the file is not UTF-8 text (a byte that starts no valid UTF-8 character)");
    return std::nullopt;
  }
  // Two documents at most are read, not all of them (YAML::LoadAll): after a
  // ',' outside [...] or {...} (",", "- a\n,"), yaml-cpp 0.7 reads an empty
  // document without consuming the ',', again and again, and LoadAll never
  // returns. Found by fuzz/config.cc.
  std::string source(text);
  std::vector<YAML::Mark> roots;
  YAML::Node root;
  for (int repairs = 0;; ++repairs) {
    try {
      DocumentRoots documents;
      std::istringstream in(source);
      YAML::Parser parser(in);
      for (int read = 0; read < 2 && parser.HandleNextDocument(documents); ++read) {
      }
      roots = std::move(documents.roots);
      if (roots.size() == 1) root = YAML::Load(source);
      break;
    } catch (const YAML::Exception& e) {
      std::optional<size_t> star;
      if (repairs < kMaxQuotedStars && is_alias_error(e)) star = quote_star_value(&source, e.mark);
      if (!star) {
        error(e.mark, "", "YAML syntax error: " + e.msg);
        return std::nullopt;
      }
      YAML::Mark at = e.mark;
      at.column = static_cast<int>(*star);
      error(at, "",
            "a plain `*` starts a YAML alias: quote the value, as in match: \"* /static/*\"");
    }
  }
  if (roots.empty()) return Item{YAML::Node(), YAML::Mark::null_mark(), ""};
  if (roots.size() > 1) {
    const YAML::Mark& second = roots[1];
    const bool stray_comma = second.pos >= 0 && static_cast<size_t>(second.pos) < source.size() &&
                             source[static_cast<size_t>(second.pos)] == ',';
    error(second, "",
          stray_comma ? "YAML syntax error: a ',' outside a flow collection ([...] or {...})"
                      : "a second YAML document starts here; a config file holds one (check the "
                        "indentation and any '---')");
    return std::nullopt;
  }
  return Item{root, root.Mark(), ""};
}

SourceMark Walker::mark(const YAML::Mark& m) const {
  if (m.is_null() || m.line < 0) return SourceMark{file_, 0, 0, {}};
  return SourceMark{file_, m.line + 1, m.column + 1, {}};
}

SourceMark Walker::where(const Item& item) const {
  SourceMark at = mark(item.mark);
  at.path = item.path;
  return at;
}

void Walker::error(const YAML::Mark& at, const std::string& path, std::string_view message) {
  SourceMark where = mark(at);
  where.path = path;
  diagnostics_.errors.emplace_back(where, std::string(message));
}

void Walker::warning(const YAML::Mark& at, const std::string& path, std::string_view message) {
  SourceMark where = mark(at);
  where.path = path;
  diagnostics_.warnings.emplace_back(where, std::string(message));
}

std::string Walker::describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar:
      return quoted(node.Scalar());
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    default:
      return "nothing";
  }
}

std::optional<Mapping> Walker::mapping(const Item& item, const Keys* known, std::string_view what) {
  if (!item.node.IsMap()) {
    error(item, "must be " + std::string(what) + ", got " + describe(item.node));
    return std::nullopt;
  }
  Mapping m{item, {}};
  std::map<std::string, int> first_line;
  for (auto it = item.node.begin(); it != item.node.end(); ++it) {
    const YAML::Node key = it->first;
    const YAML::Node value = it->second;
    if (!key.IsScalar()) {
      error(key.Mark(), item.path, "keys must be plain names, got " + describe(key));
      continue;
    }
    const std::string name = key.Scalar();
    const std::string path = child_path(item.path, name);
    const auto [pos, inserted] = first_line.emplace(name, key.Mark().line + 1);
    if (!inserted) {
      error(key.Mark(), path,
            "duplicate key (first set on line " + std::to_string(pos->second) + ")");
      continue;
    }
    const YAML::Mark value_mark =
        (value.IsNull() || value.Mark().is_null()) ? key.Mark() : value.Mark();
    Mapping::Entry entry{name, key, key.Mark(), Item{value, value_mark, path}};
    if (known != nullptr && std::find(known->begin(), known->end(), name) == known->end()) {
      unknown_key(entry, *known);
      continue;
    }
    m.entries.push_back(std::move(entry));
  }
  return m;
}

void Walker::unknown_key(const Mapping::Entry& entry, const Keys& known) {
  const std::string guess = closest_match(entry.key, known);
  error(entry.key_mark, entry.value.path,
        guess.empty() ? "unknown key (known keys: " + join(known) + ")"
                      : "unknown key; did you mean `" + guess + "`?");
}

std::optional<std::vector<Item>> Walker::sequence(const Item& item, std::string_view what) {
  if (!item.node.IsSequence()) {
    error(item, "must be " + std::string(what) + ", got " + describe(item.node));
    return std::nullopt;
  }
  std::vector<Item> items;
  size_t i = 0;
  for (auto it = item.node.begin(); it != item.node.end(); ++it, ++i) {
    const YAML::Node node = *it;
    const YAML::Mark mark = node.Mark().is_null() ? item.mark : node.Mark();
    items.push_back(Item{node, mark, index_path(item.path, i)});
  }
  return items;
}

std::optional<std::string> Walker::scalar(const Item& item, std::string_view what) {
  if (!item.node.IsScalar()) {
    error(item, "must be " + std::string(what) + ", got " + describe(item.node));
    return std::nullopt;
  }
  return item.node.Scalar();
}

std::optional<bool> Walker::boolean(const Item& item) {
  const std::optional<std::string> text = scalar(item, "true or false");
  if (!text) return std::nullopt;
  if (*text == "true" || *text == "True" || *text == "TRUE") return true;
  if (*text == "false" || *text == "False" || *text == "FALSE") return false;
  error(item, "must be true or false, got " + quoted(*text));
  return std::nullopt;
}

std::optional<uint64_t> Walker::integer(const Item& item, uint64_t min, uint64_t max,
                                        std::string_view what) {
  const std::optional<std::string> text = scalar(item, what);
  if (!text) return std::nullopt;
  Result<uint64_t> r = parse_uint(*text);
  if (!r.ok() || *r < min || *r > max) {
    error(item, "must be " + std::string(what) + ", got " + quoted(*text));
    return std::nullopt;
  }
  return *r;
}

std::optional<uint64_t> Walker::count(const Item& item) {
  const std::optional<std::string> text = scalar(item, "a positive integer");
  if (!text) return std::nullopt;
  Result<uint64_t> r = parse_uint(*text);
  if (!r.ok() || *r == 0) {
    error(item, "must be a positive integer, got " + quoted(*text));
    return std::nullopt;
  }
  if (*r > Limit::kMaxLimit) {
    error(item, "must be at most " + std::to_string(Limit::kMaxLimit) + ", got " + quoted(*text));
    return std::nullopt;
  }
  return *r;
}

std::optional<Nanos> Walker::duration(const Item& item, bool allow_zero) {
  return parsed<Nanos>(item, "a duration like 500ms, 1s, 1m, 1h, 1d or 1w",
                       [&](std::string_view t) { return parse_duration(t, allow_zero); });
}

std::optional<size_t> Walker::choice(const Item& item, const Keys& choices) {
  const std::string what = "one of " + join(choices);
  const std::optional<std::string> text = scalar(item, what);
  if (!text) return std::nullopt;
  for (size_t i = 0; i < choices.size(); ++i) {
    if (choices[i] == *text) return i;
  }
  const std::string guess = closest_match(*text, choices);
  error(item, "must be " + what + ", got " + quoted(*text) +
                  (guess.empty() ? "" : "; did you mean `" + guess + "`?"));
  return std::nullopt;
}

std::optional<HostPort> Walker::host_port(const Item& item, bool allow_port_zero) {
  return parsed<HostPort>(item, "host:port like 127.0.0.1:8080",
                          [&](std::string_view t) { return parse_host_port(t, allow_port_zero); });
}

std::optional<std::string> Walker::path(const Item& item, std::string_view what) {
  const std::optional<std::string> text = scalar(item, what);
  if (!text) return std::nullopt;
  if (text->empty()) {
    error(item, "must not be empty");
    return std::nullopt;
  }
  std::string resolved = relative_to_file(file_, *text);
  if (std::find(named_paths_.begin(), named_paths_.end(), resolved) == named_paths_.end()) {
    named_paths_.push_back(resolved);
  }
  return resolved;
}

std::optional<Secret> Walker::secret_file(const Item& item, std::string_view what) {
  std::optional<std::string> resolved = path(item);
  if (!resolved) return std::nullopt;
  const std::string file = "the " + std::string(what) + " file " + *resolved;
  std::string reason;
  std::optional<std::string> content = read_small_file(*resolved, file, kMaxSecretBytes, &reason);
  if (!content) {
    error(item, reason);
    return std::nullopt;
  }
  std::string token = std::move(*content);
  if (token.ends_with('\n')) token.pop_back();
  if (token.ends_with('\r')) token.pop_back();
  if (token.empty()) {
    error(item, file + " is empty");
    return std::nullopt;
  }
  for (const char c : token) {
    if (c < 0x21 || c > 0x7e) {
      error(item, file + " must hold one " + std::string(what) +
                      " of visible ASCII characters (no spaces, no lines after it)");
      return std::nullopt;
    }
  }
  return Secret{std::move(*resolved), std::move(token)};
}

}  // namespace sluice::config
