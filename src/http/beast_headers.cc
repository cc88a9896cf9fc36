#include "http/beast_headers.h"

namespace sluice::http {

std::optional<std::string_view> BeastHeaders::get(std::string_view name) const {
  auto it = fields_.find(boost::beast::string_view(name.data(), name.size()));
  if (it == fields_.end()) return std::nullopt;
  const boost::beast::string_view v = it->value();
  return std::string_view(v.data(), v.size());
}

std::string BeastHeaders::get_all(std::string_view name) const {
  std::string out;
  auto [first, last] = fields_.equal_range(boost::beast::string_view(name.data(), name.size()));
  for (auto it = first; it != last; ++it) {
    if (!out.empty()) out += ", ";
    const boost::beast::string_view v = it->value();
    out.append(v.data(), v.size());
  }
  return out;
}

}  // namespace sluice::http
