// The limit block: the one parser of
//
//   {algorithm: token_bucket | gcra, capacity: N, refill_rate: RATE}
//   {algorithm: fixed_window | sliding_log | sliding_window, limit: N, window: DURATION}
//   {algorithm: concurrency, max: N, lease: DURATION}
//
// either with `block: DURATION` (a lockout once the limit denies) or a
// lockout that grows, `block: {first, factor, max, forget_after}`
// (config/block_spec.h),
// wherever a config writes one: the server config's policies and routes,
// and the `rate_limit` extension of the Envoy RLS descriptor files. It
// produces a validated Limit (Limit::create) or reports, through the walker,
// what is wrong at the field it concerns.
//
// Thread-safety: pure functions over the walker they are given.
#pragma once

#include <optional>
#include <string_view>

#include "config/walker.h"
#include "sluice/limit.h"

namespace sluice::config {

// token_bucket, gcra, fixed_window, sliding_log, sliding_window, concurrency.
extern const Keys kAlgorithmNames;
// algorithm, capacity, refill_rate, limit, window, max, lease, block.
extern const Keys kLimitKeys;

// The fields of a limit block as written; nullptr where absent.
struct LimitBlock {
  const Item* algorithm = nullptr;
  const Item* capacity = nullptr;
  const Item* refill_rate = nullptr;
  const Item* limit = nullptr;
  const Item* window = nullptr;
  const Item* max = nullptr;
  const Item* lease = nullptr;
  const Item* block = nullptr;

  static LimitBlock of(const Mapping& m);
  bool has_own_fields() const {
    return capacity != nullptr || refill_rate != nullptr || limit != nullptr || window != nullptr ||
           max != nullptr || lease != nullptr;
  }
};

// The algorithm `block` names (token_bucket when it names none), or nullopt
// after reporting an unknown name.
std::optional<Algorithm> read_algorithm(Walker& walker, const LimitBlock& block);

// The limit `block` describes, token_bucket when no algorithm is named.
// `where` is the block itself (a missing field is reported there).
// `alternative`, when not empty, is how else the format lets the size and
// period be written, added to the messages about them (RLS:
// "`requests_per_unit` and `unit`").
std::optional<Limit> read_limit(Walker& walker, const Item& where, const LimitBlock& block,
                                std::string_view alternative = {});

// Limit::create(spec), its error reported at `where`.
std::optional<Limit> create_limit(Walker& walker, const Item& where, const LimitSpec& spec);

}  // namespace sluice::config
