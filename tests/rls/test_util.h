// Helpers shared by the RLS tests.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "rls/config_loader.h"

namespace sluice::rls::testing {

// Loads one file from text; fails the test if it does not load.
inline std::shared_ptr<const RlsConfig> load_text(const std::string& text,
                                                  const std::string& name = "test.yaml") {
  std::vector<RlsFile> files{RlsFile{name, text}};
  LoadResult result = load_rls_config(files);
  EXPECT_TRUE(result.ok()) << result.error_text();
  return result.config;
}

// "file:line:col: message" of each error or warning.
inline std::vector<std::string> texts(const std::vector<config::ConfigError>& errors) {
  std::vector<std::string> out;
  for (const config::ConfigError& e : errors) out.push_back(e.text());
  return out;
}

// The errors of loading one file from text.
inline std::vector<std::string> load_errors(const std::string& text,
                                            const std::string& name = "bad.yaml") {
  std::vector<RlsFile> files{RlsFile{name, text}};
  LoadResult result = load_rls_config(files);
  EXPECT_EQ(result.config == nullptr, !result.errors.empty());
  return texts(result.errors);
}

inline std::string testdata(const std::string& relative) {
  return std::string(SLUICE_RLS_TESTDATA) + "/" + relative;
}

}  // namespace sluice::rls::testing
