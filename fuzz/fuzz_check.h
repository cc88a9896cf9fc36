// What the fuzz targets share: a check that stops the run with a message
// (libFuzzer saves the input as a crash), and text helpers.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

// Beyond "no crash": a property of the target that must hold for every input.
#define FUZZ_CHECK(cond, ...)                                                            \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "%s:%d: property violated: %s\n", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                                 \
      std::fprintf(stderr, "\n");                                                        \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)

namespace sluice::fuzz {

inline std::string_view text_of(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Splits `text` at its first `sep`: the part before, and the rest after it
// (the rest is empty when there is no separator).
inline std::string_view split_first(std::string_view& text, char sep) {
  const size_t at = text.find(sep);
  const std::string_view head = text.substr(0, at);
  text = at == std::string_view::npos ? std::string_view() : text.substr(at + 1);
  return head;
}

}  // namespace sluice::fuzz
