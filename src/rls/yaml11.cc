#include "rls/yaml11.h"

#include <google/protobuf/struct.pb.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <limits>
#include <string>

namespace sluice::rls {
namespace {

bool digits_in_base(std::string_view s, int base, uint64_t* out) {
  if (s.empty()) return false;
  uint64_t v = 0;
  for (char c : s) {
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      d = c - 'A' + 10;
    } else {
      return false;
    }
    if (d >= base) return false;
    const uint64_t ub = static_cast<uint64_t>(base);
    if (v > (std::numeric_limits<uint64_t>::max() - static_cast<uint64_t>(d)) / ub) return false;
    v = v * ub + static_cast<uint64_t>(d);
  }
  *out = v;
  return true;
}

}  // namespace

bool parse_yaml11_int(std::string_view text, Yaml11Int* out) {
  std::string s;
  for (char c : text) {
    if (c != '_') s.push_back(c);
  }
  std::string_view v = s;
  Yaml11Int value;
  if (!v.empty() && (v[0] == '+' || v[0] == '-')) {
    value.negative = v[0] == '-';
    v.remove_prefix(1);
  }
  bool ok;
  if (v.size() > 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'X')) {
    ok = digits_in_base(v.substr(2), 16, &value.magnitude);
  } else if (v.size() > 2 && v[0] == '0' && (v[1] == 'o' || v[1] == 'O')) {
    ok = digits_in_base(v.substr(2), 8, &value.magnitude);
  } else if (v.size() > 2 && v[0] == '0' && (v[1] == 'b' || v[1] == 'B')) {
    ok = digits_in_base(v.substr(2), 2, &value.magnitude);
  } else if (v.size() > 1 && v[0] == '0') {
    ok = digits_in_base(v.substr(1), 8, &value.magnitude);
  } else {
    ok = digits_in_base(v, 10, &value.magnitude);
  }
  if (ok && out != nullptr) *out = value;
  return ok;
}

namespace {

// [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? and the .inf/.nan forms.
bool is_float_text(std::string_view s) {
  static constexpr std::array<std::string_view, 12> kSpecial = {".inf",  ".Inf",  ".INF",  "+.inf",
                                                                "+.Inf", "+.INF", "-.inf", "-.Inf",
                                                                "-.INF", ".nan",  ".NaN",  ".NAN"};
  if (std::find(kSpecial.begin(), kSpecial.end(), s) != kSpecial.end()) return true;
  size_t i = 0;
  auto digits = [&] {
    const size_t start = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    return i - start;
  };
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (digits() == 0) return false;
  } else {
    if (digits() == 0) return false;
    if (i < s.size() && s[i] == '.') {
      ++i;
      digits();
    }
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (digits() == 0) return false;
  }
  return i == s.size();
}

}  // namespace

int yaml11_bool(std::string_view s) {
  static constexpr std::array<std::string_view, 11> kTrue = {
      "y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"};
  static constexpr std::array<std::string_view, 11> kFalse = {
      "n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"};
  if (std::find(kTrue.begin(), kTrue.end(), s) != kTrue.end()) return 1;
  if (std::find(kFalse.begin(), kFalse.end(), s) != kFalse.end()) return 0;
  return -1;
}

ScalarKind resolve_scalar(const YAML::Node& n) {
  if (n.IsNull()) return ScalarKind::kNull;
  const std::string& tag = n.Tag();
  if (tag == "tag:yaml.org,2002:int") return ScalarKind::kInt;
  if (tag == "tag:yaml.org,2002:float") return ScalarKind::kFloat;
  if (tag == "tag:yaml.org,2002:bool") return ScalarKind::kBool;
  if (tag != "?") return ScalarKind::kString;  // quoted, or another explicit tag
  const std::string& s = n.Scalar();
  if (yaml11_bool(s) >= 0) return ScalarKind::kBool;
  if (parse_yaml11_int(s, nullptr)) return ScalarKind::kInt;
  if (is_float_text(s)) return ScalarKind::kFloat;
  return ScalarKind::kString;
}

void to_protobuf_value(const YAML::Node& n, google::protobuf::Value* out) {
  if (n.IsMap()) {
    google::protobuf::Struct* s = out->mutable_struct_value();
    for (auto it = n.begin(); it != n.end(); ++it) {
      to_protobuf_value(it->second, &(*s->mutable_fields())[it->first.Scalar()]);
    }
  } else if (n.IsSequence()) {
    google::protobuf::ListValue* list = out->mutable_list_value();
    for (const YAML::Node& e : n) to_protobuf_value(e, list->add_values());
  } else if (n.IsNull()) {
    out->set_null_value(google::protobuf::NULL_VALUE);
  } else {
    Yaml11Int i;
    switch (resolve_scalar(n)) {
      case ScalarKind::kBool:
        out->set_bool_value(yaml11_bool(n.Scalar()) == 1);
        break;
      case ScalarKind::kInt:
        parse_yaml11_int(n.Scalar(), &i);
        out->set_number_value(i.negative ? -static_cast<double>(i.magnitude)
                                         : static_cast<double>(i.magnitude));
        break;
      case ScalarKind::kFloat:
        out->set_number_value(std::strtod(n.Scalar().c_str(), nullptr));
        break;
      default:
        out->set_string_value(n.Scalar());
        break;
    }
  }
}

}  // namespace sluice::rls
