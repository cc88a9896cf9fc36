// The dashboard files of web/, embedded at build time by
// src/http/embed_web.cmake (the definition is generated into the build
// directory): `sluice serve` reads no file at run time.
//
// Thread-safety: immutable data; use from any thread.
#pragma once

#include <span>
#include <string_view>

namespace sluice::http {

struct WebAsset {
  std::string_view name;  // file name in web/, e.g. "index.html"
  std::string_view body;  // its bytes
};

// Every embedded file, sorted by name.
std::span<const WebAsset> web_assets();

}  // namespace sluice::http
