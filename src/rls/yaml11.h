// YAML 1.1 scalars, as envoyproxy/ratelimit's Go YAML library reads them,
// for descriptor files: `yes`/`on`/`off` are booleans, `0x1F`, `0o17`, `017`
// and `0b11` integers, `1.5` and `.inf` floats (which envoyproxy/ratelimit
// refuses). The thin layer the RLS loader puts on config/walker.h, whose own
// scalars follow the server config's stricter grammar.
//
// Thread-safety: pure functions.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string_view>

namespace google::protobuf {
class Value;
}

namespace sluice::rls {

enum class ScalarKind { kNull, kBool, kInt, kFloat, kString };

// The kind of a node's scalar under YAML 1.1's resolution (explicit tags
// and quoting respected: a quoted scalar is a string).
ScalarKind resolve_scalar(const YAML::Node& node);

// 1 for a YAML 1.1 true, 0 for false, -1 for neither.
int yaml11_bool(std::string_view text);

struct Yaml11Int {
  bool negative = false;
  uint64_t magnitude = 0;
};
// Decimal, 0x hex, 0o or leading-0 octal and 0b binary, '_' allowed (as Go's
// ParseInt with base 0 after removing '_'). False when `text` is not one.
bool parse_yaml11_int(std::string_view text, Yaml11Int* out);

// A node as a protobuf Value (maps to structs, lists to lists, scalars by
// their YAML 1.1 kind): descriptor `metadata` sent back to Envoy.
void to_protobuf_value(const YAML::Node& node, google::protobuf::Value* out);

}  // namespace sluice::rls
