#include "policy/route_cost.h"

namespace sluice::policy {

std::optional<std::vector<std::string>> parse_json_path(std::string_view text) {
  std::vector<std::string> names;
  size_t start = 0;
  while (true) {
    const size_t dot = text.find('.', start);
    const std::string_view name =
        text.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (name.empty() || names.size() == kMaxJsonPathNames) return std::nullopt;
    for (const char c : name) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '_' || c == '-';
      if (!ok) return std::nullopt;
    }
    names.emplace_back(name);
    if (dot == std::string_view::npos) return names;
    start = dot + 1;
  }
}

}  // namespace sluice::policy
