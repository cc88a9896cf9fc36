#include "config/limit_block.h"

#include <string>

namespace sluice::config {

const Keys kAlgorithmNames = {"token_bucket", "gcra", "fixed_window", "sliding_log",
                              "sliding_window"};
const Keys kLimitKeys = {"algorithm", "capacity", "refill_rate", "limit", "window", "block"};

LimitBlock LimitBlock::of(const Mapping& m) {
  return LimitBlock{m.get("algorithm"), m.get("capacity"), m.get("refill_rate"),
                    m.get("limit"),     m.get("window"),   m.get("block")};
}

std::optional<Algorithm> read_algorithm(Walker& walker, const LimitBlock& block) {
  Algorithm algorithm = Algorithm::kTokenBucket;
  if (block.algorithm == nullptr) return algorithm;
  const std::optional<size_t> c = walker.choice(*block.algorithm, kAlgorithmNames);
  if (!c || !parse_algorithm(kAlgorithmNames[*c], &algorithm)) return std::nullopt;
  return algorithm;
}

std::optional<Limit> create_limit(Walker& walker, const Item& where, const LimitSpec& spec) {
  Result<Limit> created = Limit::create(spec);
  if (!created.ok()) {
    walker.error(where, created.error().message);
    return std::nullopt;
  }
  return *created;
}

std::optional<Limit> read_limit(Walker& walker, const Item& where, const LimitBlock& block,
                                std::string_view alternative) {
  const std::optional<Algorithm> algorithm = read_algorithm(walker, block);
  bool ok = algorithm.has_value();
  LimitSpec spec;
  if (algorithm) spec.algorithm = *algorithm;
  const bool bucket =
      spec.algorithm == Algorithm::kTokenBucket || spec.algorithm == Algorithm::kGcra;
  const std::string name(algorithm_name(spec.algorithm));
  const std::string or_else =
      alternative.empty() ? std::string() : " (or " + std::string(alternative) + ")";
  const Item* own_a = bucket ? block.capacity : block.limit;
  const Item* own_b = bucket ? block.refill_rate : block.window;
  const char* own_a_name = bucket ? "capacity" : "limit";
  const char* own_b_name = bucket ? "refill_rate" : "window";
  const std::pair<const Item*, const char*> foreign[] = {
      {bucket ? block.limit : block.capacity, bucket ? "limit" : "capacity"},
      {bucket ? block.window : block.refill_rate, bucket ? "window" : "refill_rate"}};
  for (const auto& [item, key] : foreign) {
    if (item != nullptr && ok) {
      walker.error(*item,
                   name + " takes " + own_a_name + " and " + own_b_name + or_else + ", not " + key +
                       (bucket ? " (limit and window are for fixed_window, sliding_log and "
                                 "sliding_window)"
                               : " (capacity and refill_rate are for token_bucket and gcra)"));
      ok = false;
    }
  }
  for (const auto& [item, key] : {std::pair{own_a, own_a_name}, std::pair{own_b, own_b_name}}) {
    if (item == nullptr && ok) {
      walker.error(where, name + " needs `" + key + "`" + or_else);
      ok = false;
    }
  }
  // The fields are parsed even after an error, so that each reports its own.
  if (block.capacity != nullptr) {
    const std::optional<uint64_t> v = walker.count(*block.capacity);
    ok = v.has_value() && ok;
    if (v && bucket) spec.capacity = *v;
  }
  if (block.refill_rate != nullptr) {
    const std::optional<Rate> rate =
        walker.parsed<Rate>(*block.refill_rate, "a rate like 10/s", parse_rate);
    ok = rate.has_value() && ok;
    if (rate && bucket) {
      spec.refill_tokens = rate->tokens;
      spec.refill_period = rate->period;
    }
  }
  if (block.limit != nullptr) {
    const std::optional<uint64_t> v = walker.count(*block.limit);
    ok = v.has_value() && ok;
    if (v && !bucket) spec.limit = *v;
  }
  if (block.window != nullptr) {
    const std::optional<Nanos> d = walker.duration(*block.window, false);
    ok = d.has_value() && ok;
    if (d && !bucket) spec.window = *d;
  }
  if (block.block != nullptr) {
    const std::optional<Nanos> d = walker.duration(*block.block, false);
    ok = d.has_value() && ok;
    if (d) spec.block = *d;
  }
  if (!ok) return std::nullopt;
  return create_limit(walker, where, spec);
}

}  // namespace sluice::config
