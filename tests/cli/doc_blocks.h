// The fenced code blocks of a Markdown file, with what an HTML comment just
// before a block says about it (`<!-- validate: ... -->`): the examples the
// doc tests load (doc_examples_test.cc, migrating_doc_test.cc).
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace sluice::test {

struct DocBlock {
  int line = 0;           // of the opening fence, from 1
  std::string info;       // after the fence: "yaml", "sh", "" ...
  std::string directive;  // what follows "validate:" in the comment before it; "" without one
  std::string text;       // the lines inside, less the fence's indentation
};

// Fences are ``` lines, indented or not (inside a list item); the comment is
// the last non-blank line before the opening fence.
inline std::vector<DocBlock> read_doc_blocks(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::vector<DocBlock> blocks;
  std::string line;
  std::string last_text;  // the last non-blank line outside a block
  int number = 0;
  bool inside = false;
  size_t indent = 0;
  while (std::getline(in, line)) {
    ++number;
    const size_t first = line.find_first_not_of(' ');
    const bool fence = first != std::string::npos && line.compare(first, 3, "```") == 0;
    if (!inside && fence) {
      inside = true;
      indent = first;
      DocBlock b;
      b.line = number;
      b.info = line.substr(first + 3);
      const std::string open = "<!-- validate:";
      const std::string close = "-->";
      const size_t at = last_text.find(open);
      const size_t end = last_text.rfind(close);
      if (at != std::string::npos && end != std::string::npos && end > at) {
        b.directive = last_text.substr(at + open.size(), end - at - open.size());
        b.directive.erase(0, b.directive.find_first_not_of(' '));
        b.directive.erase(b.directive.find_last_not_of(' ') + 1);
      }
      blocks.push_back(std::move(b));
    } else if (inside && fence && line.find_first_not_of(' ', first + 3) == std::string::npos) {
      inside = false;
      last_text.clear();
    } else if (inside) {
      blocks.back().text += (line.size() >= indent ? line.substr(indent) : std::string()) + "\n";
    } else if (first != std::string::npos) {
      last_text = line;
    }
  }
  return blocks;
}

}  // namespace sluice::test
