// The server config loader (policy::load_config_string). Asserts: a config
// that loads, written back by policy::to_yaml, loads again to an equal Config
// (config.h: positions aside), and writing that one gives the same text.
#include <string>

#include "fuzz_check.h"
#include "policy/config_loader.h"
#include "policy/config_yaml.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sluice::policy;
  // A name without a folder: relative paths in the file stay relative.
  const std::string name = "fuzz.yaml";
  const LoadResult first = load_config_string(sluice::fuzz::text_of(data, size), name);
  if (!first.config) return 0;
  const std::string yaml = to_yaml(*first.config);
  const LoadResult second = load_config_string(yaml, name);
  FUZZ_CHECK(second.config.has_value(), "the written config does not load:\n%s\nfirst error: %s",
             yaml.c_str(), second.errors.empty() ? "" : second.errors.front().text().c_str());
  FUZZ_CHECK(*second.config == *first.config, "the written config loads differently:\n%s",
             yaml.c_str());
  const std::string again = to_yaml(*second.config);
  FUZZ_CHECK(again == yaml, "written twice differently:\n%s\n---\n%s", yaml.c_str(), again.c_str());
  return 0;
}
