#include "cli/simulate.h"

#include <cstdio>

namespace sluice::cli {

int run_simulate(std::span<const std::string_view>) {
  std::fprintf(stderr, "sluice simulate: not built yet\n");
  return 2;
}

}  // namespace sluice::cli
