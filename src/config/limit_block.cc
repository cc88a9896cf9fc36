#include "config/limit_block.h"

#include <iterator>
#include <string>
#include <utility>

#include "config/block_spec.h"

namespace sluice::config {

const Keys kAlgorithmNames = {"token_bucket", "gcra",           "fixed_window",
                              "sliding_log",  "sliding_window", "concurrency"};
const Keys kLimitKeys = {"algorithm", "capacity", "refill_rate", "limit",
                         "window",    "max",      "lease",       "block"};

LimitBlock LimitBlock::of(const Mapping& m) {
  return LimitBlock{m.get("algorithm"), m.get("capacity"), m.get("refill_rate"), m.get("limit"),
                    m.get("window"),    m.get("max"),      m.get("lease"),       m.get("block")};
}

namespace {

// The two fields each family of algorithms is written with.
struct FieldPair {
  const char* a;
  const char* b;
  const char* users;  // the algorithms that take them
};
constexpr FieldPair kBucketFields{"capacity", "refill_rate", "token_bucket and gcra"};
constexpr FieldPair kWindowFields{"limit", "window",
                                  "fixed_window, sliding_log and sliding_window"};
constexpr FieldPair kConcurrencyFields{"max", "lease", "concurrency"};

const FieldPair& fields_of(Algorithm a) {
  if (a == Algorithm::kTokenBucket || a == Algorithm::kGcra) return kBucketFields;
  if (a == Algorithm::kConcurrency) return kConcurrencyFields;
  return kWindowFields;
}

}  // namespace

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
  const bool concurrency = spec.algorithm == Algorithm::kConcurrency;
  const std::string name(algorithm_name(spec.algorithm));
  const std::string or_else =
      alternative.empty() ? std::string() : " (or " + std::string(alternative) + ")";
  const FieldPair& own = fields_of(spec.algorithm);
  const std::pair<const Item*, const FieldPair*> written[] = {
      {block.capacity, &kBucketFields}, {block.refill_rate, &kBucketFields},
      {block.limit, &kWindowFields},    {block.window, &kWindowFields},
      {block.max, &kConcurrencyFields}, {block.lease, &kConcurrencyFields}};
  const char* names[] = {"capacity", "refill_rate", "limit", "window", "max", "lease"};
  for (size_t i = 0; i < std::size(written); ++i) {
    const auto& [item, family] = written[i];
    if (item != nullptr && family != &own && ok) {
      walker.error(*item, name + " takes " + own.a + " and " + own.b + or_else + ", not " +
                              names[i] + " (" + family->a + " and " + family->b + " are for " +
                              family->users + ")");
      ok = false;
    }
  }
  const Item* own_a = bucket ? block.capacity : concurrency ? block.max : block.limit;
  const Item* own_b = bucket ? block.refill_rate : concurrency ? block.lease : block.window;
  for (const auto& [item, key] : {std::pair{own_a, own.a}, std::pair{own_b, own.b}}) {
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
    if (v && !bucket && !concurrency) spec.limit = *v;
  }
  if (block.window != nullptr) {
    const std::optional<Nanos> d = walker.duration(*block.window, false);
    ok = d.has_value() && ok;
    if (d && !bucket && !concurrency) spec.window = *d;
  }
  if (block.max != nullptr) {
    const std::optional<uint64_t> v = walker.count(*block.max);
    ok = v.has_value() && ok;
    if (v && concurrency) spec.limit = *v;
  }
  if (block.lease != nullptr) {
    const std::optional<Nanos> d = walker.duration(*block.lease, false);
    ok = d.has_value() && ok;
    if (d && concurrency) spec.window = *d;
  }
  if (block.block != nullptr) ok = read_block(walker, *block.block, &spec) && ok;
  if (!ok) return std::nullopt;
  return create_limit(walker, where, spec);
}

}  // namespace sluice::config
