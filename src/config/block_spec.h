// The `block:` of a limit block: the one parser of
//
//   block: 30m                                               a lockout of 30m after each denial
//   block: {first: 1m, factor: 2, max: 1d, forget_after: 1d} a lockout that grows
//
// A growing lockout's first block lasts `first`; each block that starts
// before `forget_after` has passed since the key's last block ended lasts
// `factor` times that one, at most `max` (LimitSpec::block_factor). Every
// field is required; factor is a whole number from 1 to 1000 (1: every block
// lasts `first`, as `block: first` does).
//
// Thread-safety: pure functions over the walker they are given.
#pragma once

#include "config/walker.h"
#include "sluice/limit.h"

namespace sluice::config {

// first, factor, max, forget_after.
extern const Keys kBlockKeys;

// Reads `item` into spec->block and the growth fields; false after
// reporting what is wrong at the field it concerns.
bool read_block(Walker& walker, const Item& item, LimitSpec* spec);

}  // namespace sluice::config
