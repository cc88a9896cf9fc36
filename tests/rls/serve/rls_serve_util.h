// Helpers of the tests that run the real `sluice serve` with `grpc:` and
// `rls:`: requests, a blocking gRPC client from our proto, a folder of
// descriptor files, the gRPC port from the startup log, the wall clock and
// the fixed windows aligned to it.
#pragma once

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
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

// Envoy's fixed windows (an hour, a day) are aligned to the wall clock, which
// the binary reads, so a test may run across the end of one. Rather than
// wait for a fresh window, the tests work out what each call must get from
// the window the server decided it in.

// The index since the epoch of the window of `unit_seconds` in which the
// server decided a call made between `before` and `after` (wall-clock ns),
// given the call's duration_until_reset. Only a call that spans the end of a
// window needs the latter: decided before the end it is at most the seconds
// left then, after it nearly a whole window.
inline int64_t decision_window(int64_t before, int64_t after, int64_t unit_seconds,
                               int64_t reset_seconds) {
  const int64_t unit = unit_seconds * kNsPerSecond;
  const int64_t first = before / unit;
  if (after / unit == first) return first;
  return reset_seconds <= unit_seconds / 2 ? first : first + 1;
}

// One descriptor's counter in fixed windows, as the server keeps it: in each
// window the first `per_unit` calls are within the limit (each leaving one
// less), the rest over it.
class WindowCounter {
 public:
  struct Expected {
    Code code;
    uint32_t remaining;
  };

  WindowCounter(uint32_t per_unit, int64_t unit_seconds)
      : per_unit_(per_unit), unit_seconds_(unit_seconds) {}

  uint32_t per_unit() const { return per_unit_; }
  int64_t unit_seconds() const { return unit_seconds_; }
  // What the server must answer for one more call decided in `window`; counts it.
  Expected count(int64_t window) {
    if (window != window_) {
      window_ = window;
      used_ = 0;
    }
    if (used_ < per_unit_) {
      ++used_;
      ++within_;
      return {OK, per_unit_ - used_};
    }
    ++over_;
    return {OVER, 0};
  }
  // The calls counted so far within the limit and over it.
  int within() const { return within_; }
  int over() const { return over_; }

 private:
  const uint32_t per_unit_;
  const int64_t unit_seconds_;
  int64_t window_ = -1;
  uint32_t used_ = 0;
  int within_ = 0;
  int over_ = 0;
};

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

// A plaintext channel to the gRPC port on 127.0.0.1. `own_connection`: a
// connection of its own, not shared with other channels to the port (each
// then needs an accept of its own).
inline std::shared_ptr<grpc::Channel> channel_to(int port, bool own_connection = false) {
  grpc::ChannelArguments args;
  if (own_connection) args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                   grpc::InsecureChannelCredentials(), args);
}

inline grpc::ByteBuffer bytes_buffer(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

inline std::string buffer_bytes(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!buffer.Dump(&slices).ok()) return out;
  for (const grpc::Slice& s : slices)
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

// Waits for the one operation started on `cq`; whether it succeeded.
inline bool next_ok(grpc::CompletionQueue& cq) {
  void* tag = nullptr;
  bool ok = false;
  return cq.Next(&tag, &ok) && ok;
}

// A HealthCheckResponse saying SERVING (field 1 = 1).
inline const std::string kServing("\x08\x01", 2);

// grpc.health.v1.Health/Check for the whole server (an empty request; Debian
// ships no stubs for it); the response's bytes in `response`.
inline grpc::Status health_check(const std::shared_ptr<grpc::Channel>& channel,
                                 std::chrono::milliseconds timeout, std::string* response) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + timeout);
  grpc::CompletionQueue cq;
  auto call =
      stub.PrepareUnaryCall(&context, "/grpc.health.v1.Health/Check", bytes_buffer(""), &cq);
  call->StartCall();
  grpc::ByteBuffer bytes;
  grpc::Status status;
  call->Finish(&bytes, &status, nullptr);
  if (!next_ok(cq)) return grpc::Status(grpc::StatusCode::UNKNOWN, "the call did not complete");
  *response = buffer_bytes(bytes);
  return status;
}

class RlsClient {
 public:
  explicit RlsClient(int port, bool own_connection = false)
      : stub_(pb::RateLimitService::NewStub(channel_to(port, own_connection))) {}

  grpc::Status call(const pb::RateLimitRequest& r, pb::RateLimitResponse* response,
                    std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + timeout);
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
