// Numbers for the scripts, packed into one argument: each a little-endian
// IEEE 754 double, as Lua's struct.unpack('<d') reads it (entry.lua,
// fast_fixed_window.lua). A script then reads a request's numbers with one
// C call, where an argument per number cost Redis a Lua string to make and
// a tonumber() (strtod) to read. Every number packed is an integer whose
// magnitude is below 2^53 (microsecond times, counts, costs, indices), which
// a double holds exactly.
//
// Thread-safety: a pure function.
#pragma once

#include <bit>
#include <cstdint>
#include <string>

namespace sluice::redis {

inline void append_packed(std::string& out, int64_t value) {
  uint64_t bits = std::bit_cast<uint64_t>(static_cast<double>(value));
  char bytes[8];
  for (char& byte : bytes) {
    byte = static_cast<char>(bits & 0xff);
    bits >>= 8;
  }
  out.append(bytes, sizeof bytes);
}

}  // namespace sluice::redis
