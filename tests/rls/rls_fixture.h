// An RLS service on 127.0.0.1 (port picked by gRPC) with a memory store and a
// manual clock, and a real gRPC client generated from our proto.
#pragma once

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "rls/config_loader.h"
#include "rls/grpc_server.h"
#include "rls/service.h"
#include "sluice/clock.h"
#include "sluice/memory_store.h"

namespace sluice::rls::testing {

namespace pb = ::envoy::service::ratelimit::v3;
namespace common = ::envoy::extensions::common::ratelimit::v3;
using Code = pb::RateLimitResponse::Code;
using PbUnit = pb::RateLimitResponse::RateLimit::Unit;
constexpr Code OK = pb::RateLimitResponse::OK;
constexpr Code OVER = pb::RateLimitResponse::OVER_LIMIT;

// Midnight UTC, 2023-11-14: aligned to every unit up to a day.
constexpr Nanos kT0 = std::chrono::seconds(1'699'920'000);

using Entries = std::vector<std::pair<std::string, std::string>>;

inline pb::RateLimitRequest request(const std::string& domain,
                                    const std::vector<Entries>& descriptors,
                                    uint32_t hits_addend = 0) {
  pb::RateLimitRequest r;
  r.set_domain(domain);
  for (const Entries& entries : descriptors) {
    common::RateLimitDescriptor* d = r.add_descriptors();
    for (const auto& [k, v] : entries) {
      auto* e = d->add_entries();
      e->set_key(k);
      e->set_value(v);
    }
  }
  if (hits_addend != 0) r.set_hits_addend(hits_addend);
  return r;
}

inline MemoryStoreOptions test_store_options() {
  MemoryStoreOptions o;
  o.seed = 42;
  return o;
}

class RlsHarness {
 public:
  explicit RlsHarness(std::shared_ptr<const RlsConfig> config, RlsOptions options = {})
      : clock(kT0), store(test_store_options()), service(store, clock, std::move(config), options) {
    grpc::Service* services[] = {&service};
    Result<std::unique_ptr<GrpcServer>> started = GrpcServer::start("127.0.0.1:0", services);
    EXPECT_TRUE(started.ok()) << (started.ok() ? "" : started.error().message);
    if (started.ok()) server = std::move(started).value();
    channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(server ? server->port() : 0),
                                  grpc::InsecureChannelCredentials());
    stub = pb::RateLimitService::NewStub(channel);
  }

  // One ShouldRateLimit call; the test fails on a gRPC error.
  pb::RateLimitResponse call(const pb::RateLimitRequest& r) {
    pb::RateLimitResponse response;
    grpc::Status status = call_status(r, &response);
    EXPECT_TRUE(status.ok()) << status.error_code() << ": " << status.error_message();
    return response;
  }

  grpc::Status call_status(const pb::RateLimitRequest& r, pb::RateLimitResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return stub->ShouldRateLimit(&context, r, response);
  }

  // The overall codes of `n` identical calls.
  std::vector<Code> codes(const pb::RateLimitRequest& r, int n) {
    std::vector<Code> out;
    for (int i = 0; i < n; ++i) out.push_back(call(r).overall_code());
    return out;
  }

  // How many of `n` identical calls were allowed.
  int allowed(const pb::RateLimitRequest& r, int n) {
    int ok = 0;
    for (Code c : codes(r, n)) ok += c == OK ? 1 : 0;
    return ok;
  }

  ManualClock clock;
  MemoryStore store;
  RlsService service;
  std::unique_ptr<GrpcServer> server;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::RateLimitService::Stub> stub;
};

}  // namespace sluice::rls::testing
