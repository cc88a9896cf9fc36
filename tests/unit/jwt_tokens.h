// Tokens for the JWT tests, signed here with OpenSSL: HS256 with a secret,
// RS256 with a fresh 2048-bit RSA key, ES256 with a fresh P-256 key, and the
// JWKS that publishes a key.
#pragma once

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rsa.h>

#include <array>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::test {

inline std::string base64url(std::string_view in) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  uint32_t bits = 0;
  int count = 0;
  for (unsigned char c : in) {
    bits = (bits << 8) | c;
    count += 8;
    while (count >= 6) {
      count -= 6;
      out += kAlphabet[(bits >> count) & 63];
    }
  }
  if (count > 0) out += kAlphabet[(bits << (6 - count)) & 63];
  return out;
}

struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};

// A key pair that signs tokens and publishes itself as a JWK.
class SigningKey {
 public:
  static SigningKey rsa(std::string kid) {
    return SigningKey(EVP_RSA_gen(2048), "RS256", std::move(kid));
  }
  static SigningKey ec(std::string kid) {
    return SigningKey(EVP_EC_gen("P-256"), "ES256", std::move(kid));
  }

  const std::string& alg() const { return alg_; }

  // The public key as a JWKS member.
  std::string jwk() const {
    if (alg_ == "RS256") {
      return R"({"kty":"RSA","kid":")" + kid_ + R"(","use":"sig","alg":"RS256","n":")" +
             base64url(bn_param(OSSL_PKEY_PARAM_RSA_N)) + R"(","e":")" +
             base64url(bn_param(OSSL_PKEY_PARAM_RSA_E)) + R"("})";
    }
    return R"({"kty":"EC","kid":")" + kid_ + R"(","crv":"P-256","x":")" +
           base64url(padded(bn_param(OSSL_PKEY_PARAM_EC_PUB_X), 32)) + R"(","y":")" +
           base64url(padded(bn_param(OSSL_PKEY_PARAM_EC_PUB_Y), 32)) + R"("})";
  }

  // header.payload signed; `header` defaults to {"alg":..,"kid":..}.
  std::string token(const std::string& payload, std::string header = "") const {
    if (header.empty()) header = R"({"alg":")" + alg_ + R"(","kid":")" + kid_ + R"("})";
    const std::string signed_part = base64url(header) + "." + base64url(payload);
    return signed_part + "." + base64url(sign(signed_part));
  }

 private:
  SigningKey(EVP_PKEY* key, std::string alg, std::string kid)
      : key_(key), alg_(std::move(alg)), kid_(std::move(kid)) {
    if (key == nullptr) throw std::runtime_error("key generation failed");
  }

  std::string bn_param(const char* name) const {
    BIGNUM* bn = nullptr;
    if (EVP_PKEY_get_bn_param(key_.get(), name, &bn) != 1) throw std::runtime_error(name);
    std::string out(static_cast<size_t>(BN_num_bytes(bn)), '\0');
    BN_bn2bin(bn, reinterpret_cast<unsigned char*>(out.data()));
    BN_free(bn);
    return out;
  }

  static std::string padded(std::string s, size_t n) {
    return std::string(n - std::min(n, s.size()), '\0') + s;
  }

  std::string sign(const std::string& data) const {
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    size_t len = 0;
    EVP_DigestSignInit(ctx, nullptr, EVP_sha256(), nullptr, key_.get());
    EVP_DigestSign(ctx, nullptr, &len, reinterpret_cast<const unsigned char*>(data.data()),
                   data.size());
    std::string sig(len, '\0');
    EVP_DigestSign(ctx, reinterpret_cast<unsigned char*>(sig.data()), &len,
                   reinterpret_cast<const unsigned char*>(data.data()), data.size());
    EVP_MD_CTX_free(ctx);
    sig.resize(len);
    if (alg_ != "ES256") return sig;
    // DER (r, s) to JWS r || s.
    const unsigned char* p = reinterpret_cast<const unsigned char*>(sig.data());
    ECDSA_SIG* es = d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(sig.size()));
    std::string raw(64, '\0');
    BN_bn2binpad(ECDSA_SIG_get0_r(es), reinterpret_cast<unsigned char*>(raw.data()), 32);
    BN_bn2binpad(ECDSA_SIG_get0_s(es), reinterpret_cast<unsigned char*>(raw.data()) + 32, 32);
    ECDSA_SIG_free(es);
    return raw;
  }

  std::unique_ptr<EVP_PKEY, PkeyFree> key_;
  std::string alg_;
  std::string kid_;
};

inline std::string jwks(const std::vector<std::string>& members) {
  std::string out = R"({"keys":[)";
  for (size_t i = 0; i < members.size(); ++i) out += (i > 0 ? "," : "") + members[i];
  return out + "]}";
}

// An HS256 token over `payload` with `secret`.
inline std::string hs256_token(const std::string& secret, const std::string& payload,
                               const std::string& header = R"({"alg":"HS256","typ":"JWT"})") {
  const std::string signed_part = base64url(header) + "." + base64url(payload);
  std::array<unsigned char, EVP_MAX_MD_SIZE> mac{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(signed_part.data()), signed_part.size(), mac.data(),
       &len);
  return signed_part + "." + base64url(std::string(reinterpret_cast<char*>(mac.data()), len));
}

}  // namespace sluice::test
