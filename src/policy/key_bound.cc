#include "policy/key_bound.h"

#include <openssl/evp.h>

#include <array>
#include <stdexcept>

namespace sluice::policy {
namespace {

bool must_hash(std::string_view part) {
  return part.size() > kMaxKeyPartBytes || part.starts_with(kHashedPartPrefix);
}

}  // namespace

std::string hashed_key_part(std::string_view value) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  if (EVP_Digest(value.data(), value.size(), digest.data(), &length, EVP_sha256(), nullptr) != 1) {
    // An OpenSSL without SHA-256 (never a request's doing).
    throw std::runtime_error("SHA-256 failed");
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(kHashedPartBytes);
  out.append(kHashedPartPrefix);
  for (size_t i = 0; i < 16; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 0xf]);
  }
  return out;
}

std::string bounded_key_part(std::string_view value) {
  return must_hash(value) ? hashed_key_part(value) : std::string(value);
}

void bound_key_part(std::string& key, size_t from) {
  const std::string_view part = std::string_view(key).substr(from);
  if (!must_hash(part)) return;
  std::string hashed = hashed_key_part(part);
  key.replace(from, std::string::npos, hashed);
}

}  // namespace sluice::policy
