// Uses the installed Redis store without a Redis server: the functions called
// pull in the store's whole object graph (hiredis, spdlog, the address
// grammar of libsluice_config_values), so this links only if the installed
// package names everything the store needs.
#include <chrono>
#include <cstdio>
#include <string>

#include "sluice/redis_store.h"
#include "sluice/sluice.h"

int main() {
  sluice::RedisStoreOptions options;
  options.addresses = {"127.0.0.1:port"};
  auto store = sluice::RedisStore::create(options);
  // The address grammar (libsluice_config_values) refuses it; its wording is
  // its own tests' business.
  const bool refused = !store.ok() && store.error().code == sluice::ErrorCode::kInvalidArgument &&
                       store.error().message.find("\"127.0.0.1:port\"") != std::string::npos;
  std::printf("create: %s\n", refused ? "address refused" : "unexpected result");

  using namespace std::chrono_literals;
  auto small = sluice::Limit::token_bucket(100, 10, 1s);
  // Valid in memory, but 2 * capacity * 3.6e9 us passes 2^53: not exact in Redis Lua.
  auto huge = sluice::Limit::token_bucket(1'270'000, 1, 1h);
  if (!small.ok() || !huge.ok()) return 1;
  const sluice::Status fits = sluice::RedisStore::limit_fits(*small);
  const sluice::Status too_big = sluice::RedisStore::limit_fits(*huge);
  std::printf("small limit: %s\n", fits.ok() ? "fits" : fits.error().message.c_str());
  std::printf("huge limit: %s\n", too_big.ok() ? "fits" : "does not fit");
  std::printf("slot of foo: %u\n", static_cast<unsigned>(sluice::RedisStore::key_slot("foo")));
  return 0;
}
