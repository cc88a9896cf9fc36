// `sluice rls query`: one ShouldRateLimit call to an Envoy RLS v3 server
// (`sluice serve`'s grpc port, or envoyproxy/ratelimit), its answer printed
// for people: the RLS tried without an Envoy in front.
#pragma once

#include <span>
#include <string_view>

namespace sluice::cli {

// argv after "rls" (starting with "query"). Returns 0 when the answer is OK,
// 2 when it is OVER_LIMIT, 1 on any error (bad arguments, no server within
// the timeout, a gRPC error).
int run_rls(std::span<const std::string_view> args);

}  // namespace sluice::cli
