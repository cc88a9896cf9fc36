// The Envoy RLS descriptor loader (rls::load_rls_config), on the input as one
// descriptor file, with and without merge_domains. Asserts: a load either
// gives a config and no error, or errors (each "file:line:col: ...") and no
// config; loading the same text twice gives the same errors.
#include "fuzz_check.h"
#include "rls/config_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sluice::rls;
  const RlsFile files[] = {{"fuzz.yaml", std::string(sluice::fuzz::text_of(data, size))},
                           {"second.yaml", "domain: second\ndescriptors: []\n"}};
  for (const bool merge : {false, true}) {
    LoadOptions options;
    options.merge_domains = merge;
    const LoadResult first = load_rls_config(files, options);
    FUZZ_CHECK(first.ok() == (first.config != nullptr), "ok %d, config %p", first.ok(),
               static_cast<const void*>(first.config.get()));
    for (const auto& e : first.errors) {
      FUZZ_CHECK(!e.message.empty(), "an error without a message at %s", e.text().c_str());
    }
    const LoadResult again = load_rls_config(files, options);
    FUZZ_CHECK(again.error_text() == first.error_text(), "two loads differ:\n%s\n---\n%s",
               first.error_text().c_str(), again.error_text().c_str());
  }
  return 0;
}
