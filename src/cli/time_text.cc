#include "cli/time_text.h"

#include <cstdint>
#include <cstdio>

namespace sluice::cli {
namespace {

struct Unit {
  std::string_view suffix;
  int64_t ns;
};

constexpr Unit kParseUnits[] = {
    {"ms", 1'000'000},        {"s", 1'000'000'000},      {"m", 60'000'000'000},
    {"h", 3'600'000'000'000}, {"d", 86'400'000'000'000},
};

constexpr Unit kFormatUnits[] = {
    {"d", 86'400'000'000'000}, {"h", 3'600'000'000'000}, {"m", 60'000'000'000},
    {"s", 1'000'000'000},      {"ms", 1'000'000},        {"us", 1'000},
};

constexpr int64_t kNanosPerSecond = 1'000'000'000;
constexpr int64_t kSecondsPerDay = 86'400;

}  // namespace

std::optional<Nanos> parse_duration(std::string_view text) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  // 18 digits always fit 64 bits; the product with the unit is checked below.
  if (digits == 0 || digits > 18) return std::nullopt;
  const std::string_view suffix = text.substr(digits);
  for (const Unit& unit : kParseUnits) {
    if (suffix != unit.suffix) continue;
    int64_t value = 0;
    for (size_t i = 0; i < digits; ++i) value = value * 10 + (text[i] - '0');
    if (value == 0 || value > INT64_MAX / unit.ns) return std::nullopt;
    return Nanos{value * unit.ns};
  }
  return std::nullopt;
}

std::string format_duration(Nanos d) {
  const int64_t ns = d.count();
  if (ns == 0) return "0s";
  for (const Unit& unit : kFormatUnits) {
    if (ns % unit.ns == 0) return std::to_string(ns / unit.ns) + std::string(unit.suffix);
  }
  // Not a whole number of any unit: the largest unit it reaches, with three
  // decimals rounded down ("8.333ms", "5.714h"); below a microsecond, "50ns".
  for (const Unit& unit : kFormatUnits) {
    if (ns < unit.ns) continue;
    const int64_t thousandths =
        static_cast<int64_t>(static_cast<__int128>(ns % unit.ns) * 1000 / unit.ns);
    char text[48];
    std::snprintf(text, sizeof text, "%lld.%03lld%s", static_cast<long long>(ns / unit.ns),
                  static_cast<long long>(thousandths), std::string(unit.suffix).c_str());
    return text;
  }
  return std::to_string(ns) + "ns";
}

std::string format_time_of_day(Nanos t) {
  int64_t seconds = t.count() / kNanosPerSecond;
  int64_t sub_ns = t.count() % kNanosPerSecond;
  if (sub_ns < 0) {  // before the epoch: keep the time of day positive
    sub_ns += kNanosPerSecond;
    --seconds;
  }
  int64_t of_day = seconds % kSecondsPerDay;
  if (of_day < 0) of_day += kSecondsPerDay;
  char text[32];
  int n = std::snprintf(
      text, sizeof text, "%02lld:%02lld:%02lld", static_cast<long long>(of_day / 3600),
      static_cast<long long>(of_day / 60 % 60), static_cast<long long>(of_day % 60));
  if (sub_ns != 0) {
    std::snprintf(text + n, sizeof text - static_cast<size_t>(n), ".%03lld",
                  static_cast<long long>(sub_ns / 1'000'000));
  }
  return text;
}

}  // namespace sluice::cli
