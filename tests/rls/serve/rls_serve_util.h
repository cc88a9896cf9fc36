// Helpers of the tests that run the real `sluice serve` with `grpc:` and
// `rls:`: requests, a blocking gRPC client from our proto, a folder of
// descriptor files, the gRPC port from the startup log, the wall clock.
#pragma once

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "sluice_process.h"

namespace sluice::test {

namespace pb = ::envoy::service::ratelimit::v3;
using Code = pb::RateLimitResponse::Code;
constexpr Code OK = pb::RateLimitResponse::OK;
constexpr Code OVER = pb::RateLimitResponse::OVER_LIMIT;
constexpr int64_t kNsPerSecond = 1'000'000'000;

using Entries = std::vector<std::pair<std::string, std::string>>;

inline pb::RateLimitRequest request(const std::string& domain,
                                    const std::vector<Entries>& descriptors) {
  pb::RateLimitRequest r;
  r.set_domain(domain);
  for (const Entries& entries : descriptors) {
    auto* d = r.add_descriptors();
    for (const auto& [k, v] : entries) {
      auto* e = d->add_entries();
      e->set_key(k);
      e->set_value(v);
    }
  }
  return r;
}

inline int64_t wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Makes sure at least `needed` seconds of the current UTC hour are left.
inline void ensure_hour_left(int64_t needed) {
  const int64_t left = 3600 - (wall_ns() / kNsPerSecond) % 3600;
  if (left <= needed) std::this_thread::sleep_for(std::chrono::seconds(left + 1));
}

inline void write_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
  }
  std::rename(tmp.c_str(), path.c_str());
}

// A folder of descriptor files, removed with them.
class DescriptorDir {
 public:
  DescriptorDir() : dir_(make_temp_dir()) {}
  ~DescriptorDir() { remove_dir(dir_); }
  const std::string& path() const { return dir_; }
  std::string file(const std::string& name) const { return dir_ + "/" + name; }
  void write(const std::string& name, const std::string& text) const {
    write_file(file(name), text);
  }

 private:
  std::string dir_;
};
// The port in the server's "grpc on HOST:PORT (" log line; 0 if absent.
inline int grpc_port(const std::string& log) {
  const size_t at = log.find("grpc on ");
  if (at == std::string::npos) return 0;
  const size_t end = log.find(" (", at);
  const std::string address = log.substr(at + 8, end - at - 8);
  return std::atoi(address.c_str() + address.rfind(':') + 1);
}

class RlsClient {
 public:
  explicit RlsClient(int port)
      : stub_(pb::RateLimitService::NewStub(grpc::CreateChannel(
            "127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()))) {}

  grpc::Status call(const pb::RateLimitRequest& r, pb::RateLimitResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return stub_->ShouldRateLimit(&context, r, response);
  }

  pb::RateLimitResponse call(const pb::RateLimitRequest& r) {
    pb::RateLimitResponse response;
    const grpc::Status status = call(r, &response);
    EXPECT_TRUE(status.ok()) << status.error_code() << ": " << status.error_message();
    return response;
  }

 private:
  std::unique_ptr<pb::RateLimitService::Stub> stub_;
};

}  // namespace sluice::test
