// A policy::HeaderSource over the fields of a Beast request, so the policy
// can read client keys and forwarding headers without knowing Beast.
//
// Thread-safety: as the fields it reads; it holds only a reference.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <boost/beast/http/fields.hpp>

#include "policy/request.h"

namespace sluice::http {

class BeastHeaders final : public policy::HeaderSource {
 public:
  explicit BeastHeaders(const boost::beast::http::fields& fields) : fields_(fields) {}

  std::optional<std::string_view> get(std::string_view name) const override;
  std::string get_all(std::string_view name) const override;

 private:
  const boost::beast::http::fields& fields_;
};

}  // namespace sluice::http
