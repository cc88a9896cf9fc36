#include "simulate/time_text.h"

#include <cstdint>
#include <cstdio>

namespace sluice::simulate {
namespace {

struct Unit {
  std::string_view suffix;
  int64_t ns;
};

constexpr Unit kFormatUnits[] = {
    {"d", 86'400'000'000'000}, {"h", 3'600'000'000'000}, {"m", 60'000'000'000},
    {"s", 1'000'000'000},      {"ms", 1'000'000},        {"us", 1'000},
};

constexpr int64_t kNanosPerSecond = 1'000'000'000;
constexpr int64_t kSecondsPerDay = 86'400;

}  // namespace

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

}  // namespace sluice::simulate
