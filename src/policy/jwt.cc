#include "policy/jwt.h"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/param_build.h>

#include <array>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <utility>

#include "util/ascii.h"

namespace sluice::policy {

namespace json = boost::json;
using util::iequals;
using util::trim;

namespace {

Error bad(std::string message) {
  return Error{ErrorCode::kInvalidArgument, std::move(message)};
}

// base64url without padding (RFC 7515 §2); nullopt on any other byte.
std::optional<std::string> base64url_decode(std::string_view in) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '-') return 62;
    if (c == '_') return 63;
    return -1;
  };
  if (in.size() % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(in.size() * 3 / 4);
  uint32_t bits = 0;
  int count = 0;
  for (char c : in) {
    const int v = value(c);
    if (v < 0) return std::nullopt;
    bits = (bits << 6) | static_cast<uint32_t>(v);
    count += 6;
    if (count >= 8) {
      count -= 8;
      out.push_back(static_cast<char>((bits >> count) & 0xff));
    }
  }
  return out;
}

const unsigned char* bytes(std::string_view s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}

struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;

// A public key from OSSL_PARAMs built by `build` ("RSA" or "EC").
template <class Build>
Pkey pkey_from(const char* type, Build build) {
  OSSL_PARAM_BLD* bld = OSSL_PARAM_BLD_new();
  if (bld == nullptr) return nullptr;
  std::vector<BIGNUM*> numbers;
  Pkey out;
  if (build(bld, numbers)) {
    OSSL_PARAM* params = OSSL_PARAM_BLD_to_param(bld);
    EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new_from_name(nullptr, type, nullptr);
    EVP_PKEY* key = nullptr;
    if (params != nullptr && ctx != nullptr && EVP_PKEY_fromdata_init(ctx) == 1 &&
        EVP_PKEY_fromdata(ctx, &key, EVP_PKEY_PUBLIC_KEY, params) == 1) {
      out.reset(key);
    }
    EVP_PKEY_CTX_free(ctx);
    OSSL_PARAM_free(params);
  }
  for (BIGNUM* n : numbers) BN_free(n);
  OSSL_PARAM_BLD_free(bld);
  return out;
}

const json::string* string_field(const json::object& o, std::string_view name) {
  const json::value* v = o.if_contains(name);
  return v != nullptr ? v->if_string() : nullptr;
}

// A member of the JWKS's "keys" (RFC 7517/7518): RSA (n, e) or EC P-256 (x, y).
Result<Pkey> jwk_key(const json::object& jwk, std::string* alg) {
  const json::string* kty = string_field(jwk, "kty");
  if (kty == nullptr) return bad("no \"kty\"");
  auto decoded = [&](const char* name) -> std::optional<std::string> {
    const json::string* s = string_field(jwk, name);
    if (s == nullptr) return std::nullopt;
    return base64url_decode(std::string_view(s->data(), s->size()));
  };
  if (*kty == "RSA") {
    const std::optional<std::string> n = decoded("n");
    const std::optional<std::string> e = decoded("e");
    if (!n || !e || n->empty() || e->empty())
      return bad("an RSA key needs base64url \"n\" and \"e\"");
    if (n->size() < 256) return bad("an RSA key shorter than 2048 bits is refused");
    *alg = "RS256";
    Pkey key = pkey_from("RSA", [&](OSSL_PARAM_BLD* bld, std::vector<BIGNUM*>& numbers) {
      BIGNUM* bn_n = BN_bin2bn(bytes(*n), static_cast<int>(n->size()), nullptr);
      BIGNUM* bn_e = BN_bin2bn(bytes(*e), static_cast<int>(e->size()), nullptr);
      numbers = {bn_n, bn_e};
      return bn_n != nullptr && bn_e != nullptr &&
             OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, bn_n) == 1 &&
             OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, bn_e) == 1;
    });
    if (!key) return bad("OpenSSL refused the RSA key");
    return key;
  }
  if (*kty == "EC") {
    const json::string* crv = string_field(jwk, "crv");
    if (crv == nullptr || *crv != "P-256")
      return bad("an EC key must be on \"crv\": \"P-256\" (ES256)");
    const std::optional<std::string> x = decoded("x");
    const std::optional<std::string> y = decoded("y");
    if (!x || !y || x->size() != 32 || y->size() != 32) {
      return bad("an EC P-256 key needs base64url \"x\" and \"y\" of 32 bytes each");
    }
    *alg = "ES256";
    const std::string point = "\x04" + *x + *y;
    Pkey key = pkey_from("EC", [&](OSSL_PARAM_BLD* bld, std::vector<BIGNUM*>&) {
      return OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) ==
                 1 &&
             OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, point.data(),
                                              point.size()) == 1;
    });
    if (!key) return bad("OpenSSL refused the EC key (not a point on P-256?)");
    return key;
  }
  return bad("\"kty\": \"" + std::string(kty->data(), kty->size()) +
             "\"; RSA (RS256) and EC (ES256) keys are supported");
}

bool verify_with(EVP_PKEY* key, std::string_view data, const unsigned char* sig, size_t sig_len) {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  if (ctx == nullptr) return false;
  const bool ok = EVP_DigestVerifyInit(ctx, nullptr, EVP_sha256(), nullptr, key) == 1 &&
                  EVP_DigestVerify(ctx, sig, sig_len, bytes(data), data.size()) == 1;
  EVP_MD_CTX_free(ctx);
  return ok;
}

// ES256 signatures are r || s (32 bytes each); OpenSSL verifies DER.
std::optional<std::string> ecdsa_der(std::string_view raw) {
  if (raw.size() != 64) return std::nullopt;
  ECDSA_SIG* sig = ECDSA_SIG_new();
  if (sig == nullptr) return std::nullopt;
  BIGNUM* r = BN_bin2bn(bytes(raw), 32, nullptr);
  BIGNUM* s = BN_bin2bn(bytes(raw.substr(32)), 32, nullptr);
  std::optional<std::string> out;
  if (r != nullptr && s != nullptr && ECDSA_SIG_set0(sig, r, s) == 1) {
    r = s = nullptr;  // owned by sig now
    unsigned char* der = nullptr;
    const int len = i2d_ECDSA_SIG(sig, &der);
    if (len > 0) out = std::string(reinterpret_cast<char*>(der), static_cast<size_t>(len));
    OPENSSL_free(der);
  }
  BN_free(r);
  BN_free(s);
  ECDSA_SIG_free(sig);
  return out;
}

// A NumericDate claim (exp, nbf): a JSON number, whole or not.
std::optional<double> numeric_date(const json::value* v) {
  if (v == nullptr) return std::nullopt;
  if (v->is_int64()) return static_cast<double>(v->get_int64());
  if (v->is_uint64()) return static_cast<double>(v->get_uint64());
  if (v->is_double()) return v->get_double();
  return std::nullopt;
}

std::optional<json::object> json_object(std::string_view part) {
  const std::optional<std::string> text = base64url_decode(part);
  if (!text) return std::nullopt;
  boost::system::error_code ec;
  json::value v = json::parse(*text, ec);
  if (ec || !v.is_object()) return std::nullopt;
  return std::move(v.as_object());
}

}  // namespace

struct JwtVerifier::Key {
  std::string kid;
  std::string alg;  // "RS256" or "ES256"
  Pkey pkey;
};

JwtVerifier::~JwtVerifier() = default;

Result<std::shared_ptr<const JwtVerifier>> JwtVerifier::make(const JwtSettings& settings) {
  std::shared_ptr<JwtVerifier> v(new JwtVerifier());
  v->issuer_ = settings.issuer;
  v->audience_ = settings.audience;
  if (settings.jwks_file.empty()) {
    if (settings.secret.empty()) return bad("the HS256 secret is empty");
    v->secret_ = settings.secret;
    return std::shared_ptr<const JwtVerifier>(std::move(v));
  }
  boost::system::error_code ec;
  const json::value doc = json::parse(settings.jwks, ec);
  if (ec) return bad("is not JSON (" + ec.message() + ")");
  const json::array* keys = nullptr;
  if (const json::object* o = doc.if_object()) {
    if (const json::value* k = o->if_contains("keys")) keys = k->if_array();
  }
  if (keys == nullptr) return bad("must be a JWKS: an object with a \"keys\" array");
  for (size_t i = 0; i < keys->size(); ++i) {
    const std::string which = "has a bad key " + std::to_string(i + 1) + ":";
    const json::object* jwk = (*keys)[i].if_object();
    if (jwk == nullptr) return bad(which + " not an object");
    // Keys for other uses (encryption) are skipped, not refused.
    if (const json::string* use = string_field(*jwk, "use"); use != nullptr && *use != "sig") {
      continue;
    }
    auto key = std::make_unique<Key>();
    Result<Pkey> pkey = jwk_key(*jwk, &key->alg);
    if (!pkey.ok()) return bad(which + " " + pkey.error().message);
    if (const json::string* alg = string_field(*jwk, "alg");
        alg != nullptr && std::string_view(alg->data(), alg->size()) != key->alg) {
      return bad(which + " \"alg\": \"" + std::string(alg->data(), alg->size()) +
                 "\" does not fit its key (" + key->alg + ")");
    }
    if (const json::string* kid = string_field(*jwk, "kid"))
      key->kid.assign(kid->data(), kid->size());
    key->pkey = std::move(pkey).value();
    v->keys_.push_back(std::move(key));
  }
  if (v->keys_.empty()) return bad("has no signing key");
  return std::shared_ptr<const JwtVerifier>(std::move(v));
}

size_t JwtVerifier::key_count() const {
  return secret_.empty() ? keys_.size() : 1;
}

bool JwtVerifier::signature_ok(std::string_view alg, std::string_view kid,
                               std::string_view signed_part, std::string_view signature) const {
  if (!secret_.empty()) {
    if (alg != "HS256") return false;
    std::array<unsigned char, EVP_MAX_MD_SIZE> mac{};
    unsigned int mac_len = 0;
    if (HMAC(EVP_sha256(), secret_.data(), static_cast<int>(secret_.size()), bytes(signed_part),
             signed_part.size(), mac.data(), &mac_len) == nullptr) {
      return false;
    }
    return signature.size() == mac_len && CRYPTO_memcmp(mac.data(), signature.data(), mac_len) == 0;
  }
  std::optional<std::string> der;
  if (alg == "ES256") {
    der = ecdsa_der(signature);
    if (!der) return false;
  } else if (alg != "RS256") {
    return false;
  }
  const std::string_view sig = der ? std::string_view(*der) : signature;
  for (const std::unique_ptr<Key>& key : keys_) {
    if (key->alg != alg || (!kid.empty() && key->kid != kid)) continue;
    if (verify_with(key->pkey.get(), signed_part, bytes(sig), sig.size())) return true;
  }
  return false;
}

// Everything about a token that does not depend on the time: its signature,
// issuer and audience, its validity window, and its scalar claims as text.
std::optional<JwtVerifier::Verified> JwtVerifier::verify(std::string_view token) const {
  const size_t dot1 = token.find('.');
  if (dot1 == std::string_view::npos) return std::nullopt;
  const size_t dot2 = token.find('.', dot1 + 1);
  if (dot2 == std::string_view::npos || token.find('.', dot2 + 1) != std::string_view::npos) {
    return std::nullopt;
  }
  const std::optional<json::object> header = json_object(token.substr(0, dot1));
  if (!header) return std::nullopt;
  const json::string* alg = string_field(*header, "alg");
  if (alg == nullptr) return std::nullopt;
  const json::string* kid = string_field(*header, "kid");
  const std::optional<std::string> signature = base64url_decode(token.substr(dot2 + 1));
  if (!signature || !signature_ok(std::string_view(alg->data(), alg->size()),
                                  kid != nullptr ? std::string_view(kid->data(), kid->size())
                                                 : std::string_view(),
                                  token.substr(0, dot2), *signature)) {
    return std::nullopt;
  }
  const std::optional<json::object> payload = json_object(token.substr(dot1 + 1, dot2 - dot1 - 1));
  if (!payload) return std::nullopt;
  Verified v;
  if (const json::value* exp = payload->if_contains("exp")) {
    const std::optional<double> t = numeric_date(exp);
    if (!t) return std::nullopt;
    v.expires = *t;
  }
  if (const json::value* nbf = payload->if_contains("nbf")) {
    const std::optional<double> t = numeric_date(nbf);
    if (!t) return std::nullopt;
    v.not_before = *t;
  }
  if (!issuer_.empty()) {
    const json::string* iss = string_field(*payload, "iss");
    if (iss == nullptr || std::string_view(iss->data(), iss->size()) != issuer_)
      return std::nullopt;
  }
  if (!audience_.empty()) {
    const json::value* aud = payload->if_contains("aud");
    bool found = false;
    if (aud != nullptr && aud->is_string()) {
      found = aud->get_string() == audience_;
    } else if (aud != nullptr && aud->is_array()) {
      for (const json::value& a : aud->get_array())
        found = found || (a.is_string() && a.get_string() == audience_);
    }
    if (!found) return std::nullopt;
  }
  for (const auto& [key, value] : *payload) {
    std::string text;
    if (const json::string* s = value.if_string()) {
      text.assign(s->data(), s->size());
    } else if (value.is_int64() || value.is_uint64() || value.is_double() || value.is_bool()) {
      text = json::serialize(value);
    }
    if (!text.empty()) v.claims.emplace(std::string(key), std::move(text));
  }
  return v;
}

std::optional<std::string> JwtVerifier::claim(std::string_view token, std::string_view name,
                                              int64_t now_s) const {
  // Verifying a signature costs microseconds (tens for ES256): a client
  // sends the same token with every request, so verified tokens are kept.
  CacheShard& shard = cache_[std::hash<std::string_view>{}(token) % cache_.size()];
  std::shared_ptr<const Verified> verified;
  {
    std::lock_guard lock(shard.mutex);
    if (auto it = shard.tokens.find(token); it != shard.tokens.end()) verified = it->second;
  }
  if (verified == nullptr) {
    std::optional<Verified> v = verify(token);
    if (!v) return std::nullopt;  // not kept: what fails costs the sender as much each time
    verified = std::make_shared<const Verified>(std::move(*v));
    std::lock_guard lock(shard.mutex);
    // Bounded: a full shard starts over (tokens are re-verified, never wrongly kept).
    if (shard.tokens.size() >= kCacheEntriesPerShard) shard.tokens.clear();
    shard.tokens.emplace(std::string(token), verified);
  }
  const double now = static_cast<double>(now_s);
  if (now >= verified->expires || now < verified->not_before) return std::nullopt;
  const auto it = verified->claims.find(name);
  if (it == verified->claims.end()) return std::nullopt;
  return it->second;
}

std::string_view bearer_token(std::string_view authorization) {
  authorization = trim(authorization);
  if (authorization.size() < 7 || !iequals(authorization.substr(0, 7), "bearer ")) return {};
  return trim(authorization.substr(7));
}

}  // namespace sluice::policy
