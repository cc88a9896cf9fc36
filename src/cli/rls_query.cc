#include "cli/rls_query.h"

#include <grpcpp/grpcpp.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "cli/args.h"
#include "config/files.h"
#include "config/values/values.h"
#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "rls/units.h"

namespace sluice::cli {
namespace {

namespace rlspb = ::envoy::service::ratelimit::v3;
using DescriptorPb = ::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;

constexpr const char* kRlsUsage =
    R"(Usage: sluice rls query --address HOST:PORT --domain DOMAIN --descriptor KEY=VALUE[,KEY=VALUE...]
                        [--descriptor ...] [--hits N] [--timeout DURATION] [--cacert FILE]

Sends one ShouldRateLimit call (Envoy RLS v3,
envoy.service.ratelimit.v3.RateLimitService) to the server at HOST:PORT, as
Envoy's rate limit filter would, and prints the answer: the overall code, then
for each descriptor its code, the limit that applied (requests per unit and
the rule's name), limit_remaining and duration_until_reset, then the response
headers the server asks Envoy to add. Each call counts: it uses up quota like
a request through Envoy.

Options:
  --address HOST:PORT        the server's gRPC address, e.g. `grpc:` of sluice serve (required)
  --domain DOMAIN            the descriptor domain (required)
  --descriptor KEY=VALUE,... one descriptor, its entries in order; repeat for more (one required)
  --hits N                   the request's hits_addend (default 1)
  --timeout DURATION         how long to wait for the server (default 5s)
  --cacert FILE              speak TLS (a server with `grpc_tls: true`), verifying its
                             certificate against the PEM CA certificates in FILE and the
                             host of --address
  -h, --help                 this text

Exit status:
  0  the answer is OK
  2  the answer is OVER_LIMIT
  1  error: bad arguments, no server reachable within the timeout, or a gRPC error

Example:
  sluice rls query --address 127.0.0.1:8081 --domain edge --descriptor remote_address=192.0.2.7
)";

constexpr OptionSpec kOptions[] = {{"--address", ""}, {"--domain", ""},  {"--descriptor", ""},
                                   {"--hits", ""},    {"--timeout", ""}, {"--cacert", ""}};
// A CA bundle is at most a few hundred kilobytes.
constexpr size_t kMaxCaBytes = 4 * 1024 * 1024;

int usage_error(const std::string& message) {
  std::fprintf(stderr, "sluice rls query: %s\n\nRun `sluice rls query --help` for the options.\n",
               message.c_str());
  return 1;
}

// "k=v,k2=v2" as a descriptor; nullopt when an entry has no '=' or no key.
std::optional<DescriptorPb> parse_descriptor(std::string_view text) {
  DescriptorPb d;
  while (true) {
    const size_t comma = text.find(',');
    const std::string_view entry = text.substr(0, comma);
    const size_t eq = entry.find('=');
    if (eq == std::string_view::npos || eq == 0) return std::nullopt;
    auto* e = d.add_entries();
    e->set_key(std::string(entry.substr(0, eq)));
    e->set_value(std::string(entry.substr(eq + 1)));
    if (comma == std::string_view::npos) return d;
    text.remove_prefix(comma + 1);
  }
}

std::string entries_text(const DescriptorPb& d) {
  std::string s;
  for (const auto& e : d.entries()) {
    if (!s.empty()) s += ',';
    s += e.key() + "=" + e.value();
  }
  return s;
}

std::string seconds_text(const google::protobuf::Duration& d) {
  std::string s = std::to_string(d.seconds());
  if (d.nanos() != 0) {
    std::string frac = std::to_string(1'000'000'000 + d.nanos()).substr(1);
    while (frac.back() == '0') frac.pop_back();
    s += '.';
    s += frac;
  }
  return s + "s";
}

void print_answer(const rlspb::RateLimitRequest& request, const rlspb::RateLimitResponse& r) {
  std::printf("overall: %s\n", rlspb::RateLimitResponse::Code_Name(r.overall_code()).c_str());
  for (int i = 0; i < r.statuses_size(); ++i) {
    const auto& s = r.statuses(i);
    // Appended, not `" " + ...`: GCC 12 reports a false -Wrestrict on that
    // in Release builds.
    std::string entries;
    if (i < request.descriptors_size()) {
      entries = " ";
      entries += entries_text(request.descriptors(i));
    }
    std::printf("descriptor %d%s: %s\n", i + 1, entries.c_str(),
                rlspb::RateLimitResponse::Code_Name(s.code()).c_str());
    if (s.has_current_limit()) {
      const auto& limit = s.current_limit();
      // The proto numbers its units as rls::Unit does (WEEK, 7, is the last).
      const int number = limit.unit();
      const std::string unit(rls::unit_name(
          number >= 0 && number <= 7 ? static_cast<rls::Unit>(number) : rls::Unit::kUnknown));
      std::printf("  limit: %u per %s%s\n", limit.requests_per_unit(), unit.c_str(),
                  limit.name().empty() ? "" : (" (" + limit.name() + ")").c_str());
    } else {
      std::printf("  limit: none\n");
    }
    std::printf("  limit_remaining: %u\n", s.limit_remaining());
    if (s.has_duration_until_reset()) {
      std::printf("  duration_until_reset: %s\n", seconds_text(s.duration_until_reset()).c_str());
    }
  }
  if (r.response_headers_to_add_size() > 0) {
    std::printf("headers:\n");
    for (const auto& h : r.response_headers_to_add()) {
      std::printf("  %s: %s\n", h.key().c_str(), h.value().c_str());
    }
  }
}

// Waits until the channel is connected; false once a connection attempt
// failed (nothing listens there) or the deadline passed.
bool connect(grpc::Channel& channel, std::chrono::system_clock::time_point deadline,
             bool* timed_out) {
  *timed_out = false;
  while (true) {
    const grpc_connectivity_state state = channel.GetState(true);
    if (state == GRPC_CHANNEL_READY) return true;
    if (state == GRPC_CHANNEL_TRANSIENT_FAILURE || state == GRPC_CHANNEL_SHUTDOWN) return false;
    if (!channel.WaitForStateChange(state, deadline)) {
      *timed_out = true;
      return false;
    }
  }
}

int query(std::span<const std::string_view> args) {
  const ParsedArgs parsed = parse_args(args, kOptions);
  if (parsed.help) {
    std::fputs(kRlsUsage, stdout);
    return 0;
  }
  if (!parsed.error.empty()) return usage_error(parsed.error);
  const std::optional<std::string> address = parsed.get("--address");
  const std::optional<std::string> domain = parsed.get("--domain");
  const std::vector<std::string> descriptors = parsed.get_all("--descriptor");
  if (!address) return usage_error("--address HOST:PORT is required");
  if (!domain || domain->empty()) return usage_error("--domain DOMAIN is required");
  if (descriptors.empty()) return usage_error("at least one --descriptor KEY=VALUE is required");

  rlspb::RateLimitRequest request;
  request.set_domain(*domain);
  for (const std::string& text : descriptors) {
    std::optional<DescriptorPb> d = parse_descriptor(text);
    if (!d) {
      return usage_error("--descriptor '" + text +
                         "': each entry must be KEY=VALUE (a non-empty key), entries separated "
                         "by commas");
    }
    *request.add_descriptors() = std::move(*d);
  }
  if (const std::optional<std::string> hits = parsed.get("--hits")) {
    uint64_t n = 0;
    const auto [end, ec] = std::from_chars(hits->data(), hits->data() + hits->size(), n);
    if (ec != std::errc() || end != hits->data() + hits->size() || n == 0 ||
        n > std::numeric_limits<uint32_t>::max()) {
      return usage_error("--hits '" + *hits + "': a whole number from 1 to 4294967295");
    }
    request.set_hits_addend(static_cast<uint32_t>(n));
  }
  const std::string timeout_text = parsed.get("--timeout").value_or("5s");
  const Result<Nanos> timeout = config::parse_duration(timeout_text, false);
  if (!timeout.ok()) {
    return usage_error("--timeout '" + timeout_text + "': " + timeout.error().message);
  }

  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (const std::optional<std::string> ca_file = parsed.get("--cacert")) {
    std::string reason;
    std::optional<std::string> ca =
        config::read_small_file(*ca_file, "the CA file " + *ca_file, kMaxCaBytes, &reason);
    if (!ca) return usage_error("--cacert: " + reason);
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = std::move(*ca);
    credentials = grpc::SslCredentials(tls);
  }
  const auto deadline = std::chrono::system_clock::now() + timeout.value();
  const std::shared_ptr<grpc::Channel> channel = grpc::CreateChannel(*address, credentials);
  bool timed_out = false;
  if (!connect(*channel, deadline, &timed_out)) {
    std::fprintf(stderr, "sluice rls query: cannot connect to %s%s\n", address->c_str(),
                 timed_out ? (" within " + timeout_text).c_str() : "");
    return 1;
  }
  grpc::ClientContext context;
  context.set_deadline(deadline);
  rlspb::RateLimitResponse response;
  const grpc::Status status =
      rlspb::RateLimitService::NewStub(channel)->ShouldRateLimit(&context, request, &response);
  if (!status.ok()) {
    std::fprintf(stderr, "sluice rls query: %s answered with gRPC error %d: %s\n", address->c_str(),
                 static_cast<int>(status.error_code()), status.error_message().c_str());
    return 1;
  }
  print_answer(request, response);
  return response.overall_code() == rlspb::RateLimitResponse::OVER_LIMIT ? 2 : 0;
}

}  // namespace

int run_rls(std::span<const std::string_view> args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::fputs(kRlsUsage, args.empty() ? stderr : stdout);
    return args.empty() ? 1 : 0;
  }
  if (args[0] != "query") {
    std::fprintf(stderr, "sluice rls: unknown command '%.*s'\n\n%s",
                 static_cast<int>(args[0].size()), args[0].data(), kRlsUsage);
    return 1;
  }
  return query(args.subspan(1));
}

}  // namespace sluice::cli
