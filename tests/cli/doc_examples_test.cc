// Every ```yaml example of README.md and docs/*.md goes through `sluice
// validate` (in process, as a reader would run it on the example saved to a
// file), so an example cannot drift from what Sluice accepts. A block that
// is not a whole config on its own says so in an HTML comment on the line
// before it:
//
//   <!-- validate: skip REASON -->  not validated; REASON (required) says why,
//                                   e.g. Envoy's own configuration
//   <!-- validate: with=NAME -->    validated as one config with the doc's other
//                                   blocks marked NAME, joined in their order
//                                   (a snippet and the rest of its config)
//   <!-- validate: file=NAME -->    any fence: a file the doc's examples name (a
//                                   consumers file), written as NAME beside each
//                                   config of the doc, not validated itself
//   <!-- validate: descriptors -->  an envoyproxy/ratelimit descriptor file,
//                                   validated as the only file of rls.config_dir
//
// Each config is validated in a folder of its own holding what examples
// name: ratelimit/ (examples/envoy's descriptor files) and consumers.yaml
// (examples/consumers.yaml), then the doc's own file= blocks over them.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <unistd.h>

#include "cli/validate.h"
#include "doc_blocks.h"
#include "source_dir.h"

namespace sluice::cli {
namespace {

namespace fs = std::filesystem;

using sluice::test::DocBlock;
using sluice::test::read_doc_blocks;
using sluice::test::source_dir;

constexpr const char* kHowToMark =
    "A block that is not a whole config gets an HTML comment on the line before it: "
    "<!-- validate: with=NAME | file=NAME | descriptors | skip REASON --> "
    "(tests/cli/doc_examples_test.cc says what each does).";

void write_file(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

// Scratch folders under one root, removed when the checker goes.
class Scratch {
 public:
  Scratch() : root_(fs::temp_directory_path() / ("sluice-doc-" + std::to_string(::getpid()))) {
    fs::remove_all(root_);
  }
  ~Scratch() { fs::remove_all(root_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  // A new folder with the files examples name.
  fs::path folder(const std::map<std::string, std::string>& doc_files) {
    const fs::path dir = root_ / std::to_string(next_++);
    fs::create_directories(dir);
    fs::copy(source_dir() / "examples/envoy/ratelimit", dir / "ratelimit",
             fs::copy_options::recursive);
    fs::copy_file(source_dir() / "examples/consumers.yaml", dir / "consumers.yaml");
    for (const auto& [name, text] : doc_files) {
      fs::remove_all(dir / name);
      write_file(dir / name, text);
    }
    return dir;
  }

 private:
  fs::path root_;
  int next_ = 0;
};

void replace_all(std::string& text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
}

// `sluice validate --config FILE`; its stderr when it refuses the file,
// with FILE's path written as `name` and the files beside it by their names.
std::optional<std::string> validate_errors(const fs::path& config, const std::string& name) {
  const std::string path = config.string();
  const std::vector<std::string_view> args = {"--config", path};
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  const int rc = run_validate(args);
  testing::internal::GetCapturedStdout();
  std::string err = testing::internal::GetCapturedStderr();
  if (rc == 0) return std::nullopt;
  replace_all(err, path, name);
  replace_all(err, config.parent_path().string() + "/", "");
  return err;
}

struct DocCheck {
  std::vector<std::string> problems;  // "DOC:LINE: what", one per block
  int validated = 0;                  // configs that went through `sluice validate`
  int skipped = 0;
};

// One config to validate: its first block's line and its text.
struct Example {
  int line = 0;
  std::string text;
  bool descriptors = false;
  int blocks = 0;
};

bool safe_file_name(const std::string& name) {
  const fs::path p(name);
  if (name.empty() || p.is_absolute()) return false;
  return std::none_of(p.begin(), p.end(), [](const fs::path& part) { return part == ".."; });
}

// Every yaml block of `doc` (named `label` in problems) validated as its
// marking says.
DocCheck check_doc(const fs::path& doc, const std::string& label, Scratch& scratch) {
  DocCheck check;
  const auto at = [&](int line) { return label + ":" + std::to_string(line) + ": "; };
  std::map<std::string, std::string> files;
  std::vector<Example> examples;
  std::map<std::string, size_t> groups;  // NAME -> index in examples
  for (const DocBlock& b : read_doc_blocks(doc)) {
    const bool yaml = b.info == "yaml" || b.info == "yml";
    const std::string& d = b.directive;
    if (d.empty()) {
      if (yaml) examples.push_back({b.line, b.text, false, 1});
    } else if (d == "skip" || d.rfind("skip ", 0) == 0) {
      if (d.find_first_not_of(' ', 4) == std::string::npos) {
        check.problems.push_back(at(b.line) + "`skip` needs a reason");
      }
      ++check.skipped;
    } else if (d.rfind("with=", 0) == 0 && d.size() > 5 && d.find(' ') == std::string::npos) {
      const auto [it, first] = groups.try_emplace(d.substr(5), examples.size());
      if (first) examples.push_back({b.line, "", false, 0});
      examples[it->second].text += b.text;
      ++examples[it->second].blocks;
    } else if (d.rfind("file=", 0) == 0 && safe_file_name(d.substr(5))) {
      files[d.substr(5)] = b.text;
    } else if (d == "descriptors") {
      examples.push_back({b.line, b.text, true, 1});
    } else {
      check.problems.push_back(at(b.line) + "unknown marking \"" + d + "\"");
    }
  }
  for (const auto& [name, index] : groups) {
    if (examples[index].blocks < 2) {
      check.problems.push_back(at(examples[index].line) + "with=" + name +
                               " marks one block: nothing to validate it with");
    }
  }
  for (const Example& e : examples) {
    const fs::path dir = scratch.folder(files);
    fs::path config = dir / "example.yaml";
    if (e.descriptors) {
      write_file(dir / "descriptors/example.yaml", e.text);
      config = dir / "sluice.yaml";
      write_file(config, "grpc: 127.0.0.1:0\nrls:\n  config_dir: descriptors\n");
    } else {
      write_file(config, e.text);
    }
    ++check.validated;
    if (const std::optional<std::string> err = validate_errors(config, "example")) {
      check.problems.push_back(at(e.line) + "does not validate:\n" + *err);
    }
  }
  return check;
}

std::string joined(const std::vector<std::string>& problems) {
  std::string all;
  for (const std::string& p : problems) all += p + "\n";
  return all;
}

TEST(DocExamples, EveryYamlBlockOfTheDocsValidatesOrIsMarked) {
  std::vector<fs::path> docs = {source_dir() / "README.md"};
  for (const auto& entry : fs::directory_iterator(source_dir() / "docs")) {
    if (entry.path().extension() == ".md") docs.push_back(entry.path());
  }
  std::sort(docs.begin(), docs.end());
  Scratch scratch;
  std::vector<std::string> problems;
  int validated = 0;
  for (const fs::path& doc : docs) {
    const DocCheck check =
        check_doc(doc, fs::relative(doc, source_dir()).generic_string(), scratch);
    problems.insert(problems.end(), check.problems.begin(), check.problems.end());
    validated += check.validated;
  }
  EXPECT_EQ(joined(problems), "") << kHowToMark;
  EXPECT_GE(validated, 12) << "the docs hold more examples than were found";
}

// The checker itself, on a doc written for it: what passes and what fails.
TEST(DocExamples, UnmarkedBlocksThatDoNotValidateAndBadMarkingsAreReported) {
  const fs::path doc =
      fs::temp_directory_path() / ("sluice-doc-check-" + std::to_string(::getpid()) + ".md");
  write_file(
      doc,
      "A whole config:\n\n"
      "```yaml\nroutes:\n  - {match: GET /a, limits: [{capacity: 1, refill_rate: 1/s}]}\n```\n\n"
      "One that does not validate:\n\n"
      "```yaml\nlisten: 8080\n```\n\n"
      "Two halves of one config, and the file it names:\n\n"
      "<!-- validate: with=plans -->\n"
      "```yaml\nplans: {free: [{capacity: 1, refill_rate: 1/s}]}\n```\n\n"
      "<!-- validate: with=plans -->\n"
      "```yaml\nconsumers: {key: header:x-key, file: mine.yaml, unknown: free}\n```\n\n"
      "<!-- validate: file=mine.yaml -->\n"
      "```\nk1: free\n```\n\n"
      "  <!-- validate: descriptors -->\n"
      "  ```yaml\n  domain: d\n  descriptors: [{key: k, rate_limit: {unit: hour, "
      "requests_per_unit: 1, block: 1h}}]\n  ```\n\n"
      "<!-- validate: skip Envoy's configuration -->\n"
      "```yaml\nclusters: []\n```\n\n"
      "<!-- validate: skip -->\n"
      "```yaml\nx: 1\n```\n\n"
      "<!-- validate: with=alone -->\n"
      "```yaml\nlisten: 127.0.0.1:8080\n```\n\n"
      "<!-- validate: frag -->\n"
      "```yaml\nx: 1\n```\n\n"
      "```sh\nsluice serve\n```\n");
  Scratch scratch;
  const DocCheck check = check_doc(doc, "test.md", scratch);
  fs::remove(doc);
  EXPECT_EQ(joined(check.problems),
            "test.md:43: `skip` needs a reason\n"
            "test.md:53: unknown marking \"frag\"\n"
            "test.md:48: with=alone marks one block: nothing to validate it with\n"
            "test.md:10: does not validate:\n"
            "example:1:9: listen: must be host:port like 127.0.0.1:8080 or [::1]:8080, got "
            "\"8080\" (the host is missing: write 127.0.0.1:8080)\n"
            "example: 1 error\n\n");
  // The whole config, the one that fails, the plans group (with its file),
  // the descriptor file and the group of one.
  EXPECT_EQ(check.validated, 5);
  EXPECT_EQ(check.skipped, 2);
}

}  // namespace
}  // namespace sluice::cli
