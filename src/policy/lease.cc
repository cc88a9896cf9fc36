#include "policy/lease.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <algorithm>
#include <stdexcept>

namespace sluice::policy {
namespace {

// The MAC is cut to 128 bits: forging one still takes 2^128 guesses.
constexpr size_t kMacBytes = 16;
// Fixed fields: fingerprint, charged_at, cost (8 bytes each), policy length (2).
constexpr size_t kFixedBytes = 8 + 8 + 8 + 2;
constexpr size_t kMaxPolicyBytes = 0xffff;
constexpr char kHex[] = "0123456789abcdef";

void put_u64(uint64_t v, std::string& out) {
  for (int shift = 56; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((v >> shift) & 0xff));
}

uint64_t get_u64(std::string_view in) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(in[i]);
  return v;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

std::array<unsigned char, kMacBytes> mac_of(const std::array<unsigned char, 32>& secret,
                                            std::string_view data) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> full{};
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
           reinterpret_cast<const unsigned char*>(data.data()), data.size(), full.data(),
           &len) == nullptr) {
    throw std::runtime_error("HMAC-SHA256 failed");  // OpenSSL without SHA-256: not a request error
  }
  std::array<unsigned char, kMacBytes> out{};
  std::copy_n(full.begin(), kMacBytes, out.begin());
  return out;
}

}  // namespace

LeaseSigner::LeaseSigner() {
  if (RAND_bytes(secret_.data(), static_cast<int>(secret_.size())) != 1)
    throw std::runtime_error("cannot draw the lease secret (RAND_bytes failed)");
}

LeaseSigner::LeaseSigner(std::string_view secret) {
  std::copy_n(secret.begin(), std::min(secret.size(), secret_.size()), secret_.begin());
}

std::string LeaseSigner::issue(const Lease& lease) const {
  std::string raw;
  raw.reserve(kFixedBytes + lease.policy.size() + lease.key.size() + kMacBytes);
  put_u64(lease.fingerprint, raw);
  put_u64(static_cast<uint64_t>(lease.charged_at.count()), raw);
  put_u64(lease.cost, raw);
  const size_t policy_bytes = std::min(lease.policy.size(), kMaxPolicyBytes);
  raw.push_back(static_cast<char>(policy_bytes >> 8));
  raw.push_back(static_cast<char>(policy_bytes & 0xff));
  raw.append(lease.policy, 0, policy_bytes);
  raw.append(lease.key);
  const auto mac = mac_of(secret_, raw);
  raw.append(reinterpret_cast<const char*>(mac.data()), mac.size());
  std::string id;
  id.reserve(raw.size() * 2);
  for (const char c : raw) {
    const auto b = static_cast<unsigned char>(c);
    id.push_back(kHex[b >> 4]);
    id.push_back(kHex[b & 0xf]);
  }
  return id;
}

std::optional<Lease> LeaseSigner::open(std::string_view id) const {
  if (id.size() % 2 != 0 || id.size() / 2 < kFixedBytes + kMacBytes) return std::nullopt;
  std::string raw(id.size() / 2, '\0');
  for (size_t i = 0; i < raw.size(); ++i) {
    const int hi = hex_value(id[2 * i]);
    const int lo = hex_value(id[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    raw[i] = static_cast<char>(hi << 4 | lo);
  }
  const std::string_view signed_part = std::string_view(raw).substr(0, raw.size() - kMacBytes);
  const auto mac = mac_of(secret_, signed_part);
  // Constant time: a caller learns nothing from how fast a wrong MAC fails.
  if (CRYPTO_memcmp(mac.data(), raw.data() + signed_part.size(), kMacBytes) != 0)
    return std::nullopt;
  const size_t policy_bytes = static_cast<size_t>(static_cast<unsigned char>(raw[24])) << 8 |
                              static_cast<unsigned char>(raw[25]);
  if (kFixedBytes + policy_bytes > signed_part.size()) return std::nullopt;
  Lease lease;
  lease.fingerprint = get_u64(signed_part.substr(0, 8));
  lease.charged_at = Nanos{static_cast<int64_t>(get_u64(signed_part.substr(8, 8)))};
  lease.cost = get_u64(signed_part.substr(16, 8));
  lease.policy = std::string(signed_part.substr(kFixedBytes, policy_bytes));
  lease.key = std::string(signed_part.substr(kFixedBytes + policy_bytes));
  return lease;
}

}  // namespace sluice::policy
