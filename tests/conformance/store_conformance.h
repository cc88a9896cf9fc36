// The store conformance table: traces of requests (times, keys, costs,
// limits, several limits in one all-or-nothing request, resets, errors) and
// the decisions every Store must give, written once (store_conformance.cc)
// and run on every store through the Store interface only.
//
// A binary adds its stores with SLUICE_STORE_CONFORMANCE(prefix, rows...):
// the unit tests run the memory store (tests/unit/store_conformance_test.cc),
// the Redis tests a redis-server and a 3-master Redis Cluster
// (tests/redis/store_conformance_test.cc). Every test makes a fresh store.
//
// Times in the table are whole microseconds, the resolution a Redis store
// computes in, so a Redis store given them as `now` (RedisTimeSource::kLocal)
// decides exactly as the memory store. The durations a decision reports are
// the memory store's exact nanoseconds; a store with a coarser resolution
// reports them rounded up to it (Redis: to a whole microsecond).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "sluice/sluice.h"

namespace sluice::conformance {

// A store under test.
struct StoreRow {
  const char* name;
  // A fresh, empty store, or null with a test failure (or skip) recorded.
  std::function<std::shared_ptr<Store>()> make;
  // The store reports durations rounded up to a multiple of this.
  Nanos resolution{1};
  // Its fixed windows keep a count per window (the Redis store), not one
  // state per key: time that runs back into an earlier window counts there.
  bool counts_per_window = false;
  // It decides a request's limits on one client's hash slot only (a Redis
  // Cluster): scenarios whose requests charge several clients are skipped.
  bool one_client_per_request = false;
};

inline void PrintTo(const StoreRow& row, std::ostream* os) {
  *os << row.name;
}

// One trace of the table and its expected decisions (store_conformance.cc).
struct Scenario;
void PrintTo(const Scenario* scenario, std::ostream* os);
const std::vector<const Scenario*>& scenarios();
std::string name_of(const Scenario* scenario);

// Each scenario of the table on a fresh store of each row.
class StoreTable : public ::testing::TestWithParam<std::tuple<StoreRow, const Scenario*>> {
 protected:
  void SetUp() override;
  std::shared_ptr<Store> store_;
};

// What the table cannot hold (malformed calls), on each row.
class StoreConformance : public ::testing::TestWithParam<StoreRow> {
 protected:
  void SetUp() override;
  std::shared_ptr<Store> store_;
};

}  // namespace sluice::conformance

// Runs the table and the other conformance tests on `rows` (a
// ::testing::Values(...) of StoreRow): test names are
// <prefix>/StoreTable.DecidesAsTheTableSays/<row>_<scenario> and
// <prefix>/StoreConformance.<test>/<row>.
#define SLUICE_STORE_CONFORMANCE(prefix, rows)                                                  \
  INSTANTIATE_TEST_SUITE_P(                                                                     \
      prefix, StoreTable,                                                                       \
      ::testing::Combine(rows, ::testing::ValuesIn(::sluice::conformance::scenarios())),        \
      [](const ::testing::TestParamInfo<StoreTable::ParamType>& info) {                         \
        return std::string(std::get<0>(info.param).name) + "_" +                                \
               ::sluice::conformance::name_of(std::get<1>(info.param));                         \
      });                                                                                       \
  INSTANTIATE_TEST_SUITE_P(prefix, StoreConformance, rows,                                      \
                           [](const ::testing::TestParamInfo<StoreConformance::ParamType>& i) { \
                             return std::string(i.param.name);                                  \
                           })
