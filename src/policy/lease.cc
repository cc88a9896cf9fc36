#include "policy/lease.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <algorithm>
#include <stdexcept>

namespace sluice::policy {
namespace {

constexpr char kHex[] = "0123456789abcdef";

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

void append_hex(std::string& out, const unsigned char* bytes, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    out.push_back(kHex[bytes[i] >> 4]);
    out.push_back(kHex[bytes[i] & 0xf]);
  }
}

}  // namespace

LeaseTable::LeaseTable(size_t capacity) : capacity_(std::max<size_t>(capacity, 1)) {
  if (RAND_bytes(secret_.data(), static_cast<int>(secret_.size())) != 1)
    throw std::runtime_error("cannot draw the lease secret (RAND_bytes failed)");
}

LeaseTable::LeaseTable(size_t capacity, std::string_view secret)
    : capacity_(std::max<size_t>(capacity, 1)) {
  std::copy_n(secret.begin(), std::min(secret.size(), secret_.size()), secret_.begin());
}

std::array<unsigned char, 16> LeaseTable::mac_of(std::string_view token) const {
  std::array<unsigned char, EVP_MAX_MD_SIZE> full{};
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), secret_.data(), static_cast<int>(secret_.size()),
           reinterpret_cast<const unsigned char*>(token.data()), token.size(), full.data(),
           &len) == nullptr) {
    throw std::runtime_error("HMAC-SHA256 failed");  // OpenSSL without SHA-256: not a request error
  }
  std::array<unsigned char, 16> out{};
  std::copy_n(full.begin(), out.size(), out.begin());
  return out;
}

void LeaseTable::erase(std::unordered_map<std::string, Entry>::iterator it) {
  by_end_.erase(it->second.by_end);
  held_.erase(it);
}

void LeaseTable::drop_ended(Nanos now) {
  while (!by_end_.empty() && by_end_.begin()->first <= now) {
    erase(held_.find(*by_end_.begin()->second));
  }
}

std::string LeaseTable::issue(Lease lease, Nanos now) {
  std::string token(kTokenBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(token.data()), static_cast<int>(kTokenBytes)) !=
      1) {
    throw std::runtime_error("cannot draw a lease id (RAND_bytes failed)");
  }
  const auto mac = mac_of(token);
  std::string id;
  id.reserve(2 * (kTokenBytes + mac.size()));
  append_hex(id, reinterpret_cast<const unsigned char*>(token.data()), token.size());
  append_hex(id, mac.data(), mac.size());

  const Nanos ends_at = lease.ends_at;
  std::lock_guard lock(mutex_);
  drop_ended(now);
  // Past capacity the lease that ends first goes: its slot is the nearest
  // to freeing itself.
  while (held_.size() >= capacity_) erase(held_.find(*by_end_.begin()->second));
  // 128 random bits: a token already held is never drawn in practice, and
  // would only keep the older lease.
  const auto [it, inserted] = held_.emplace(std::move(token), Entry{std::move(lease), {}});
  if (inserted) it->second.by_end = by_end_.emplace(ends_at, &it->first);
  return id;
}

LeaseTable::Taken LeaseTable::take(std::string_view id, Nanos now) {
  Taken out;
  if (id.size() != 2 * (kTokenBytes + 16)) return out;
  std::string raw(id.size() / 2, '\0');
  for (size_t i = 0; i < raw.size(); ++i) {
    const int hi = hex_value(id[2 * i]);
    const int lo = hex_value(id[2 * i + 1]);
    if (hi < 0 || lo < 0) return out;
    raw[i] = static_cast<char>(hi << 4 | lo);
  }
  const std::string token = raw.substr(0, kTokenBytes);
  const auto mac = mac_of(token);
  // Constant time: a caller learns nothing from how fast a wrong MAC fails.
  if (CRYPTO_memcmp(mac.data(), raw.data() + kTokenBytes, mac.size()) != 0) return out;

  out.outcome = Outcome::kNotHeld;
  std::lock_guard lock(mutex_);
  const auto it = held_.find(token);
  if (it == held_.end()) return out;
  const bool ended = it->second.lease.ends_at <= now;
  if (!ended) {
    out.outcome = Outcome::kTaken;
    out.lease = std::move(it->second.lease);
  }
  erase(it);
  return out;
}

size_t LeaseTable::size() const {
  std::lock_guard lock(mutex_);
  return held_.size();
}

}  // namespace sluice::policy
